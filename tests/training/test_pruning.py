"""Pruning: masks from the schedule, per-weight targets, blocks, conditional
updates, checkpoints, partitioned variables, summaries, errors."""

import logging
import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import np_reference


def _hp(text=''):
  return tf1prune.get_pruning_hparams().parse(text)


def _weight(name, value, partitioner=None):
  """A variable initialized to `value`, masked in scope `name`."""
  value = np.asarray(value)

  def initializer(shape, dtype=None, partition_info=None):
    # A partitioned variable asks for each partition's slice.
    offset = partition_info.var_offset if partition_info else [0] * len(shape)
    part = value[tuple(slice(o, o + n) for o, n in zip(offset, shape))]
    return tf.constant(part, dtype)

  with tf.variable_scope(name):
    w = tf.get_variable('weights', value.shape, tf.as_dtype(value.dtype),
                        initializer=initializer, partitioner=partitioner)
    tf1prune.apply_mask(w)
  return w


def _distinct(shape, seed=0, sign=True):
  """Distinct magnitudes 1..n in a random order, random signs."""
  n = int(np.prod(shape))
  rs = np.random.RandomState(seed)
  value = rs.permutation(np.arange(1.0, n + 1.0))
  if sign:
    value *= rs.choice([-1.0, 1.0], n)
  return value.reshape(shape).astype(np.float32)


def _session_at(step):
  """A session with variables initialized and the global step at `step`."""
  sess = tf.Session()
  sess.run(tf.global_variables_initializer())
  sess.run(tf.assign(tf.train.get_global_step(), step))
  return sess


def _float32(x):
  return float(np.float32(x))


# Magnitude masks.

def test_100_distinct_magnitudes_at_095_keep_exactly_the_5_largest():
  tf.train.get_or_create_global_step()
  value = _distinct([10, 10])
  _weight('layer', value)
  p = tf1prune.Pruning(_hp('target_sparsity=0.95,sparsity_function_end_step=1'))
  update = p.mask_update_op()
  mask, = tf1prune.get_masks()
  threshold, = tf1prune.get_thresholds()
  with _session_at(1) as sess:
    sess.run(update)
    m, t, masked = sess.run([mask, threshold, tf1prune.get_masked_weights()[0]])
  assert sorted(np.abs(value[m == 1.0]).tolist()) == [96., 97., 98., 99., 100.]
  assert t == 96.0
  np.testing.assert_array_equal(masked, value * (np.abs(value) >= 96.0))


@pytest.mark.parametrize('exponent', [1.0, 3.0])
def test_schedule_drives_the_masks(exponent):
  tf.train.get_or_create_global_step()
  value = _distinct([100])
  _weight('layer', value)
  hp = _hp('target_sparsity=0.9,initial_sparsity=0.1,'
           'sparsity_function_begin_step=10,sparsity_function_end_step=110,'
           'sparsity_function_exponent=%r' % exponent)
  p = tf1prune.Pruning(hp)
  update = p.mask_update_op()
  mask, = tf1prune.get_masks()
  with _session_at(0) as sess:
    for step in [0, 10, 23, 47, 60, 85, 109, 110, 500]:
      sess.run(tf.assign(tf.train.get_global_step(), step))
      sparsity = sess.run(p.sparsity)
      expected_sparsity = np_reference.schedule(step, 0.1, 0.9, 10, 110,
                                                exponent)
      assert sparsity == pytest.approx(expected_sparsity, abs=1e-6)
      sess.run(update)
      m = sess.run(mask)
      expected = np_reference.magnitude_mask(np.abs(value), sparsity)
      np.testing.assert_array_equal(m, expected)
      assert m.sum() == np_reference.keep_count(100, sparsity)
      assert sess.run(p.last_update_step) == step


def test_sparsity_zero_keeps_everything_and_threshold_is_the_smallest():
  tf.train.get_or_create_global_step()
  value = _distinct([4, 5])
  _weight('layer', value)
  p = tf1prune.Pruning(_hp('target_sparsity=0.0,initial_sparsity=0.0'))
  update = p.mask_update_op()
  with _session_at(50) as sess:
    sess.run(update)
    m, t = sess.run([tf1prune.get_masks()[0], tf1prune.get_thresholds()[0]])
  assert m.sum() == 20
  assert t == 1.0


