"""Coupled channel groups of training graphs, and their filter masks."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.masks import coupled_filter_masks, magnitude_mask, unit_keep_count


def _conv(x, n, scope, k=1, activation_fn=tf.nn.relu, **kwargs):
  return tf1prune.masked_conv2d(x, n, k, activation_fn=activation_fn,
                                scope=scope, **kwargs)


def _summary(groups):
  return [([m.name for m in g.members], g.num_units,
           [list(m.units) for m in g.members], g.blocked is not None)
          for g in groups]


def test_chain_has_one_group_per_layer():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  net = _conv(x, 4, 'c1', 3)
  net = tf.nn.max_pool(net, [1, 2, 2, 1], [1, 2, 2, 1], 'SAME')
  net = _conv(net, 5, 'c2')
  net = tf.reshape(net, [2, -1])
  tf1prune.masked_fully_connected(net, 3, scope='fc')
  assert _summary(tf1prune.find_channel_groups()) == [
      (['c1/weights'], 4, [[0, 1, 2, 3]], False),
      (['c2/weights'], 5, [[0, 1, 2, 3, 4]], False),
      (['fc/weights'], 3, [[0, 1, 2]], False)]


def test_residual_add_couples_the_stream_through_batch_norm_and_bias():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  stem = _conv(x, 4, 'stem', 3, activation_fn=None)
  stem, _, _ = tf.nn.fused_batch_norm(stem, tf.ones([4]), tf.zeros([4]))
  branch = _conv(tf.nn.relu(stem), 2, 'b1')
  branch = _conv(branch, 4, 'b2', activation_fn=None)
  mean, var = tf.nn.moments(branch, [0, 1, 2])
  branch = tf.nn.batch_normalization(branch, mean, var, tf.zeros([4]),
                                     tf.ones([4]), 1e-3)
  out = tf.nn.relu(stem + branch)
  _conv(out, 4, 'next', activation_fn=None)
  groups = tf1prune.find_channel_groups()
  assert _summary(groups) == [
      (['stem/weights', 'b2/weights'], 4, [[0, 1, 2, 3]] * 2, False),
      (['b1/weights'], 2, [[0, 1]], False),
      (['next/weights'], 4, [[0, 1, 2, 3]], False)]
  assert tf1prune.format_channel_groups(groups).splitlines()[0] == (
      '4 channels: stem/weights, b2/weights')


@pytest.mark.parametrize('batch', [2, 1, None])
def test_identity_shortcut_from_an_unpruned_tensor_blocks_the_group(batch):
  # A batch of one example has the shape of a [1, H, W, C] parameter map.
  x = tf.placeholder(tf.float32, [batch, 6, 6, 4])
  branch = _conv(x, 4, 'b', activation_fn=None)
  tf.nn.relu(x + branch)
  (group,) = tf1prune.find_channel_groups()
  assert group.blocked.startswith('added to Placeholder:0')
  assert str(group).endswith(')') and 'blocked' in str(group)


@pytest.mark.parametrize('shape', [[1, 1, 1, 4], [1, 6, 6, 4]])
def test_per_channel_constants_do_not_block(shape):
  x = tf.placeholder(tf.float32, [1, 6, 6, 3])
  net = _conv(x, 4, 'c', activation_fn=None)
  tf.add(net, tf.constant(np.ones(shape, np.float32)))
  (group,) = tf1prune.find_channel_groups()
  assert group.blocked is None


def test_concat_places_channels_at_their_offsets():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  a = _conv(x, 2, 'a')
  b = _conv(x, 3, 'b')
  cat = tf.concat([a, b], axis=3)
  c = _conv(x, 5, 'c', activation_fn=None)
  tf.nn.relu(cat + c)
  assert _summary(tf1prune.find_channel_groups()) == [
      (['a/weights', 'b/weights', 'c/weights'], 5,
       [[0, 1], [2, 3, 4], [0, 1, 2, 3, 4]], False)]


def test_concat_alone_does_not_couple():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  cat = tf.concat([_conv(x, 2, 'a'), _conv(x, 3, 'b')], axis=-1)
  _conv(cat, 4, 'c')
  assert [g.num_units for g in tf1prune.find_channel_groups()] == [2, 3, 4]


def test_depthwise_conv_couples_its_input_channels():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  net = _conv(x, 4, 'pw1')
  dw = tf.get_variable('dw/depthwise_weights', [3, 3, 4, 2])
  with tf.variable_scope('dw'):
    masked_dw = tf1prune.apply_mask(dw)
  net = tf.nn.depthwise_conv2d(net, masked_dw, [1, 1, 1, 1], 'SAME')
  other = _conv(x, 8, 'other', activation_fn=None)
  tf.add(net, other)
  (group,) = tf1prune.find_channel_groups()
  assert [m.name for m in group.members] == ['pw1/weights', 'dw/depthwise_weights',
                                             'other/weights']
  assert group.num_units == 4
  assert [m.axis for m in group.members] == [-1, 2, -1]
  assert list(group.members[2].units) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_squeeze_and_excitation_multiply_couples_the_gate():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  net = _conv(x, 4, 'c')
  pooled = tf.reduce_mean(net, [1, 2], keepdims=True)
  gate = tf.sigmoid(_conv(_conv(pooled, 2, 'se1'), 4, 'se2', activation_fn=None))
  net * gate  # pylint: disable=pointless-statement
  assert _summary(tf1prune.find_channel_groups())[0][:2] == (
      ['c/weights', 'se2/weights'], 4)


def _np_norms(w, axis, importance):
  others = tuple(a for a in range(w.ndim) if a != axis % w.ndim)
  m = np.abs(w.astype(np.float64))
  if importance == 'max':
    return m.max(axis=others)
  if importance == 'l2':
    return np.sqrt((m ** 2).sum(axis=others))
  return m.sum(axis=others)


@pytest.mark.parametrize('importance', ['l1', 'l2', 'max'])
@pytest.mark.parametrize('reduction', ['sum', 'mean', 'max'])
def test_coupled_masks_match_numpy(importance, reduction):
  rng = np.random.RandomState(3)
  a = rng.randn(3, 3, 2, 6).astype(np.float32)
  b = rng.randn(6, 6).astype(np.float32)
  dw = rng.randn(3, 3, 6, 1).astype(np.float32)
  members = [(a, -1, tuple(range(6))), (b, -1, (5, 4, 3, 2, 1, 0)),
             (dw, 2, tuple(range(6)))]
  scores = [[] for _ in range(6)]
  for w, axis, units in members:
    for u, s in zip(units, _np_norms(w, axis, importance)):
      scores[u].append(s)
  reduce_fn = {'sum': np.sum, 'mean': np.mean, 'max': np.max}[reduction]
  unit_scores = np.array([reduce_fn(s) for s in scores])
  keep = np.argsort(-unit_scores, kind='stable')[:3]
  expected_units = np.isin(np.arange(6), keep).astype(np.float32)
  masks, _ = coupled_filter_masks(
      [(tf.constant(w), axis, units) for w, axis, units in members], 6, 0.5,
      magnitude_mask, importance=importance, reduction=reduction)
  with tf.Session() as sess:
    got = sess.run(masks)
  np.testing.assert_array_equal(got[0][0, 0, 0], expected_units)
  np.testing.assert_array_equal(got[1][0], expected_units[[5, 4, 3, 2, 1, 0]])
  np.testing.assert_array_equal(got[2][0, 0, :, 0], expected_units)
  assert got[0].shape == a.shape and (got[0] == got[0][:1, :1, :1]).all()


@pytest.mark.parametrize('n,sparsity,minimum,multiple,expected', [
    (64, 0.9, 1, 1, 6), (64, 0.9, 8, 1, 8), (64, 0.9, 1, 8, 8),
    (64, 0.5, 1, 16, 32), (64, 0.45, 1, 16, 48), (10, 0.0, 1, 8, 10),
    (10, 1.0, 0, 1, 0), (10, 1.0, 2, 1, 2), (4, 0.9, 8, 1, 4)])
def test_unit_keep_count(n, sparsity, minimum, multiple, expected):
  with tf.Session() as sess:
    assert sess.run(unit_keep_count(n, sparsity, minimum, multiple)) == expected


@pytest.mark.parametrize('kwargs,message', [
    (dict(importance='l3'), "group_importance must be one of l1, l2, max, got 'l3'"),
    (dict(reduction='prod'), "channel_group_reduction must be one of sum, mean, "
                             "max, got 'prod'"),
    (dict(min_channels=-1), 'min_channels must be an int >= 0, got -1'),
    (dict(multiple=0), 'channel_multiple must be an int >= 1, got 0')])
def test_bad_arguments_name_the_argument(kwargs, message):
  w = tf.constant(np.ones([2, 3], np.float32))
  with pytest.raises(ValueError, match='^' + message.replace('(', r'\(')):
    coupled_filter_masks([(w, -1, (0, 1, 2))], 3, 0.5, magnitude_mask, **kwargs)


def test_units_that_do_not_fit_the_axis_are_refused():
  w = tf.constant(np.ones([2, 3], np.float32), name='w')
  with pytest.raises(ValueError, match='w:0 has 3 entries on axis -1 but 2 units'):
    coupled_filter_masks([(w, -1, (0, 1))], 2, 0.5, magnitude_mask)
