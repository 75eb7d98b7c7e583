"""Removed channels that a padded depthwise conv made vary: the cost rule."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink.rounds import shrink_graph_def
from tests.support.graphs import consts as _consts, run_graph_def
from tests.support.nets import depthwise_block


def test_flops_objective_removes_the_map_with_its_interior_in_the_bias():
  feed, h, w2 = depthwise_block(np.random.RandomState(1))
  graph_def = tf.get_default_graph().as_graph_def()
  with tf.Session() as sess:
    removed = sess.run(h, {'x:0': feed})[0, :, :, :10].astype(np.float64)
  small, report = shrink_graph_def(graph_def, ['y'])
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  assert report.stops == []
  assert [l.outputs_after for l in report.layers] == [6, 6, 4]
  consts = _consts(small)
  # 9 kinds of position (corners, edges, interior); the interior is in a
  # new [4] constant added after y, the 8 others are indicator channels.
  # y had no bias: the conv is now y/shrink_unfolded, y the Add after it.
  pattern = consts['y/shrink_unfolded/shrink_ones/pattern']
  assert pattern.shape == (1, 5, 5, 8)
  assert pattern.sum() == 5 * 5 - 3 * 3
  np.testing.assert_array_equal(pattern[0, 1:4, 1:4], 0.0)
  interior = removed[2, 2]
  weight = consts[[n.input[1] for n in small.node
                   if n.name == 'y/shrink_unfolded'][0]]
  assert weight.shape == (1, 1, 6 + 8, 4)
  np.testing.assert_array_equal(weight[:, :, :6], w2[:, :, 10:])
  fold = consts['y/shrink_unfolded/value']
  np.testing.assert_allclose(fold, interior.dot(w2[0, 0, :10]), rtol=1e-5)
  for q in range(8):
    where = pattern[0, :, :, q] == 1
    np.testing.assert_allclose(
        weight[0, 0, 6 + q],
        (removed[where][0] - interior).dot(w2[0, 0, :10]), rtol=1e-4,
        atol=1e-6)
  y = report.layers[2]
  assert y.flops_after == 2 * 5 * 5 * (6 + 8) * 4 < y.flops_before


def test_params_objective_keeps_the_channels_and_names_the_padded_op():
  feed, h, _ = depthwise_block(np.random.RandomState(2))
  graph_def = tf.get_default_graph().as_graph_def()
  with tf.Session() as sess:
    removed = sess.run(h, {'x:0': feed})[0, :, :, :10].reshape(-1, 10)
  varying = int((removed.max(axis=0) != removed.min(axis=0)).sum())
  assert 0 < varying < 10         # one saturates: a constant, it goes
  small, report = shrink_graph_def(graph_def, ['y'], objective='params')
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  stop, = report.stops
  assert (stop.node, stop.op, stop.channels) == (
      'depthwise', 'DepthwiseConv2dNative', varying)
  assert report.layers[0].outputs_after == 16 - (10 - varying)
  assert 'zero-padded op (at y)' in stop.reason
  assert 'shrink objective params' in stop.reason


def test_fewer_removed_channels_than_position_kinds_are_read_as_they_are():
  feed, h, w2 = depthwise_block(np.random.RandomState(3), removed=3)
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'])
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  assert report.stops == []
  weight = _consts(small)[[n.input[1] for n in small.node
                           if n.op == 'Conv2D'][-1]]
  assert weight.shape == (1, 1, 13 + 3, 4)       # never more than removed
  np.testing.assert_array_equal(weight[:, :, 13:], w2[:, :, :3])


def test_an_unknown_objective_is_refused_with_the_choices():
  depthwise_block(np.random.RandomState(4))
  with pytest.raises(ValueError, match=r"objective must be 'flops' or "
                     r"'params', got 'speed'"):
    shrink_graph_def(tf.get_default_graph().as_graph_def(), ['y'],
                     objective='speed')


def test_where_the_shape_is_known_the_extra_channels_are_one_constant():
  feed, h, _ = depthwise_block(np.random.RandomState(1), batch=2)
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'])
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  assert report.stops == []
  added = {n.name.partition('/shrink_ones')[2]: n.op for n in small.node
           if '/shrink_ones' in n.name}
  assert added == {'': 'ConcatV2', '/map': 'Const', '/axis': 'Const'}
  pattern = _consts(small)['y/shrink_unfolded/shrink_ones/map']
  assert pattern.shape == (2, 5, 5, 8)
  np.testing.assert_array_equal(pattern[0], pattern[1])
  assert pattern[0].sum() == 5 * 5 - 3 * 3
