"""A map broadcast over the channels (spatial attention, as in CBAM:
`x * sigmoid(conv(x) -> 1 channel)`): output channel c is `x_c * a`."""

import numpy as np
import tensorflow.compat.v1 as tf

from tests.support.shrunk_graphs import glorot, shrink_same, stops


def _net(b1):
  """c1 (3x3, 6) -> relu -> x * sigmoid(map (3x3, 1) + 0.3) -> c2 (1x1,
  4) -> relu -> mean -> fc (3) -> y (its bias). Filters 0 and 3 of c1 are
  empty; their biases are `b1`."""
  w1, wa, w2, w3 = glorot(5, [3, 3, 2, 6], [3, 3, 6, 1], [1, 1, 6, 4],
                          [4, 3])
  w1[..., [0, 3]] = 0.0
  x = tf.placeholder(tf.float32, [None, 7, 7, 2], name='x')
  h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w1, [1] * 4, 'SAME',
                                             name='c1'), np.float32(b1)))
  a = tf.sigmoid(tf.nn.bias_add(tf.nn.conv2d(h, wa, [1] * 4, 'SAME',
                                             name='map'), [0.3]))
  h = tf.multiply(h, a, name='attend')
  h = tf.nn.relu(tf.nn.conv2d(h, w2, [1] * 4, 'SAME', name='c2'))
  h = tf.reduce_mean(h, [1, 2])
  tf.nn.bias_add(tf.matmul(h, w3, name='fc'), np.float32([0.1, 0.0, -0.1]),
                 name='y')
  return {'x:0': np.random.RandomState(6).randn(3, 7, 7, 2).astype(
      np.float32)}


def test_channels_that_are_0_go_through_a_broadcast_map():
  feed = _net([0.0, 0.4, 0.1, -0.3, 0.2, 0.5])
  _, report = shrink_same(feed)
  assert [(l.name, l.inputs_after, l.outputs_after) for l in report.layers] \
      == [('c1', 2, 4), ('map', 4, 1), ('c2', 4, 4), ('fc', 4, 3)]
  assert stops(report) == []


def test_a_constant_that_is_not_0_times_a_map_is_no_constant():
  feed = _net([0.0, 0.4, 0.1, 0.6, 0.2, 0.5])
  _, report = shrink_same(feed)
  assert [(l.name, l.inputs_after, l.outputs_after) for l in report.layers] \
      == [('c1', 2, 5), ('map', 5, 1), ('c2', 5, 4), ('fc', 4, 3)]
  assert stops(report) == [
      ('c1', 'attend', 'Mul', 'it broadcasts Sigmoid, a map that varies per '
       'example, over the channels: a removed channel that is not 0 is no '
       'constant after it', 1)]