def test_external_sparsity_tensor_overrides_the_schedule():
  tf.train.get_or_create_global_step()
  value = _distinct([100], seed=3)
  _weight('layer', value)
  sparsity = tf.placeholder(tf.float32, [])
  p = tf1prune.Pruning(_hp('target_sparsity=0.9'), sparsity=sparsity)
  assert p.sparsity is sparsity
  update = p.mask_update_op()
  mask, = tf1prune.get_masks()
  with _session_at(1000) as sess:
    for s, kept in [(0.3, 70), (0.0, 100), (0.95, 5), (0.999999, 1),
                    (1.0, 0)]:
      sess.run(update, {sparsity: s})
      m = sess.run(mask)
      assert m.sum() == kept, s
      np.testing.assert_array_equal(
          m, np_reference.magnitude_mask(np.abs(value), s))


def test_explicit_global_step_int32():
  step = tf.Variable(0, dtype=tf.int32, name='my_step')
  _weight('layer', _distinct([10]))
  p = tf1prune.Pruning(_hp('target_sparsity=0.5,sparsity_function_end_step=4'),
                       global_step=step)
  update = p.mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 4))
    sess.run(update)
    assert sess.run(tf.reduce_sum(tf1prune.get_masks()[0])) == 5
    assert sess.run(p.last_update_step) == 4


def test_last_mask_update_step_variable_is_named_after_the_spec():
  tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(_hp('name=my_pruning'))
  assert p.last_update_step.op.name == 'my_pruning/last_mask_update_step'
  assert p.last_update_step.dtype.base_dtype == tf.int32
  assert p.last_update_step not in tf.trainable_variables()
  default = tf1prune.Pruning()
  assert default.last_update_step.op.name == (
      'model_pruning/last_mask_update_step')
  assert default.spec.values() == tf1prune.get_pruning_hparams().values()


def test_float64_weights_are_pruned():
  tf.train.get_or_create_global_step()
  value = _distinct([50], seed=4).astype(np.float64)
  _weight('layer', value)
  update = tf1prune.Pruning(
      _hp('target_sparsity=0.8,sparsity_function_end_step=1')).mask_update_op()
  with _session_at(1) as sess:
    sess.run(update)
    m = sess.run(tf1prune.get_masks()[0])
  assert m.dtype == np.float64
  assert sorted(np.abs(value[m == 1.0]).tolist()) == list(range(41, 51))


def _written_bytes(run_metadata):
  """{node name: bytes of the outputs it allocated} from a FULL_TRACE.

  Views (a reshape, an aligned slice) report their input's buffer as their
  output but allocate nothing: they are left out, and so are temporaries.
  """
  written = {}
  for device in run_metadata.step_stats.dev_stats:
    for node in device.node_stats:
      name = node.node_name.split(':')[0]  # TF 1.15 lists some nodes twice
      allocated = sum(m.total_bytes for m in node.memory)
      out = sum(o.tensor_description.allocation_description.requested_bytes
                for o in node.output)
      if 0 < out <= allocated:
        written[name] = max(written.get(name, 0), out)
  return written


@pytest.mark.parametrize('op', ['mask_update_op',
                                'conditional_mask_update_op'])
@pytest.mark.parametrize('dtype', [np.float32, np.float16])
@pytest.mark.parametrize('resource', [True, False])
def test_the_update_of_a_large_weight_writes_one_mask_at_full_size(
    monkeypatch, dtype, op, resource):
  # The update works in blocks (on TF 1.15 a full-size output costs a page
  # fault per 4 kB on its first write); blocks of 65536 entries (as large as
  # a histogram) make a 400 x 1000 kernel large.
  from tf1prune.masks import _blocks
  block = 65536
  monkeypatch.setattr(_blocks, 'BLOCK', block)
  tf.train.get_or_create_global_step()
  with tf.variable_scope('fc', use_resource=resource):
    w = tf.get_variable('weights', [400, 1000], dtype,
                        initializer=tf.glorot_uniform_initializer(seed=1))
    tf1prune.apply_mask(w)
  update = getattr(tf1prune.Pruning(_hp(
      'target_sparsity=0.9,sparsity_function_end_step=1,pruning_frequency=1')),
                   op)()
  with _session_at(1) as sess:
    trace = tf.RunMetadata()
    sess.run(update, options=tf.RunOptions(
        trace_level=tf.RunOptions.FULL_TRACE), run_metadata=trace)
    value, mask = sess.run([w, tf1prune.get_masks()[0]])
  large = {name: size for name, size in _written_bytes(trace).items()
           if size > 4 * block}
  # The bool mask (one byte an entry); then on TF 2.x a resource variable
  # adopts the buffer of the mask in its dtype, written once; elsewhere it is
  # written to the variable by blocks of rows.
  float_mask = [value.nbytes] if (
      resource and not tf.__version__.startswith('1.')) else []
  assert sorted(large.values()) == [value.size] + float_mask, large
  np.testing.assert_array_equal(mask, np_reference.magnitude_mask(
      np.abs(value.astype(np.float32)), 0.9))


