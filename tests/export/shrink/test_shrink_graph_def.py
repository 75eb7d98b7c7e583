"""shrink_graph_def: smaller frozen graphs with the same outputs."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.export import graph_io
from tf1prune.export.shrink.rounds import shrink_graph_def
from tf1prune.export.shrink.padding import constant_response, conv_pads
from tests.support.graphs import (const as _const, consts as _consts,
                                  read_graph_def, run_graph_def,
                                  run_in_process)





def _check_same_outputs(graph_def, feed, outputs=('y',), **kwargs):
  small, report = shrink_graph_def(graph_def, list(outputs), **kwargs)
  for name in outputs:
    np.testing.assert_allclose(run_graph_def(small, feed, name + ':0'),
                               run_graph_def(graph_def, feed, name + ':0'),
                               rtol=1e-5, atol=1e-5)
  return small, report


def _conv(x, w, b, padding='VALID', stride=1, name=None):
  out = tf.nn.conv2d(x, _const(w), [1, stride, stride, 1], padding)
  return tf.nn.bias_add(out, _const(b), name=name)


def _dense(x, w, b, name=None):
  return tf.nn.bias_add(tf.matmul(x, _const(w)), _const(b), name=name)


def _glorot(seed, *shapes):
  """Weights from TF's own `glorot_uniform_initializer`, one per shape,
  made in a graph of their own (the test's graph holds only the model)."""
  with tf.Graph().as_default(), tf.Session() as sess:
    init = tf.glorot_uniform_initializer(seed=seed)
    return sess.run([init(shape) for shape in shapes])


# Small networks with known answers ------------------------------------------

def test_dense_unit_removed_and_its_relu_bias_folded_into_the_next_bias():
  w1 = np.arange(1.0, 13.0, dtype=np.float32).reshape(3, 4)
  w1[:, [1, 2]] = 0.0
  b1 = np.array([0.5, 2.0, -3.0, 1.0], np.float32)
  w2 = np.arange(1.0, 9.0, dtype=np.float32).reshape(4, 2)
  b2 = np.array([0.25, -0.25], np.float32)
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  _dense(tf.nn.relu(_dense(x, w1, b1)), w2, b2, name='y')
  feed = np.random.RandomState(0).randn(5, 3).astype(np.float32)
  small, report = _check_same_outputs(tf.get_default_graph().as_graph_def(),
                                      feed)
  consts = _consts(small)
  shapes = sorted(v.shape for v in consts.values())
  assert shapes == [(2,), (2,), (2, 2), (3, 2)]
  # relu(2.0) * w2[1] + relu(-3.0) * w2[2] is now in the bias.
  np.testing.assert_array_equal(
      [v for v in consts.values() if v.shape == (2,) and v[0] != 0.5][0],
      b2 + 2.0 * w2[1])
  assert [(l.outputs_before, l.outputs_after) for l in report.layers] == \
      [(4, 2), (2, 2)]
  assert report.stops == []


def test_conv_filters_removed_through_bias_relu_pool_and_valid_conv():
  rs = np.random.RandomState(1)
  w1 = rs.randn(3, 3, 3, 6).astype(np.float32)
  w1[..., [0, 3, 4]] = 0.0
  b1 = rs.randn(6).astype(np.float32)
  x = tf.placeholder(tf.float32, [None, 10, 10, 3], name='x')
  h = tf.nn.relu(_conv(x, w1, b1, 'SAME'))
  h = tf.nn.avg_pool(h, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME')
  _conv(h, rs.randn(3, 3, 6, 4), rs.randn(4), 'VALID', name='y')
  feed = rs.randn(2, 10, 10, 3).astype(np.float32)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  first = report.layers[0]
  assert (first.outputs_before, first.outputs_after) == (6, 3)
  assert (report.layers[1].inputs_before, report.layers[1].inputs_after) == \
      (6, 3)
  assert first.params_after == 3 * 3 * 3 * 3 + 3
  assert first.flops_after == 2 * 10 * 10 * 3 * 3 * 3 * 3


def _padded_pair(rs):
  """conv1 (1x1) with 3 empty filters -> relu -> conv2 3x3 SAME (pads).

  Returns (feed, conv2's weight, conv2's bias)."""
  w1 = rs.randn(1, 1, 2, 4).astype(np.float32)
  w1[..., :3] = 0.0
  b1 = np.array([1.5, -1.0, 0.7, 0.0], np.float32)   # relu: 1.5, 0, 0.7, 0
  x = tf.placeholder(tf.float32, [None, 6, 7, 2], name='x')
  h = tf.nn.relu(_conv(x, w1, b1))
  w2, b2 = rs.randn(3, 3, 4, 2), rs.randn(2)
  _conv(h, w2, b2, 'SAME', name='y')
  return (rs.randn(2, 6, 7, 2).astype(np.float32), w2.astype(np.float32),
          b2.astype(np.float32))


def test_zero_padded_next_conv_gets_the_removed_constants_as_a_map():
  feed, w2, b2 = _padded_pair(np.random.RandomState(2))
  small, report = _check_same_outputs(tf.get_default_graph().as_graph_def(),
                                      feed)
  assert report.layers[0].outputs_after == 1 and report.stops == []
  consts = _consts(small)
  weight, = [v for v in consts.values()
             if v.ndim == 4 and v.shape[:2] == (3, 3)]
  assert weight.shape == (3, 3, 1, 2)                # no extra channel
  np.testing.assert_array_equal(weight[:, :, 0], w2[:, :, 3])
  # y's bias add is now b2 + what relu(b1) of the removed channels gives
  # each output position through y's zero-padded taps, one [1, 1, H x W, C]
  # map.
  removed = np.float32([1.5, 0.0, 0.7]).astype(np.float64)
  taps = np.ones([6, 7, 3]) * removed
  pads = conv_pads([6, 7], [3, 3], [1, 1], [1, 1], 'SAME')
  padded = np.pad(taps, [tuple(p) for p in pads] + [(0, 0)], 'constant')
  expected = b2.astype(np.float64) + sum(
      np.tensordot(padded[i:i + 6, j:j + 7], w2[i, j, :3].astype(np.float64),
                   axes=([2], [0])) for i in range(3) for j in range(3))
  np.testing.assert_allclose(consts['y/shrink_map/value'],
                             expected.reshape(1, 1, 42, 2), rtol=1e-6)
  assert consts['y/shrink_map/flat_shape'].tolist() == [-1, 42, 2]
  assert consts['y/shrink_map/shape'].tolist() == [-1, 6, 7, 2]
  ops = {n.name: n.op for n in small.node}
  assert {n: op for n, op in ops.items() if n.startswith('y')} == {
      'y': 'Reshape', 'y/shrink_map/flat': 'Reshape', 'y/shrink_map/add':
      'Add', 'y/shrink_map/flat_shape': 'Const', 'y/shrink_map/value':
      'Const', 'y/shrink_map/shape': 'Const'}
  assert not [n for n in ops if 'shrink_ones' in n or 'shrink_fold' in n]
  # conv1's weight and bias, y's weight and the map's three: y's bias is gone.
  assert len([op for op in ops.values() if op == 'Const']) == 6
  # The map replaces the bias: parameters count its entries, FLOPs only the
  # kept input channel.
  assert report.layers[1].inputs_after == 1
  assert report.layers[1].params_after == 3 * 3 * 1 * 2 + 6 * 7 * 2
  assert report.layers[1].flops_after == 2 * 6 * 7 * 3 * 3 * 1 * 2


def test_params_objective_reads_the_removed_constants_as_ones():
  feed, w2, b2 = _padded_pair(np.random.RandomState(2))
  small, report = _check_same_outputs(tf.get_default_graph().as_graph_def(),
                                      feed, objective='params')
  assert report.layers[0].outputs_after == 1 and report.stops == []
  consts = _consts(small)
  weight, = [v for v in consts.values()
             if v.ndim == 4 and v.shape[:2] == (3, 3)]
  # Input 0 is the kept channel 3, input 1 the ones: relu(b1) of the removed
  # channels times their weights, summed; the bias is unchanged.
  assert weight.shape == (3, 3, 2, 2)
  np.testing.assert_array_equal(weight[:, :, 0], w2[:, :, 3])
  removed = np.float32([1.5, 0.0, 0.7]).astype(np.float64)
  expected = np.tensordot(removed, w2[:, :, :3].astype(np.float64),
                          axes=([0], [2])).astype(np.float32)
  np.testing.assert_array_equal(weight[:, :, 1], expected)
  assert [v for v in consts.values() if v.shape == (2,)][0].tolist() == \
      b2.tolist()
  ops = {n.name: n.op for n in small.node}
  added = {n.partition('/shrink_ones')[2]: op for n, op in ops.items()
           if '/shrink_ones' in n}
  assert added == {'': 'ConcatV2', '/axis': 'Const', '/begin': 'Const',
                   '/end': 'Const', '/strides': 'Const', '/slice':
                   'StridedSlice', '/shape': 'Shape', '/one': 'Const',
                   '/fill': 'Fill'}
  assert not [n for n in ops if 'shrink_fold' in n or 'unfolded' in n]
  # Parameters: the kernel with its extra channel, the bias, the 1.0 filled.
  assert report.layers[1].inputs_after == 1
  assert report.layers[1].params_after == 3 * 3 * (1 + 1) * 2 + 2 + 1


def test_without_border_maps_only_zero_constants_fold_into_a_padded_conv():
  feed, _, _ = _padded_pair(np.random.RandomState(2))
  small, report = _check_same_outputs(tf.get_default_graph().as_graph_def(),
                                      feed, fold_borders=False)
  assert report.layers[0].outputs_after == 3        # channel 1 removed only
  stop, = report.stops
  assert stop.channels == 2 and 'zero-pads its input' in stop.reason
  assert not any('shrink_' in n.name for n in small.node)


def test_border_map_reaches_through_strides_dilations_and_a_next_shrink():
  rs = np.random.RandomState(12)
  x = tf.placeholder(tf.float32, [None, 9, 8, 3], name='x')
  w1 = rs.randn(3, 3, 3, 6).astype(np.float32)
  w1[..., [0, 2, 5]] = 0.0
  h = tf.nn.relu6(_conv(x, w1, np.abs(rs.randn(6)) + 0.5, 'SAME'))
  w2 = rs.randn(3, 3, 6, 5).astype(np.float32)
  w2[..., 3] = 0.0
  w2[:, :, 1:, 1] = 0.0     # filter 1 only reads channel 0, which goes
  h = tf.nn.conv2d(h, _const(w2), [1, 2, 2, 1], 'SAME')
  h = tf.nn.relu(tf.nn.bias_add(h, _const(rs.randn(5))))
  w3 = rs.randn(3, 3, 5, 4).astype(np.float32)
  h = tf.nn.conv2d(h, _const(w3), [1, 1, 1, 1], 'SAME', dilations=[1, 2, 2, 1])
  tf.identity(h, name='y')                          # no bias after conv3
  feed = rs.randn(2, 9, 8, 3).astype(np.float32)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  # conv2's filter 1 empties when channel 0 goes; the border map then makes
  # its output a map, not a constant, which conv3 (dilated, padded) gets as
  # an exact map too: it goes in the next round, with filter 3.
  assert [l.outputs_after for l in report.layers] == [3, 3, 4]
  assert report.stops == []


def test_same_padding_without_a_border_folds_like_valid():
  rs = np.random.RandomState(3)
  w1 = rs.randn(3, 3, 2, 4).astype(np.float32)
  w1[..., [0, 2]] = 0.0
  x = tf.placeholder(tf.float32, [None, 6, 6, 2], name='x')
  h = tf.nn.relu6(_conv(x, w1, [1.0, 2.0, 7.0, 3.0], 'SAME'))
  # 1x1 kernel, and 2x2 stride 2 on 6x6: SAME pads nothing.
  h = _conv(h, rs.randn(1, 1, 4, 3), rs.randn(3), 'SAME')
  _conv(tf.nn.relu(h), rs.randn(2, 2, 3, 2), rs.randn(2), 'SAME', stride=2,
        name='y')
  feed = rs.randn(2, 6, 6, 2).astype(np.float32)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  assert report.layers[0].outputs_after == 2 and report.stops == []


def test_flatten_into_dense_removes_the_nhwc_rows_of_each_channel():
  rs = np.random.RandomState(4)
  w1 = rs.randn(3, 3, 3, 5).astype(np.float32)
  w1[..., [1, 4]] = 0.0
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  h = tf.nn.relu(_conv(x, w1, rs.randn(5), 'VALID'))        # 6x6x5
  h = tf.nn.max_pool(h, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME')  # 3x3x5
  h = tf.reshape(h, [-1, 45])
  _dense(h, rs.randn(45, 7), rs.randn(7), name='y')
  feed = rs.randn(3, 8, 8, 3).astype(np.float32)
  small, report = _check_same_outputs(tf.get_default_graph().as_graph_def(),
                                      feed)
  assert (report.layers[1].inputs_before, report.layers[1].inputs_after) == \
      (45, 27)
  assert sorted(v.tolist() for v in _consts(small).values()
                if v.dtype == np.int32) == [[-1, 27]]


def _flatten(h, form):
  if form == 'slim':        # TF 1.15 builds the next form; TF 2.x a constant
    import tf_slim as slim
    return slim.flatten(h)
  if form == 'batch_and_rest':
    return tf.reshape(h, tf.stack([tf.shape(h)[0], -1]))
  shape = tf.shape(h)       # 'all_dims': reads the channels from the shape
  return tf.reshape(h, tf.stack([shape[0], shape[1] * shape[2] * shape[3]]))


@pytest.mark.parametrize('form', ['slim', 'batch_and_rest', 'all_dims'])
def test_a_flatten_that_reads_only_the_batch_size_shrinks(form):
  w1, w2 = _glorot(4, [3, 3, 3, 5], [45, 7])
  w1[..., [1, 4]] = 0.0
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  h = tf.nn.relu(_conv(x, w1, np.full(5, 0.1, np.float32), 'VALID'))
  h = tf.nn.max_pool(h, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME')  # 3x3x5
  _dense(_flatten(h, form), w2, np.zeros(7, np.float32), name='y')
  feed = np.linspace(-1, 1, 3 * 8 * 8 * 3, dtype=np.float32).reshape(
      3, 8, 8, 3)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  dense = report.layers[1]
  if form == 'all_dims':
    assert (dense.inputs_before, dense.inputs_after) == (45, 45)
    assert any(stop.node.endswith('Shape') for stop in report.stops), \
        report.stops
  else:
    assert (dense.inputs_before, dense.inputs_after) == (45, 27)
    assert report.layers[0].outputs_after == 3


@pytest.mark.parametrize('activation', ['relu', 'swish'])
@pytest.mark.parametrize('logits_bias', [True, False])
def test_a_channel_only_one_member_of_an_add_drops_stops_at_that_add(
    activation, logits_bias):
  w1, w2, w3 = _glorot(6, [3, 3, 3, 8], [1, 1, 8, 8], [8, 4])
  w1[..., [0, 1]] = 0.0           # the stem drops 0 and 1, the branch 1 and 2
  w2[..., [1, 2]] = 0.0
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  stem = getattr(tf.nn, activation)(_conv(x, w1, np.full(8, 0.1, np.float32),
                                          'SAME', name='stem'))
  branch = _conv(stem, w2, np.full(8, 0.2, np.float32), 'SAME', name='branch')
  h = tf.reduce_mean(tf.add(stem, branch, name='residual_add'), [1, 2])
  if logits_bias:
    _dense(h, w3, np.ones(4, np.float32), name='y')
  else:     # the folded constant of channel 1 needs an Add after it
    tf.matmul(h, tf.constant(w3), name='y')
  feed = np.linspace(-1, 1, 2 * 8 * 8 * 3, dtype=np.float32).reshape(
      2, 8, 8, 3)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  assert [(s.node, s.channels) for s in report.stops] == [
      ('residual_add', 1), ('residual_add', 1)]
  assert all(s.reason.startswith('not every member of this add drops')
             for s in report.stops)
  assert [row.outputs_after for row in report.layers[:2]] == [7, 7]


def test_cascade_a_filter_emptied_by_removed_inputs_is_removed_too():
  rs = np.random.RandomState(5)
  w1 = rs.randn(3, 4).astype(np.float32)
  w1[:, 0] = 0.0
  w2 = rs.randn(4, 3).astype(np.float32)
  w2[1:, 2] = 0.0          # output 2 only reads unit 0, which is removed
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  h = tf.nn.relu(_dense(x, w1, [1.0, 0.0, 0.0, 0.0]))
  h = tf.nn.relu(_dense(h, w2, rs.randn(3)))
  _dense(h, rs.randn(3, 2), rs.randn(2), name='y')
  feed = rs.randn(4, 3).astype(np.float32)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  assert [l.outputs_after for l in report.layers] == [3, 2, 2]


@pytest.mark.parametrize('kind,reason', [
    ('lrn', 'LRN divides a removed channel that is not 0 by a sum over its '
            'kept neighbours'),
    ('batch_norm', 'batch norm in training form'),
    ('channel_sum', 'Sum is not among the ops the shrink passes'),
    ('shape_read', 'it reads the shape, which the shrink changes'),
])
def test_channel_mixing_ops_stop_the_shrink_and_say_why(kind, reason):
  rs = np.random.RandomState(6)
  w1 = rs.randn(3, 3, 3, 4).astype(np.float32)
  w1[..., 1] = 0.0
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  h = tf.nn.relu(_conv(x, w1, rs.randn(4), 'SAME'))
  if kind == 'lrn':   # the removed channel is 1 + relu(bias) there, not 0
    h = tf.nn.lrn(h + 1.0, 2, name='norm1')
  elif kind == 'batch_norm':
    h, _, _ = tf.nn.fused_batch_norm(h, _const(np.ones(4)),
                                     _const(np.zeros(4)), is_training=True)
  elif kind == 'channel_sum':
    h = h + tf.reduce_sum(h, axis=3, keepdims=True)
  else:
    h = tf.reshape(h, tf.shape(h))
  _conv(h, rs.randn(1, 1, h.shape[-1], 2), rs.randn(2), name='y')
  feed = rs.randn(2, 8, 8, 3).astype(np.float32)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  assert report.layers[0].outputs_after == 4
  stop, = report.stops
  assert reason in stop.reason and stop.channels == 1
  assert 'kept 1 empty output channel(s) of ' in report.format_table()


def _grouped_net(rs, grouped_first):
  """x -> conv a -> relu -> conv y; one of the two is a grouped conv of two
  groups, and a has empty filters (filters 0 and 1: group 0's of a grouped
  a, whose outputs a smaller filter would read from the wrong group)."""
  x = tf.placeholder(tf.float32, [None, 6, 6, 4], name='x')
  w1, w2 = _glorot(3, [3, 3, 2 if grouped_first else 4, 8],
                   [3, 3, 8 if grouped_first else 4, 6])
  w1[..., [0, 1]] = 0.0
  h = tf.nn.relu(_conv(x, w1, np.linspace(-1, 1, 8), 'SAME'))
  _conv(h, w2, np.zeros(6), 'SAME', name='y')
  return tf.get_default_graph().as_graph_def(), rs.randn(2, 6, 6, 4)


@pytest.mark.skipif(tf.__version__.startswith('1.'),
                    reason='grouped Conv2D runs on CPU from TF 2.x')
@pytest.mark.parametrize('grouped_first', [True, False])
def test_grouped_conv_is_skipped_not_shrunk(grouped_first):
  graph_def, feed = _grouped_net(np.random.RandomState(0), grouped_first)
  _, report = _check_same_outputs(graph_def, feed.astype(np.float32))
  grouped = 'Conv2D' if grouped_first else 'Conv2D_1'
  assert [(n, r) for n, _, r in report.skipped] == [
      (grouped, 'grouped convolutions are not shrunk')]
  assert all(l.outputs_after == l.outputs_before for l in report.layers)


@pytest.mark.parametrize('stride', [1, 2])
def test_an_input_of_unknown_size_gets_the_removed_values_as_a_ones_channel(
    stride):
  # A SAME conv pads by the input's size; a ones channel it pads itself
  # gives each position what the removed channels (relu(bias) > 0) gave.
  x = tf.placeholder(tf.float32, [None, None, None, 3], name='x')
  w1, w2 = _glorot(4, [3, 3, 3, 6], [3, 3, 6, 4])
  w1[..., [1, 4]] = 0.0
  h = tf.nn.relu(_conv(x, w1, np.linspace(0.2, 1.2, 6), 'SAME'))
  _conv(h, w2, np.zeros(4), 'SAME', stride, name='y')
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'])
  rs = np.random.RandomState(stride)
  for size in (7, 8):     # odd and even: SAME pads them differently
    feed = rs.randn(2, size, size, 3).astype(np.float32)
    np.testing.assert_allclose(run_graph_def(small, feed),
                               run_graph_def(graph_def, feed), rtol=1e-5,
                               atol=1e-5)
  assert report.stops == []
  assert [(l.outputs_before, l.outputs_after) for l in report.layers] == [
      (6, 4), (4, 4)]
  ops = {n.name: n.op for n in small.node}
  assert ops['Conv2D_1/shrink_ones/fill'] == 'Fill'


@pytest.mark.parametrize('radius,beta',
                         [(2, 0.75), (5, 0.5), (1, 1.0), (3, 0.6)])
def test_lrn_loses_channels_that_are_0_there_and_keeps_its_own_op(
    radius, beta):
  # contrib's CIFAR-10 net: conv -> relu -> pool -> LRN -> conv. Filters 1, 4
  # and 5 are empty and their bias is negative, so relu makes them 0; filter
  # 6 is empty with a positive bias, a constant the LRN divides by a sum that
  # varies: it stays.
  rs = np.random.RandomState(7)
  w1 = rs.randn(3, 3, 3, 8).astype(np.float32)
  w1[..., [1, 4, 5, 6]] = 0.0
  bias = np.abs(rs.randn(8)).astype(np.float32)
  bias[[1, 4, 5]] *= -1.0
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  h = tf.nn.relu(_conv(x, w1, bias, 'SAME'))
  h = tf.nn.max_pool(h, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME')
  h = tf.nn.lrn(h, radius, bias=1.5, alpha=0.01, beta=beta, name='norm1')
  _conv(h, rs.randn(3, 3, 8, 5), rs.randn(5), 'SAME', name='y')
  feed = rs.randn(3, 8, 8, 3).astype(np.float32)
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = _check_same_outputs(graph_def, feed)
  # The same LRN op on the same values: the outputs are bit for bit equal.
  np.testing.assert_array_equal(run_graph_def(small, feed),
                                run_graph_def(graph_def, feed))
  conv1, conv2, norm = report.layers
  assert (conv1.outputs_after, conv2.inputs_after) == (5, 5)
  consts = _consts(small)
  assert consts['norm1/kept'].tolist() == [0, 2, 3, 6, 7]
  assert consts['norm1/places/indices'].tolist() == [0, 5, 1, 2, 5, 5, 3, 4]
  # Its band sums at the original width: 2 (2 r + 1) per channel, 4x4.
  flops = 2 * (2 * radius + 1) * 8 * 4 * 4
  assert norm == (norm.name, 'LRN', 8, 5, 8, 5, 0, 0, flops, flops)
  ops = {n.name: n.op for n in small.node if n.name.startswith('norm1')}
  assert (ops['norm1'], ops['norm1/full'], ops['norm1/places']) == (
      'GatherV2', 'LRN', 'GatherV2')
  stop, = report.stops
  assert stop.channels == 1 and stop.op == 'LRN'
  assert 'LRN divides a removed channel that is not 0' in stop.reason


def test_every_lrn_is_counted_with_the_flops_of_its_band_sums():
  x = tf.placeholder(tf.float32, [None, 6, 6, 4], name='x')
  tf.nn.lrn(_conv(x, np.ones([1, 1, 4, 4]), np.ones(4), 'SAME'), 2,
            name='y')
  _, report = shrink_graph_def(tf.get_default_graph().as_graph_def(), ['y'])
  norm = [l for l in report.layers if l.op == 'LRN']
  assert norm == [('y', 'LRN', 4, 4, 4, 4, 0, 0, 2 * 5 * 4 * 36,
                   2 * 5 * 4 * 36)]
  assert report.flops_before == 2 * 16 * 36 + 2 * 5 * 4 * 36


def test_empty_outputs_of_the_last_layer_stay_and_one_channel_is_always_kept():
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  h = tf.nn.relu(_dense(x, np.zeros([3, 4]), [1.0, 2.0, 3.0, 4.0]))
  _dense(h, np.zeros([4, 2]), [0.0, 1.0], name='y')
  feed = np.ones([2, 3], np.float32)
  _, report = _check_same_outputs(tf.get_default_graph().as_graph_def(), feed)
  assert [l.outputs_after for l in report.layers] == [1, 2]
  assert [s.reason for s in report.stops] == [
      'every output channel is empty; one is kept', 'it is a graph output']


def _net_with_a_side_head(rs):
  """x -> conv a (filters 1 and 4 empty) -> relu h -> conv y, plus nodes
  outside y: `aux`, a spatial mean of h (it reads h's channels), and
  `probs`, a softmax after y."""
  w1, w2 = _glorot(5, [3, 3, 3, 8], [3, 3, 8, 4])
  w1[..., [1, 4]] = 0.0
  x = tf.placeholder(tf.float32, [None, 6, 6, 3], name='x')
  h = tf.nn.relu(_conv(x, w1, np.linspace(-1, 1, 8), 'SAME'))
  y = _conv(h, w2, np.zeros(4), 'SAME', name='y')
  tf.reduce_mean(h, [1, 2], name='aux')
  tf.nn.softmax(y, name='probs')
  return tf.get_default_graph().as_graph_def(), rs.randn(2, 6, 6, 3).astype(
      np.float32)


def test_nodes_the_outputs_do_not_need_are_left_out_not_changed():
  # Kept, `aux` would read the 6 channels left of 8 (or pin all 8).
  graph_def, feed = _net_with_a_side_head(np.random.RandomState(0))
  small, report = _check_same_outputs(graph_def, feed)
  assert [(l.outputs_before, l.outputs_after) for l in report.layers] == [
      (8, 6), (4, 4)]
  assert report.dropped == ['aux', 'probs'] and report.stops == []
  assert not {'aux', 'probs'} & set(n.name for n in small.node)
  assert report.to_dict()['dropped'] == ['aux', 'probs']
  assert report.format_table().endswith(
      'left out 2 node(s) the outputs do not need: aux, probs')


def test_an_output_that_reads_the_channels_keeps_them():
  graph_def, feed = _net_with_a_side_head(np.random.RandomState(0))
  small, report = _check_same_outputs(graph_def, feed, ('y', 'aux', 'probs'))
  assert [l.outputs_after for l in report.layers] == [8, 4]
  assert report.dropped == []
  assert [(s.node, s.reason, s.channels) for s in report.stops] == [
      ('aux', 'it is a graph output', 2)]


def test_next_layer_without_bias_gets_an_add_for_the_constants():
  rs = np.random.RandomState(7)
  w1 = rs.randn(3, 4).astype(np.float32)
  w1[:, [0, 1]] = 0.0
  w2 = rs.randn(4, 2).astype(np.float32)
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  h = tf.nn.relu(_dense(x, w1, [-1.0, 1.0, 0.0, 0.0]))
  tf.identity(tf.matmul(h, _const(w2)), name='y')
  feed = rs.randn(2, 3).astype(np.float32)
  small, report = _check_same_outputs(tf.get_default_graph().as_graph_def(),
                                      feed)
  assert report.layers[0].outputs_after == 2 and report.stops == []
  added, = [v for n, v in _consts(small).items() if 'shrink_fold' in n]
  np.testing.assert_allclose(added, w2[1], rtol=1e-6)    # relu(1) * w2[1]


def test_bad_output_names_raise():
  tf.placeholder(tf.float32, [None, 3], name='x')
  with pytest.raises(ValueError, match="output node 'nope' not found in graph_def"):
    shrink_graph_def(tf.get_default_graph().as_graph_def(), ['nope'])


def test_a_graph_def_that_is_bytes_or_a_fold_borders_that_is_no_bool_raise():
  tf.identity(tf.placeholder(tf.float32, [None, 3], name='x'), name='y')
  graph_def = tf.get_default_graph().as_graph_def()
  with pytest.raises(TypeError, match=r'^graph_def must be a tf\.GraphDef, '
                     r'got bytes; parse a \.pb with tf\.GraphDef\.FromString'):
    shrink_graph_def(graph_def.SerializeToString(), ['y'])
  with pytest.raises(TypeError, match=r"^fold_borders must be True or False, "
                     r"got 'no'$"):
    shrink_graph_def(graph_def, ['y'], fold_borders='no')


def test_shrink_pb_names_a_path_that_is_not_a_file(tmp_path):
  missing = str(tmp_path / 'missing.pb')
  with pytest.raises(ValueError, match=r"^path '%s' is not a file \(it does "
                     r'not exist\); give the \.pb that strip_checkpoint or '
                     r'strip_pruning_vars wrote$' % missing):
    tf1prune.shrink_pb(missing, ['y'])
  with pytest.raises(ValueError, match=r"^path '%s' is not a file \(a "
                     r'directory\)' % tmp_path):
    tf1prune.shrink_pb(str(tmp_path), ['y'])
  assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize('size,kernel,stride,dilation,padding', [
    ((6, 7), (3, 3), 1, 1, 'SAME'), ((9, 8), (5, 3), 2, 1, 'SAME'),
    ((9, 9), (3, 3), 1, 2, 'SAME'), ((7, 6), (4, 2), 3, 1, 'SAME'),
    ((6, 7), (3, 3), 2, 1, 'VALID')])
def test_constant_response_equals_tf_conv_of_a_constant_input(
    size, kernel, stride, dilation, padding):
  rs = np.random.RandomState(sum(size) + stride)
  values = rs.randn(3)
  weight = rs.randn(kernel[0], kernel[1], 3, 2)
  pads = conv_pads(size, kernel, [stride] * 2, [dilation] * 2, padding)
  got = constant_response(values, weight, size, pads, [stride] * 2,
                          [dilation] * 2)
  image = np.ones([1, size[0], size[1], 3]) * values
  expected = tf.nn.conv2d(tf.constant(image), tf.constant(weight),
                          [1, stride, stride, 1], padding,
                          dilations=[1, dilation, dilation, 1])
  with tf.Session() as sess:
    np.testing.assert_allclose(got, sess.run(expected)[0], rtol=1e-10)


# Random pruned networks -------------------------------------------------------

def _random_network(seed):
  """conv/pool chain, then flatten and dense chain or a last conv as output;
  random filters zeroed, some layers without bias."""
  rs = np.random.RandomState(seed)
  size = rs.randint(7, 13)
  channels = rs.randint(1, 4)
  x = tf.placeholder(tf.float32, [None, size, size, channels], name='x')
  h = x
  acts = [tf.nn.relu, tf.nn.relu6, tf.nn.tanh, tf.nn.elu, tf.identity]
  for _ in range(rs.randint(1, 4)):
    out = rs.randint(2, 9)
    k = rs.choice([1, 3]) if h.shape[1] >= 3 else 1
    w = rs.randn(k, k, h.shape[-1], out).astype(np.float32)
    w[..., rs.rand(out) < rs.uniform(0.2, 0.8)] = 0.0
    stride, padding = rs.choice([1, 2]), rs.choice(['SAME', 'VALID'])
    if rs.rand() < 0.8:
      h = _conv(h, w, rs.randn(out), padding, stride)
    else:
      h = tf.nn.conv2d(h, _const(w), [1, stride, stride, 1], padding)
    h = acts[rs.randint(len(acts))](h)
    if rs.rand() < 0.5 and h.shape[1] >= 2:
      pool = [tf.nn.max_pool, tf.nn.avg_pool][rs.randint(2)]
      h = pool(h, [1, 2, 2, 1], [1, 2, 2, 1], rs.choice(['SAME', 'VALID']))
  if rs.rand() < 0.3:
    _conv(h, rs.randn(3, 3, h.shape[-1], 2), rs.randn(2), 'SAME', name='y')
    return rs.randn(2, size, size, channels).astype(np.float32)
  dim = int(np.prod(h.shape[1:]))
  # [2, -1]: TF 1.15 does not know the static width; the next layer does.
  h = tf.reshape(h, [-1, dim] if rs.rand() < 0.5 else [2, -1])
  for _ in range(rs.randint(1, 3)):
    out = rs.randint(2, 12)
    w = rs.randn(dim, out).astype(np.float32)
    w[:, rs.rand(out) < 0.5] = 0.0
    h = acts[rs.randint(len(acts))](_dense(h, w, rs.randn(out)))
    dim = out
  _dense(h, rs.randn(dim, 3), rs.randn(3), name='y')
  return rs.randn(2, size, size, channels).astype(np.float32)


@pytest.mark.parametrize('seed', range(24))
def test_random_pruned_networks_keep_their_outputs(seed):
  feed = _random_network(seed)
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = _check_same_outputs(graph_def, feed)
  for layer in report.layers:
    assert layer.inputs_after <= layer.inputs_before
    assert layer.outputs_after <= layer.outputs_before
  dead = sum(s.channels for s in report.stops)
  removed = sum(l.outputs_before - l.outputs_after for l in report.layers)
  consts = _consts(graph_def)
  empty = sum(int((~v.reshape(-1, v.shape[-1]).any(axis=0)).sum())
              for v in consts.values() if v.ndim in (2, 4))
  assert removed + dead >= empty   # (cascades can empty more filters)
  assert report.params_after == sum(v.size for v in _consts(small).values()
                                    if v.dtype == np.float32)


# From training graph to shrunk graph -------------------------------------------

def _pruned_stripped_graph(granularity):
  step = tf.train.get_or_create_global_step()
  rs = np.random.RandomState(8)
  x = tf.placeholder(tf.float32, [None, 12, 12, 3], name='x')
  init = tf.random_normal_initializer(seed=1)
  bias = tf.random_normal_initializer(seed=2)
  net = tf1prune.masked_conv2d(x, 16, 5, weights_initializer=init,
                               biases_initializer=bias, scope='conv1')
  net = tf.nn.max_pool(net, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME')
  net = tf1prune.masked_conv2d(net, 16, 5, padding='VALID',
                               weights_initializer=init,
                               biases_initializer=bias, scope='conv2')
  net = tf.reshape(net, [-1, 2 * 2 * 16])
  net = tf1prune.masked_fully_connected(net, 24, weights_initializer=init,
                                        biases_initializer=bias, scope='fc3')
  tf1prune.masked_fully_connected(net, 5, activation_fn=None,
                                  weights_initializer=init,
                                  biases_initializer=bias, scope='logits')
  tf.identity(tf.get_default_graph().get_tensor_by_name('logits/BiasAdd:0'),
              name='y')
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,do_not_prune=[logits],granularity_map=[%s]'
      % granularity))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 1000))
    sess.run(p.mask_update_op())
    frozen = tf.graph_util.convert_variables_to_constants(
        sess, tf.get_default_graph().as_graph_def(), ['y'])
  feed = rs.randn(3, 12, 12, 3).astype(np.float32)
  return tf1prune.strip_pruning_vars_fn(frozen, ['y']), feed


def test_filter_pruned_tf1prune_network_shrinks_to_half_the_filters():
  stripped, feed = _pruned_stripped_graph('conv.*:filter,fc3:filter')
  small, report = _check_same_outputs(stripped, feed)
  # TF 1.15 names the convolution 'conv1/convolution', TF 2 'conv1/Conv2D'.
  assert [(l.name.split('/')[0], l.op, l.outputs_before, l.outputs_after)
          for l in report.layers] == [
              ('conv1', 'Conv2D', 16, 8), ('conv2', 'Conv2D', 16, 8),
              ('fc3', 'MatMul', 24, 12), ('logits', 'MatMul', 5, 5)]
  assert report.flops_after < 0.5 * report.flops_before


def test_shrunk_graph_written_under_this_tf_runs_under_the_other(
    tmp_path, other_python):
  stripped, feed = _pruned_stripped_graph('conv.*:kernel,fc3:filter')
  small, _ = shrink_graph_def(stripped, ['y'])
  graph_io.strip_default_attrs(small, graph_io.op_defs(small))
  other, = run_in_process(other_python, [small], feed, str(tmp_path))
  np.testing.assert_allclose(other, run_graph_def(stripped, feed), rtol=1e-5,
                             atol=1e-5)


def test_shrink_pb_rewrites_the_file_smaller(tmp_path):
  stripped, feed = _pruned_stripped_graph('conv.*:filter,fc3:filter')
  path = str(tmp_path / 'model.pb')
  with open(path, 'wb') as f:
    f.write(stripped.SerializeToString())
  report = tf1prune.shrink_pb(path, ['y'], str(tmp_path / 'small.pb'))
  small = read_graph_def(str(tmp_path / 'small.pb'))
  np.testing.assert_allclose(run_graph_def(small, feed),
                             run_graph_def(stripped, feed), rtol=1e-5,
                             atol=1e-5)
  assert report.file_bytes_before == os.path.getsize(path)
  assert report.file_bytes_after == os.path.getsize(str(tmp_path / 'small.pb'))
  assert report.file_bytes_after < 0.6 * report.file_bytes_before
  assert report.to_dict()['file'] == {
      'bytes_before': report.file_bytes_before,
      'bytes_after': report.file_bytes_after}


def _filter_pruned_checkpoint(train_dir):
  """conv1 (8 filters, 75% of them pruned) -> conv2 -> y, saved in
  `train_dir`; returns (feed, y of feed)."""
  step = tf.train.get_or_create_global_step()
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  bias = tf.random_normal_initializer(seed=3)
  net = tf1prune.masked_conv2d(x, 8, 3, biases_initializer=bias, scope='conv1')
  net = tf1prune.masked_conv2d(net, 4, 3, padding='VALID',
                               biases_initializer=bias, scope='conv2')
  tf.identity(net, name='y')
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.75,granularity_map=[conv1:filter]'))
  feed = np.random.RandomState(9).randn(2, 8, 8, 3).astype(np.float32)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 1000))
    sess.run(p.mask_update_op())
    expected = sess.run('y:0', {x: feed})
    tf.train.Saver().save(sess, os.path.join(train_dir, 'model.ckpt'))
  return feed, expected


