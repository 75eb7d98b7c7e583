"""Structured granularities (kernel, filter, input channel, blocks, N:M)."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune import masks as structured
from tf1prune.plan import spec as spec_module
from tf1prune.masks import magnitude_mask
from tests.support import np_reference

SPARSITIES = [0.0, 0.3, 0.5, 0.9]


def _int_weight(shape, seed):
  """Distinct integer magnitudes with random signs: sums stay exact."""
  rs = np.random.RandomState(seed)
  size = int(np.prod(shape))
  values = rs.permutation(np.arange(1, size + 1)).astype(np.float32)
  return (values * rs.choice([-1.0, 1.0], size)).reshape(shape)


# NumPy references -----------------------------------------------------------

def np_group_scores(w, block, importance):
  shape = w.shape
  counts = [-(-s // b) for s, b in zip(shape, block)]
  padded = np.zeros([n * b for n, b in zip(counts, block)], np.float32)
  padded[tuple(slice(0, s) for s in shape)] = np.abs(w)
  blocks = padded.reshape([d for n, b in zip(counts, block) for d in (n, b)])
  axes = tuple(range(1, 2 * len(shape), 2))
  if importance == 'max':
    return blocks.max(axis=axes)
  if importance == 'l2':
    return np.sqrt(np.square(blocks).sum(axis=axes, dtype=np.float32))
  return blocks.sum(axis=axes, dtype=np.float32)


def np_group_mask(w, block, importance, sparsity):
  scores = np_group_scores(w, block, importance)
  group_mask = np_reference.magnitude_mask(scores, sparsity)
  for axis, b in enumerate(block):
    group_mask = np.repeat(group_mask, b, axis=axis)
  return group_mask[tuple(slice(0, s) for s in w.shape)]


def np_nm_mask(w, n, m):
  """Keeps the n largest |w| of every m consecutive entries of axis -2."""
  moved = np.moveaxis(np.abs(w), -2, -1)
  groups = moved.reshape(-1, m)
  mask = np.zeros_like(groups)
  for g, row in enumerate(groups):
    order = sorted(range(m), key=lambda i: (-row[i], i))
    mask[g, order[:n]] = 1.0
  return np.moveaxis(mask.reshape(moved.shape), -1, -2)


def _masks(granularity, w, sparsities):
  weight = tf.constant(w)
  sparsity = tf.placeholder(tf.float32, [])
  mask, threshold = granularity.compute_mask(weight, sparsity, magnitude_mask)
  with tf.Session() as sess:
    return [sess.run([mask, threshold], {sparsity: s}) for s in sparsities]


# Group granularities against NumPy -------------------------------------------

CASES = [
    # (granularity factory, weight shape, block shape for the reference)
    (structured.Kernel, (3, 3, 4, 5), (3, 3, 1, 1)),
    (structured.Kernel, (2, 4, 6), (2, 1, 1)),
    (structured.Filter, (3, 3, 4, 5), (3, 3, 4, 1)),
    (structured.Filter, (12, 7), (12, 1)),
    (structured.InputChannel, (3, 3, 4, 5), (3, 3, 1, 5)),
    (structured.InputChannel, (12, 7), (1, 7)),
    (lambda imp: structured.ChannelBlock([2, 2], imp), (3, 3, 5, 6),
     (3, 3, 2, 2)),
    (lambda imp: structured.ChannelBlock([4, -1], imp), (10, 6), (4, 6)),
    (lambda imp: structured.ChannelBlock([1, 3, 2, 2], imp), (3, 3, 4, 4),
     (1, 3, 2, 2)),
]


@pytest.mark.parametrize('importance', ['l1', 'l2', 'max'])
@pytest.mark.parametrize('factory,shape,block', CASES)
def test_group_masks_equal_numpy_reference(factory, shape, block, importance):
  w = _int_weight(shape, seed=len(shape) * 7 + shape[-1])
  granularity = factory(importance)
  for s, (mask, threshold) in zip(SPARSITIES, _masks(granularity, w,
                                                     SPARSITIES)):
    expected = np_group_mask(w, block, importance, s)
    np.testing.assert_array_equal(mask, expected, err_msg='sparsity %s' % s)
    scores = np_group_scores(w, block, importance)
    kept = scores[np_reference.magnitude_mask(scores, s) == 1.0]
    assert threshold == kept.min()


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_a_max_over_a_nan_is_nan_on_every_stack(dtype):
  # Block MAX, the 'max' importance and the coupled 'max' reduction score a
  # group holding a NaN as NaN, so it ranks first, as l1, l2 and AVG do, on
  # both stacks: TF 1.15's reduce_max skips a NaN (it would score the group
  # by its other entries), TF 2.x's returns it.
  w = _int_weight((4, 6), seed=5).astype(dtype)
  w[2, 4], w[0, 1], w[3, 0] = np.nan, np.inf, -np.nan
  other = _int_weight((2, 6), seed=6).astype(dtype)
  other[1, 3] = np.nan
  sparsities = [0.3, 0.5, 0.7, 0.9]
  for s, (mask, t) in zip(sparsities[1:], _masks(structured.Filter('max'), w,
                                             sparsities[1:])):
    np.testing.assert_array_equal(mask, np_group_mask(w, (4, 1), 'max', s))
    assert t == np.inf, s    # the 3 NaN and inf filters are the top 3
  for s, (mask, t) in zip(sparsities, _masks(structured.Block(2, 2, 'MAX'), w,
                                             sparsities)):
    want = np_reference.block_mask(w, (2, 2), 'MAX', s)[0]
    np.testing.assert_array_equal(mask, want, err_msg=str(s))
    scores = np_reference.block_scores(w, 2, 2, 'MAX')
    kept = scores[np_reference.magnitude_mask(scores, s) == 1]
    assert t == np.float32(np.min(kept[~np.isnan(kept)], initial=np.inf)), s
  units = np.fmax(np.abs(w).max(0), np.abs(other).max(0))
  units[np.isnan(np.abs(w).max(0)) | np.isnan(np.abs(other).max(0))] = np.nan
  sparsity = tf.placeholder(tf.float32, [])
  masks, threshold = structured.coupled_filter_masks(
      [(tf.constant(w), -1, range(6)), (tf.constant(other), -1, range(6))], 6,
      sparsity, magnitude_mask, importance='max', reduction='max')
  with tf.Session() as sess:
    for s in sparsities:
      (got, got_other), t = sess.run([masks, threshold], {sparsity: s})
      want = np_reference.magnitude_mask(units, s)
      np.testing.assert_array_equal(got, np.tile(want, [4, 1]), str(s))
      np.testing.assert_array_equal(got_other, np.tile(want, [2, 1]), str(s))
      kept = units[want == 1]
      assert t == np.float32(np.min(kept[~np.isnan(kept)], initial=np.inf)), s


def test_kernel_pruning_zeroes_exactly_the_scheduled_number_of_kernels():
  w = np.random.RandomState(3).randn(5, 5, 8, 16).astype(np.float32)
  (mask, _), = _masks(structured.Kernel('l1'), w, [0.75])
  per_kernel = mask.reshape(25, 8 * 16)
  # Every kernel is all kept or all pruned; 25% of 128 kernels are kept.
  assert set(per_kernel.min(0) == per_kernel.max(0)) == {True}
  assert int(per_kernel[0].sum()) == 32


def test_filter_ties_keep_the_earliest_filters():
  w = np.ones([2, 2, 3, 4], np.float32)
  (mask, threshold), = _masks(structured.Filter('l2'), w, [0.5])
  assert mask[0, 0, 0].tolist() == [1.0, 1.0, 0.0, 0.0]
  assert threshold == pytest.approx(np.sqrt(12.0))


def test_partial_edge_blocks_are_scored_on_their_real_entries():
  # 5 inputs in blocks of 2: the last block has one row. With 'max' it
  # wins on its single large entry.
  w = np.ones([5, 2], np.float32)
  w[4, :] = 10.0
  (mask, _), = _masks(structured.ChannelBlock([2, 2], 'max'), w, [0.6])
  assert mask[:, 0].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]


def test_rank_too_small_raises_naming_the_weight_and_the_fix():
  weight = tf.constant(np.ones([4], np.float32), name='bias')
  with pytest.raises(ValueError, match=r'kernel granularity needs a weight .* '
                     r'rank >= 2; bias has shape \(4,\)'):
    structured.Kernel().compute_mask(weight, 0.5, magnitude_mask)


def test_bad_importance_and_block_dims_raise():
  with pytest.raises(ValueError, match="must be one of l1, l2, max, got 'l3'"):
    structured.Filter('l3')
  with pytest.raises(ValueError, match=r'each >= 1 or -1 .* got \[0, 2\]'):
    structured.ChannelBlock([0, 2])
  with pytest.raises(ValueError, match='3 sizes but the weight has shape'):
    structured.ChannelBlock([1, 2, 2]).compute_mask(
        tf.zeros([3, 3, 4, 4]), 0.5, magnitude_mask)


# N:M ---------------------------------------------------------------------------

@pytest.mark.parametrize('n,m,shape', [(2, 4, (3, 3, 8, 4)), (2, 4, (8, 3)),
                                       (1, 4, (12, 5)), (3, 8, (2, 1, 16, 3))])
def test_nm_mask_equals_numpy_reference(n, m, shape):
  w = np.random.RandomState(n * m).randn(*shape).astype(np.float32)
  (mask, threshold), = _masks(structured.NM(n, m), w, [0.5])
  np.testing.assert_array_equal(mask, np_nm_mask(w, n, m))
  assert mask.mean() == pytest.approx(float(n) / m)
  assert threshold == np.abs(w)[mask == 1.0].min()


def test_nm_ignores_the_sparsity_value_but_waits_for_it_to_be_positive():
  w = _int_weight((8, 2), seed=1)
  (off, off_t), (low, _), (high, _) = _masks(structured.NM(2, 4), w,
                                             [0.0, 0.1, 0.9])
  assert off.min() == 1.0 and off_t == np.abs(w).min()
  np.testing.assert_array_equal(low, np_nm_mask(w, 2, 4))
  np.testing.assert_array_equal(high, low)


def test_nm_ties_keep_the_earlier_inputs():
  w = np.array([[1.0], [3.0], [1.0], [1.0]], np.float32)
  (mask, _), = _masks(structured.NM(2, 4), w, [0.5])
  assert mask[:, 0].tolist() == [1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_nm_ranks_nan_above_inf_and_its_threshold_is_never_nan(dtype):
  # Groups of 4 inputs (one column each): NaN ranks above +inf, which ranks
  # above every finite value, equal NaNs earliest first (a NaN is not an inf
  # to come after an earlier inf), and the threshold is the smallest kept
  # magnitude that is not NaN, on both stacks.
  w = np.array([[np.inf, 1.0, np.nan], [-np.nan, 2.0, 5.0],
                [3.0, np.nan, -np.inf], [-7.0, 4.0, np.nan]], dtype)
  (one, t_one), (two, t_two) = [
      _masks(structured.NM(n, 4), w, [0.5])[0] for n in (1, 2)]
  assert one.T.tolist() == [[0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0]]
  assert t_one == np.inf
  assert two.T.tolist() == [[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1]]
  assert t_two == 4.0


def test_nm_needs_inputs_divisible_by_m_and_n_below_m():
  with pytest.raises(ValueError, match=r'2:4 sparsity .* w \(shape \[5, 3\]\)'
                     r'.* 5 is not a multiple of 4'):
    structured.NM(2, 4).compute_mask(tf.zeros([5, 3], name='w'), 0.5)
  with pytest.raises(ValueError, match='1 <= n < m, got n=4, m=4'):
    structured.NM(4, 4)


def test_frozen_nm_keeps_its_first_mask_when_the_weights_change():
  w = tf.Variable(np.arange(1.0, 9.0, dtype=np.float32).reshape(8, 1))
  mask = tf.Variable(tf.ones([8, 1]))
  new_mask, _ = structured.NM(2, 4, previous_mask=mask).compute_mask(w, 0.5)
  update = tf.assign(mask, new_mask)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(update)[:, 0].tolist()
    sess.run(tf.assign(w, w[::-1]))          # now the first inputs are largest
    second = sess.run(update)[:, 0].tolist()
  assert first == [0, 0, 1, 1, 0, 0, 1, 1]
  assert second == first


# granularity_map syntax ----------------------------------------------------------

@pytest.mark.parametrize('text,kind,args,frozen', [
    ('element', 'element', (), False), ('kernel', 'kernel', (), False),
    ('Filter', 'filter', (), False), ('input_channel', 'input_channel', (), False),
    ('block4x8', 'block', (4, 8), False), ('block1x1x2x-1', 'block', (1, 1, 2, -1), False),
    ('2of4', 'nm', (2, 4), False), ('1of8_frozen', 'nm', (1, 8), True)])
def test_parse_granularity(text, kind, args, frozen):
  assert spec_module.parse_granularity(text) == (kind, args, frozen)


@pytest.mark.parametrize('text', ['channel', '4of4', 'block0x2', 'block4', '2:4'])
def test_parse_granularity_rejects_unknown_values(text):
  with pytest.raises(ValueError):
    spec_module.parse_granularity(text)


def test_granularity_from_string_builds_the_classes():
  assert repr(spec_module.granularity_from_string('kernel', 'max')) == \
      "Kernel('max')"
  assert repr(spec_module.granularity_from_string('block2x2')) == \
      "ChannelBlock([2, 2], 'l1')"
  assert repr(spec_module.granularity_from_string('2of4')) == \
      'NM(2, 4, frozen=False)'


# Through Pruning and the hparams -------------------------------------------------

def _network():
  images = tf.constant(np.random.RandomState(0).randn(2, 8, 8, 4), tf.float32)
  net = tf1prune.masked_conv2d(images, 8, 3, scope='conv1')
  net = tf1prune.masked_conv2d(net, 8, 3, scope='conv2')
  net = tf1prune.masked_conv2d(net, 8, 3, scope='conv3')
  net = tf.reshape(net, [2, -1])
  net = tf1prune.masked_fully_connected(net, 16, scope='fc1')
  return tf1prune.masked_fully_connected(net, 8, scope='fc2')


def _pruned(hparams, conditional=False):
  step = tf.train.get_or_create_global_step()
  _network()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams))
  update = p.conditional_mask_update_op() if conditional else p.mask_update_op()
  records = tf1prune.masked_weight_records()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 100))
    sess.run(update)
    return {r.name.split('/')[0]: sess.run([r.weight, r.mask])
            for r in records}


@pytest.mark.parametrize('conditional', [False, True])
def test_granularity_map_chooses_the_granularity_per_weight(conditional):
  got = _pruned('target_sparsity=0.5,group_importance=l2,granularity_map='
                '[conv1:filter,conv2:kernel,conv3:block2x4,fc1:2of4]',
                conditional)
  for name, block in (('conv1', (3, 3, 4, 1)), ('conv2', (3, 3, 1, 1)),
                      ('conv3', (3, 3, 2, 4))):
    w, mask = got[name]
    np.testing.assert_array_equal(mask, np_group_mask(w, block, 'l2', 0.5),
                                  err_msg=name)
  w, mask = got['fc1']
  np.testing.assert_array_equal(mask, np_nm_mask(w, 2, 4))
  w, mask = got['fc2']                     # not in the map: element
  np.testing.assert_array_equal(mask, np_reference.magnitude_mask(
      np.abs(w), 0.5))


def test_frozen_nm_through_the_conditional_update():
  step = tf.train.get_or_create_global_step()
  _network()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'pruning_frequency=1,granularity_map=[fc1:2of4_frozen]'))
  update = p.conditional_mask_update_op()
  weight, = [v for v in tf.global_variables() if v.op.name == 'fc1/weights']
  mask, = [m for m in tf1prune.get_masks() if m.op.name == 'fc1/mask']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 10))
    sess.run(update)
    first = sess.run(mask)
    sess.run(tf.assign(weight, -tf.reverse(weight, [0])))
    sess.run(tf.assign(step, 20))
    sess.run(update)
    np.testing.assert_array_equal(sess.run(mask), first)
  assert first.mean() == 0.5


def test_pruning_rejects_bad_granularity_settings():
  tf.train.get_or_create_global_step()
  _network()
  hp = tf1prune.get_pruning_hparams
  with pytest.raises(ValueError, match=r"granularity_map entry 'conv1:kern' "
                     r"has a bad value: unknown granularity 'kern'"):
    tf1prune.Pruning(hp().parse('granularity_map=[conv1:kern]'))
  with pytest.raises(ValueError, match="group_importance must be 'l1', 'l2' or "
                     "'max', got 'avg'"):
    tf1prune.Pruning(hp().parse('group_importance=avg'))
  p = tf1prune.Pruning(hp().parse('granularity_map=[fc1:filter],'
                                  'block_dims_map=[fc1:2x2]'))
  with pytest.raises(ValueError, match='fc1/weights is in both granularity_map '
                     'and block_dims_map'):
    p.mask_update_op()


@pytest.mark.parametrize('method,decay', [('exact', 0.0), ('exact', 0.5),
                                          ('histogram', 0.0)])
def test_group_masks_stay_whole_groups_with_each_threshold_method(method,
                                                                   decay):
  got = _pruned('target_sparsity=0.5,threshold_method=%s,threshold_decay=%s,'
                'granularity_map=[conv2:kernel]' % (method, decay))
  _, mask = got['conv2']
  per_kernel = mask.reshape(9, 64)
  assert (per_kernel.min(axis=0) == per_kernel.max(axis=0)).all()
  if decay == 0.0:
    assert 0 < per_kernel[0].sum() < 64
  if method == 'exact' and decay == 0.0:
    assert per_kernel[0].sum() == 32