# Per-weight targets and do_not_prune.

def _three_layers():
  values = {name: _distinct([100], seed=i)
            for i, name in enumerate(['conv1', 'conv2', 'fc1'])}
  for name in ['conv1', 'conv2', 'fc1']:
    _weight(name, values[name])
  return values


def _kept(sess):
  return [int(k) for k in sess.run([tf.reduce_sum(m)
                                      for m in tf1prune.get_masks()])]


def test_weight_sparsity_map_gives_per_weight_targets():
  tf.train.get_or_create_global_step()
  _three_layers()
  hp = _hp('target_sparsity=0.5,weight_sparsity_map=[conv1:0.8,fc.*:0.25],'
           'sparsity_function_end_step=100,sparsity_function_exponent=1')
  update = tf1prune.Pruning(hp).mask_update_op()
  with _session_at(100) as sess:
    sess.run(update)
    assert _kept(sess) == [20, 50, 75]
    # Halfway: each weight on its own schedule towards its own target.
    sess.run(tf.assign(tf.train.get_global_step(), 50))
    sess.run(update)
    assert _kept(sess) == [
        np_reference.keep_count(100, _float32(0.4)),
        np_reference.keep_count(100, _float32(0.25)),
        np_reference.keep_count(100, _float32(0.125))]


def test_weight_sparsity_map_scales_an_external_sparsity():
  tf.train.get_or_create_global_step()
  _three_layers()
  sparsity = tf.placeholder(tf.float32, [])
  hp = _hp('target_sparsity=0.5,weight_sparsity_map=[conv1:0.8]')
  update = tf1prune.Pruning(hp, sparsity=sparsity).mask_update_op()
  with _session_at(0) as sess:
    sess.run(update, {sparsity: 0.25})
    # conv1: 0.25 * 0.8 / 0.5 = 0.4.
    assert _kept(sess) == [60, 75, 75]


def test_a_weight_matched_twice_by_weight_sparsity_map_is_an_error():
  tf.train.get_or_create_global_step()
  _three_layers()
  p = tf1prune.Pruning(_hp('weight_sparsity_map=[conv:0.8,conv1:0.9]'))
  with pytest.raises(ValueError, match=re.escape(
      'weight_sparsity_map matches weight conv1/weights more than once: '
      'conv, conv1')):
    p.mask_update_op()


@pytest.mark.parametrize('text,message', [
    ('weight_sparsity_map=[conv1:1.5]', 'sparsity must be in [0, 1), got 1.5'),
    ('weight_sparsity_map=[conv1]', "entries must look like 'regex:value'"),
    ('block_dims_map=[fc1:4]', "block dims must look like 'HxW', got '4'"),
    ('block_dims_map=[fc1:0x4]', "block dims must be >= 1 or -1, got '0x4'"),
])
def test_bad_map_entries_are_value_errors(text, message):
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError, match=re.escape(message)):
    tf1prune.Pruning(_hp(text))


def test_do_not_prune_keeps_the_masks_ones():
  tf.train.get_or_create_global_step()
  _three_layers()
  hp = _hp('target_sparsity=0.9,sparsity_function_end_step=1,'
           'do_not_prune=[conv2,fc]')
  update = tf1prune.Pruning(hp).mask_update_op()
  with _session_at(5) as sess:
    sess.run(update)
    assert _kept(sess) == [10, 100, 100]
    assert sess.run(tf1prune.get_thresholds()) == [91.0, 0.0, 0.0]


def test_do_not_prune_matches_the_mask_scope_as_in_contrib():
  # contrib matched do_not_prune against the mask's name: a weight created
  # elsewhere and masked in scope 'logits' is found by 'logits'.
  tf.train.get_or_create_global_step()
  w = tf.get_variable('shared_w', initializer=_distinct([10]))
  tf1prune.apply_mask(w, 'logits')
  hp = _hp('target_sparsity=0.9,sparsity_function_end_step=1,'
           'do_not_prune=[logits]')
  update = tf1prune.Pruning(hp).mask_update_op()
  with _session_at(5) as sess:
    sess.run(update)
    assert _kept(sess) == [10]


# threshold_decay.