def test_strip_pruning_vars_shrink_flag(tmp_path, capsys):
  from tf1prune.cli import strip_pruning_vars as strip_cli
  feed, expected = _filter_pruned_checkpoint(str(tmp_path / 'train'))
  status = strip_cli.main([
      '--checkpoint_dir=%s' % (tmp_path / 'train'), '--output_node_names=y',
      '--output_dir=%s' % (tmp_path / 'out'), '--shrink',
      '--report_json=%s' % (tmp_path / 'report.json')])
  printed = capsys.readouterr().out
  assert status == 0
  assert 'shrink (channels whose filters are all zero removed):' in printed
  assert '8 -> 2' in printed
  graph_def = read_graph_def(str(tmp_path / 'out' / 'pruning_stripped.pb'))
  np.testing.assert_allclose(run_graph_def(graph_def, feed), expected,
                             rtol=1e-5, atol=1e-5)
  with open(str(tmp_path / 'report.json')) as f:
    shrink = __import__('json').load(f)['shrink']
  assert [l['outputs_after'] for l in shrink['layers']] == [2, 4]


def test_with_shrink_the_strip_report_describes_the_file_written(tmp_path,
                                                                  capsys):
  import gzip
  import json
  from tf1prune.cli import strip_pruning_vars as strip_cli
  _filter_pruned_checkpoint(str(tmp_path / 'train'))
  assert strip_cli.main([
      '--checkpoint_dir=%s' % (tmp_path / 'train'), '--output_node_names=y',
      '--output_dir=%s' % (tmp_path / 'out'), '--shrink',
      '--report_json=%s' % (tmp_path / 'report.json')]) == 0
  printed = capsys.readouterr().out
  with open(str(tmp_path / 'out' / 'pruning_stripped.pb'), 'rb') as f:
    data = f.read()
  graph_def = tf.GraphDef()
  graph_def.ParseFromString(data)
  with open(str(tmp_path / 'report.json')) as f:
    report = json.load(f)
  shrink = report.pop('shrink')
  assert report['num_nodes'] == len(graph_def.node)
  assert report['file'] == {'bytes': len(data),
                            'gzip_bytes': len(gzip.compress(data, 6))}
  # What the stripped graph was before the shrink replaced it.
  assert report['unshrunk_file']['bytes'] == shrink['file']['bytes_before']
  assert report['unshrunk_num_nodes'] == shrink['num_nodes']['before']
  assert shrink['num_nodes']['after'] == len(graph_def.node)
  assert shrink['file']['bytes_after'] == len(data) < \
      report['unshrunk_file']['bytes']
  assert report['unshrunk_file']['gzip_bytes'] > report['file']['gzip_bytes']
  assert 'file size      {:,} B  (before the shrink: {:,} B;'.format(
      len(data), report['unshrunk_file']['bytes']) in printed
  assert '(%d nodes, %d before the shrink;' % (
      len(graph_def.node), report['unshrunk_num_nodes']) in printed


def test_without_shrink_the_strip_report_has_no_unshrunk_figures(tmp_path):
  _filter_pruned_checkpoint(str(tmp_path / 'train'))
  report = tf1prune.strip_checkpoint(str(tmp_path / 'train'), ['y'],
                                     str(tmp_path / 'm.pb'))
  assert report.to_dict()['unshrunk_num_nodes'] is None
  assert report.to_dict()['unshrunk_file'] == {'bytes': None,
                                               'gzip_bytes': None}
  assert 'before the shrink' not in report.format_table()
