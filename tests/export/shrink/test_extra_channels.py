"""The extra input channels through which a padded conv gets removed ones."""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink.rounds import shrink_graph_def
from tests.support.graphs import const as _const, consts as _consts, run as _run





def _depthwise_net(rs, outputs, kernel):
  """conv1 1x1 (10 of 16 filters empty, biases > 0) -> relu -> depthwise 3x3
  SAME -> bias -> relu -> conv2 (`kernel`, SAME, `outputs` filters) = y.

  A removed channel is a constant before the depthwise conv and a map after
  it (its zero padding): 9 kinds of position (corners, edges, interior).
  Returns (feed, the conv2 input tensor, conv2's weight)."""
  x = tf.placeholder(tf.float32, [None, 5, 5, 2], name='x')
  w1 = rs.randn(1, 1, 2, 16).astype(np.float32)
  w1[..., :10] = 0.0
  h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, _const(w1), [1] * 4, 'SAME'),
                                _const(rs.uniform(0.5, 1.0, 16))))
  h = tf.nn.depthwise_conv2d(h, _const(rs.randn(3, 3, 16, 1)), [1] * 4, 'SAME')
  h = tf.nn.relu(tf.nn.bias_add(h, _const(rs.uniform(0.5, 1.0, 16))))
  w2 = rs.randn(kernel, kernel, 16, outputs).astype(np.float32)
  tf.nn.conv2d(h, _const(w2), [1] * 4, 'SAME', name='y')
  return rs.randn(2, 5, 5, 2).astype(np.float32), h, w2


def test_a_map_reaches_the_conv_as_one_indicator_channel_per_position_kind():
  feed, h, w2 = _depthwise_net(np.random.RandomState(0), 32, 3)
  graph_def = tf.get_default_graph().as_graph_def()
  with tf.Session() as sess:
    removed = sess.run(h, {'x:0': feed})[0, :, :, :10].astype(np.float64)
  small, report = shrink_graph_def(graph_def, ['y'])
  expected = _run(graph_def, feed)
  np.testing.assert_allclose(_run(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  assert report.stops == []
  assert [l.outputs_after for l in report.layers] == [6, 6, 32]
  consts = _consts(small)
  pattern = consts['y/shrink_ones/pattern']
  assert pattern.shape == (1, 5, 5, 9)
  np.testing.assert_array_equal(pattern.sum(axis=-1), np.ones([1, 5, 5]))
  weight = consts[[n.input[1] for n in small.node if n.name == 'y'][0]]
  assert weight.shape == (3, 3, 6 + 9, 32)
  np.testing.assert_array_equal(weight[:, :, :6], w2[:, :, 10:])
  for q in range(9):
    where = pattern[0, :, :, q] == 1
    values = removed[where]               # the same vector at every position
    np.testing.assert_allclose(values, values[:1].repeat(len(values), 0),
                               rtol=1e-6)
    np.testing.assert_allclose(
        weight[:, :, 6 + q],
        np.tensordot(values[0], w2[:, :, :10].astype(np.float64),
                     axes=([0], [2])), rtol=1e-5, atol=1e-6)


def test_a_map_costlier_than_its_channels_is_kept_and_the_report_says_why():
  feed, _, _ = _depthwise_net(np.random.RandomState(1), 4, 1)
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'], objective='params')
  expected = _run(graph_def, feed)
  np.testing.assert_allclose(_run(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  stop, = report.stops
  # The stop names the padded depthwise conv that made the constants a map.
  assert (stop.layer, stop.node, stop.op, stop.channels) == (
      'Conv2D', 'depthwise', 'DepthwiseConv2dNative', 10)
  assert 'would cost more parameters than keeping them' in stop.reason
  assert 'at y' in stop.reason
  assert not [n for n in small.node if 'shrink_ones' in n.name]