def test_threshold_decay_smooths_the_threshold():
  tf.train.get_or_create_global_step()
  value = _distinct([100], seed=5)
  _weight('layer', value)
  hp = _hp('target_sparsity=0.5,sparsity_function_end_step=1,'
           'threshold_decay=0.5')
  update = tf1prune.Pruning(hp).mask_update_op()
  mask, = tf1prune.get_masks()
  threshold, = tf1prune.get_thresholds()
  old = 0.0
  with _session_at(1) as sess:
    for _ in range(4):
      sess.run(update)
      new = 51.0  # the exact threshold of 1..100 at sparsity 0.5
      smoothed = 0.5 * old + 0.5 * new
      t, m = sess.run([threshold, mask])
      assert t == pytest.approx(smoothed)
      np.testing.assert_array_equal(m, (np.abs(value) >= smoothed) * 1.0)
      old = smoothed
  # 25.5, 38.25, 44.625, 47.8125: 75, 62, 56, 53 weights kept.
  assert old == 47.8125


# Block sparsity.

def _integer_weights(shape, seed):
  """Distinct integer magnitudes: block sums and averages are exact."""
  return _distinct(shape, seed=seed)


@pytest.mark.parametrize('pooling', ['AVG', 'MAX'])
@pytest.mark.parametrize('shape,block', [
    ((8, 12), (2, 3)), ((7, 10), (2, 3)), ((6, 8), (-1, 2)),
    ((6, 8), (3, -1)), ((5, 9), (1, 4)), ((1, 1, 6, 8), (2, 2))])
def test_block_masks_equal_the_numpy_block_reference(pooling, shape, block):
  tf.train.get_or_create_global_step()
  value = _integer_weights(shape, seed=sum(shape))
  _weight('fc', value)
  hp = _hp('target_sparsity=0.6,sparsity_function_end_step=1,'
           'block_height=%d,block_width=%d,block_pooling_function=%s' %
           (block[0], block[1], pooling))
  update = tf1prune.Pruning(hp).mask_update_op()
  with _session_at(1) as sess:
    sess.run(update)
    m, t = sess.run([tf1prune.get_masks()[0], tf1prune.get_thresholds()[0]])
  expected, expected_t, (bh, bw) = np_reference.block_mask(
      value, block, pooling, _float32(0.6))
  np.testing.assert_array_equal(m, expected)
  assert t == expected_t
  # Constant on every block, and some blocks kept, some not.
  m2 = m.reshape(expected.shape[-2:]) if m.ndim == 4 else m
  for i in range(0, m2.shape[0], bh):
    for j in range(0, m2.shape[1], bw):
      cell = m2[i:i + bh, j:j + bw]
      assert cell.min() == cell.max()
  assert 0 < m.sum() < m.size


def test_block_dims_map_sets_the_block_per_weight():
  tf.train.get_or_create_global_step()
  values = {'fc1': _integer_weights((8, 8), 1), 'fc2': _integer_weights((8, 8), 2),
            'fc3': _integer_weights((8, 8), 3)}
  for name in ['fc1', 'fc2', 'fc3']:
    _weight(name, values[name])
  hp = _hp('target_sparsity=0.5,sparsity_function_end_step=1,'
           'block_dims_map=[fc1:4x4,fc2:-1x2],block_pooling_function=MAX')
  update = tf1prune.Pruning(hp).mask_update_op()
  with _session_at(1) as sess:
    sess.run(update)
    masks = sess.run(tf1prune.get_masks())
  for got, name, block in zip(masks, ['fc1', 'fc2', 'fc3'],
                              [(4, 4), (-1, 2), (1, 1)]):
    if block == (1, 1):
      expected = np_reference.magnitude_mask(np.abs(values[name]), 0.5)
    else:
      expected = np_reference.block_mask(values[name], block, 'MAX', 0.5)[0]
    np.testing.assert_array_equal(got, expected, err_msg=name)


def test_block_setting_leaves_rank_4_kernels_element_wise():
  tf.train.get_or_create_global_step()
  value = _integer_weights((3, 3, 2, 4), 7)
  _weight('conv', value)
  hp = _hp('target_sparsity=0.5,sparsity_function_end_step=1,'
           'block_height=2,block_width=2')
  update = tf1prune.Pruning(hp).mask_update_op()
  with _session_at(1) as sess:
    sess.run(update)
    m = sess.run(tf1prune.get_masks()[0])
  np.testing.assert_array_equal(m, np_reference.magnitude_mask(np.abs(value),
                                                               0.5))


