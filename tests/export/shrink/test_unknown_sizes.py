"""Inputs of unknown height and width: a removed channel that is 0 goes
whatever the size; one that is another constant stops where the size
matters, and the stop names that node and op."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tests.support.shrunk_graphs import glorot, shrink_same, stops


def _net(size, b1, b3):
  """c1 (3x3, 6) -> relu -> dw (3x3 depthwise, SAME) -> relu6 -> c3 (3x3,
  4, SAME) -> relu -> sum over the positions -> fc (dense, 2) -> y (its
  bias). Filters 1 and
  4 of c1 and 0 and 2 of c3 are empty; their biases are `b1`, `b3`."""
  w1, w2, w3, w4 = glorot(3, [3, 3, 3, 6], [3, 3, 6, 1], [3, 3, 6, 4],
                          [4, 2])
  w1[..., [1, 4]] = 0.0
  w3[..., [0, 2]] = 0.0
  x = tf.placeholder(tf.float32, [None, size, size, 3], name='x')
  h = tf.nn.conv2d(x, w1, [1] * 4, 'SAME', name='c1')
  h = tf.nn.relu(tf.nn.bias_add(h, np.float32(b1)))
  h = tf.nn.relu6(tf.nn.depthwise_conv2d_native(h, w2, [1] * 4, 'SAME',
                                                name='dw'))
  h = tf.nn.conv2d(h, w3, [1] * 4, 'SAME', name='c3')
  h = tf.nn.relu(tf.nn.bias_add(h, np.float32(b3)))
  h = tf.reduce_sum(h, [1, 2], name='sum')
  tf.nn.bias_add(tf.matmul(h, w4, name='fc'), np.float32([0.1, -0.1]),
                 name='y')
  return {'x:0': np.random.RandomState(4).randn(2, 8, 8, 3).astype(
      np.float32)}


def _outputs(report):
  return dict((l.name, (l.inputs_after, l.outputs_after))
              for l in report.layers)


@pytest.mark.parametrize('size', [None, 8])
def test_channels_that_are_0_go_whatever_the_input_size(size):
  feed = _net(size, [0.5, 0.0, -0.2, 0.3, 0.0, 0.1], [0.0, 0.2, -1.0, 0.3])
  _, report = shrink_same(feed)
  # c3's filter 2 has relu(-1) = 0 too.
  assert _outputs(report) == {'c1': (3, 4), 'dw': (4, 4), 'c3': (4, 2),
                              'fc': (2, 2)}
  assert stops(report) == []


def test_a_constant_that_is_not_0_stops_where_the_size_matters():
  feed = _net(None, [0.5, 0.0, -0.2, 0.3, 0.7, 0.1], [0.0, 0.2, 0.4, 0.3])
  _, report = shrink_same(feed)
  assert _outputs(report) == {'c1': (3, 5), 'dw': (5, 5), 'c3': (5, 3),
                              'fc': (3, 2)}
  assert stops(report) == [
      ('c1', 'dw', 'DepthwiseConv2dNative', 'the input size of this '
       'depthwise conv is unknown: it zero-pads a removed channel that is '
       'not 0 into a map over the positions', 1),
      ('c3', 'sum', 'Sum', 'the input size of this Sum is unknown: it sums '
       'a removed channel that is not 0 over an unknown number of '
       'positions', 1)]


def test_at_a_known_size_those_constants_go_too():
  feed = _net(8, [0.5, 0.0, -0.2, 0.3, 0.7, 0.1], [0.0, 0.2, 0.4, 0.3])
  _, report = shrink_same(feed)
  assert _outputs(report) == {'c1': (3, 4), 'dw': (4, 4), 'c3': (4, 2),
                              'fc': (2, 2)}
  assert stops(report) == []
