"""The extra input channels through which a padded conv gets removed ones."""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink.rounds import shrink_graph_def
from tests.support.graphs import consts as _consts, run_graph_def
from tests.support.nets import depthwise_block


def test_a_map_reaches_the_conv_as_one_indicator_channel_per_position_kind():
  feed, h, w2 = depthwise_block(np.random.RandomState(0), outputs=32,
                                kernel=3, padding='SAME', act=tf.nn.relu)
  graph_def = tf.get_default_graph().as_graph_def()
  with tf.Session() as sess:
    removed = sess.run(h, {'x:0': feed})[0, :, :, :10].astype(np.float64)
  small, report = shrink_graph_def(graph_def, ['y'])
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
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
  feed, _, _ = depthwise_block(np.random.RandomState(1), outputs=4,
                               kernel=1, padding='SAME', act=tf.nn.relu)
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'], objective='params')
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  stop, = report.stops
  # The stop names the padded depthwise conv that made the constants a map.
  assert (stop.layer, stop.node, stop.op, stop.channels) == (
      'Conv2D', 'depthwise', 'DepthwiseConv2dNative', 10)
  assert 'would cost more parameters than keeping them' in stop.reason
  assert 'at y' in stop.reason
  assert not [n for n in small.node if 'shrink_ones' in n.name]