# threshold_method=histogram.

def _np_histogram_threshold(scores, sparsity, nbins):
  scores = np.abs(scores).astype(np.float32).ravel()
  top = scores.max()
  index = np.clip(np.floor(scores / top * nbins).astype(int), 0, nbins - 1)
  counts = np.bincount(index, minlength=nbins)
  cdf = np.cumsum(counts) / float(scores.size)
  below = np.sum(cdf < np.float32(sparsity))
  return below / float(nbins) * top


@pytest.mark.parametrize('nbins', [10, 256])
def test_histogram_threshold_method(nbins):
  tf.train.get_or_create_global_step()
  value = _distinct([100], seed=8)
  _weight('layer', value)
  hp = _hp('target_sparsity=0.5,sparsity_function_end_step=1,'
           'threshold_method=histogram,nbins=%d' % nbins)
  update = tf1prune.Pruning(hp).mask_update_op()
  with _session_at(1) as sess:
    sess.run(update)
    m, t = sess.run([tf1prune.get_masks()[0], tf1prune.get_thresholds()[0]])
  expected_t = _np_histogram_threshold(value, 0.5, nbins)
  assert t == pytest.approx(expected_t, rel=1e-6)
  np.testing.assert_array_equal(m, (np.abs(value) > t) * 1.0)
  if nbins == 10:
    assert t == pytest.approx(50.0) and m.sum() == 50


# The conditional update.

def _fired_steps(begin, end, frequency, steps):
  """NumPy reference of the SPEC's pruning-step predicate."""
  last, fired = 0, []
  for step in steps:
    in_range = begin <= step and (end == -1 or step <= end)
    if in_range and last + frequency <= step:
      last = step
      fired.append(step)
  return fired


@pytest.mark.parametrize('begin,end,frequency', [
    (0, -1, 10), (20, 60, 10), (5, 40, 7), (0, 12, 1), (30, -1, 25)])
def test_conditional_update_fires_exactly_on_pruning_steps(begin, end,
                                                           frequency):
  tf.train.get_or_create_global_step()
  _weight('layer', _distinct([100], seed=9))
  hp = _hp('begin_pruning_step=%d,end_pruning_step=%d,pruning_frequency=%d,'
           'target_sparsity=0.9,sparsity_function_end_step=80,'
           'sparsity_function_exponent=1' % (begin, end, frequency))
  p = tf1prune.Pruning(hp)
  op = p.conditional_mask_update_op()
  mask, = tf1prune.get_masks()
  steps = list(range(0, 90))
  fired = []
  kept_sparsity = 0.0
  step_value = tf.placeholder(tf.int64, [])
  set_step = tf.assign(tf.train.get_global_step(), step_value)
  kept = tf.reduce_sum(mask)
  with _session_at(0) as sess:
    for step in steps:
      sess.run(set_step, {step_value: step})
      before, sparsity = sess.run([p.last_update_step, p.sparsity])
      sess.run(op)
      last, n_kept = sess.run([p.last_update_step, kept])
      if last != before:
        assert last == step
        fired.append(step)
        kept_sparsity = sparsity
        assert sparsity == pytest.approx(
            np_reference.schedule(step, 0.0, 0.9, 0, 80, 1.0), abs=1e-6)
      # The mask is always the one of the last update's sparsity.
      assert n_kept == np_reference.keep_count(100, kept_sparsity)
  assert fired == _fired_steps(begin, end, frequency, steps)


def test_conditional_update_op_is_built_once():
  tf.train.get_or_create_global_step()
  _weight('layer', _distinct([10]))
  p = tf1prune.Pruning()
  op = p.conditional_mask_update_op()
  n_ops = len(tf.get_default_graph().get_operations())
  assert p.conditional_mask_update_op() is op
  update = p.mask_update_op()
  assert p.mask_update_op() is update
  n_ops_after_update = len(tf.get_default_graph().get_operations())
  p.conditional_mask_update_op()
  p.mask_update_op()
  assert len(tf.get_default_graph().get_operations()) == n_ops_after_update
  assert n_ops_after_update > n_ops


def test_conditional_update_does_nothing_before_begin():
  tf.train.get_or_create_global_step()
  _weight('layer', _distinct([10]))
  hp = _hp('begin_pruning_step=100,target_sparsity=0.9')
  op = tf1prune.Pruning(hp).conditional_mask_update_op()
  with _session_at(99) as sess:
    sess.run(op)
    assert _kept(sess) == [10]
    sess.run(tf.assign(tf.train.get_global_step(), 100))
    sess.run(op)
    assert _kept(sess) == [1]


# Checkpoints.

def _build_for_checkpoint():
  tf.train.get_or_create_global_step()
  _weight('fc1', _distinct([8, 8], seed=10))
  _weight('fc2', _distinct([20], seed=11))
  hp = _hp('target_sparsity=0.7,sparsity_function_end_step=1')
  return tf1prune.Pruning(hp)


def test_masks_restore_from_a_checkpoint(tmp_path):
  p = _build_for_checkpoint()
  update = p.mask_update_op()
  saver = tf.train.Saver()
  with _session_at(7) as sess:
    sess.run(update)
    saved = sess.run(tf1prune.get_masks() + tf1prune.get_thresholds() +
                     [p.last_update_step])
    path = saver.save(sess, str(tmp_path / 'model.ckpt'))
  assert saved[0].sum() == np_reference.keep_count(64, _float32(0.7))
  assert saved[-1] == 7

  with tf.Graph().as_default():
    p = _build_for_checkpoint()
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      fresh = sess.run(tf1prune.get_masks())
      assert all(m.min() == 1.0 for m in fresh)
      saver.restore(sess, path)
      restored = sess.run(tf1prune.get_masks() + tf1prune.get_thresholds() +
                          [p.last_update_step])
  assert len(restored) == len(saved)
  for got, expected in zip(restored, saved):
    np.testing.assert_array_equal(got, expected)


# Partitioned variables.

def test_partitioned_variable_prunes_as_one_weight():
  tf.train.get_or_create_global_step()
  # Sorted magnitudes: the 50 largest all live in the last partition, so a
  # per-partition threshold would keep a different set.
  value = np.arange(1.0, 1001.0, dtype=np.float32).reshape(100, 10)
  w = _weight('big', value, partitioner=tf.fixed_size_partitioner(3))
  assert len(list(w)) == 3
  update = tf1prune.Pruning(
      _hp('target_sparsity=0.95,sparsity_function_end_step=1')).mask_update_op()
  mask, = tf1prune.get_masks()
  assert mask.shape.as_list() == [100, 10]
  with _session_at(1) as sess:
    sess.run(update)
    m, t = sess.run([mask, tf1prune.get_thresholds()[0]])
  assert m.sum() == 50
  np.testing.assert_array_equal(m, (value > 950.0) * 1.0)
  assert t == 951.0


# Summaries, logging, errors.

def test_add_pruning_summaries_creates_the_spec_names():
  tf.train.get_or_create_global_step()
  _weight('conv1', _distinct([10]))
  _weight('fc1', _distinct([6]))
  p = tf1prune.Pruning(_hp('target_sparsity=0.5,sparsity_function_end_step=10'))
  update = p.mask_update_op()
  p.add_pruning_summaries()
  merged = tf.summary.merge_all()
  with _session_at(10) as sess:
    sess.run(update)
    summary = tf.Summary()
    summary.ParseFromString(sess.run(merged))
  values = {v.tag: v.simple_value for v in summary.value}
  assert values == {
      'model_pruning_summaries/sparsity': 0.5,
      'model_pruning_summaries/last_mask_update_step': 10.0,
      'model_pruning_summaries/conv1/mask/sparsity': 0.5,
      'model_pruning_summaries/conv1/threshold/threshold': 6.0,
      'model_pruning_summaries/fc1/mask/sparsity': 0.5,
      'model_pruning_summaries/fc1/threshold/threshold': 4.0,
  }


class _Records(logging.Handler):

  def __init__(self):
    super(_Records, self).__init__(logging.DEBUG)
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


def test_print_hparams_logs_every_hparam():
  tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(_hp('target_sparsity=0.9,do_not_prune=[logits]'))
  handler = _Records()
  logger = logging.getLogger('tensorflow')
  logger.addHandler(handler)
  verbosity = tf.logging.get_verbosity()
  tf.logging.set_verbosity(tf.logging.INFO)
  try:
    p.print_hparams()
  finally:
    tf.logging.set_verbosity(verbosity)
    logger.removeHandler(handler)
  text = '\n'.join(handler.messages)
  assert 'target_sparsity = 0.9' in text
  assert "do_not_prune = ['logits']" in text
  for name in tf1prune.get_pruning_hparams().values():
    assert '  %s = ' % name in text


def test_no_global_step_is_a_value_error():
  with pytest.raises(ValueError, match='Pruning needs a global step'):
    tf1prune.Pruning()
