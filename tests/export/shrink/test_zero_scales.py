"""A batch norm whose scale is 0 on a channel makes that channel its offset,
whatever the layers before it: the channel goes, with the filters that fed
it, and the offset is folded into the next layer."""

import numpy as np
import tensorflow.compat.v1 as tf

from tests.support.graphs import consts
from tests.support.shrunk_graphs import glorot, shrink_same, stops


def test_a_zero_scale_after_an_add_removes_the_channel_from_both_layers():
  w1, w2, w3, w4 = glorot(9, [3, 3, 2, 4], [1, 1, 2, 4], [3, 3, 4, 3],
                          [3, 2])
  x = tf.placeholder(tf.float32, [None, 6, 6, 2], name='x')
  a = tf.nn.conv2d(x, w1, [1] * 4, 'SAME', name='a')    # no filter empty
  b = tf.nn.conv2d(x, w2, [1] * 4, 'SAME', name='b')
  h, _, _ = tf.nn.fused_batch_norm(
      a + b, np.float32([1.0, 0.5, 0.0, 2.0]), np.float32([0.1, 0.2, 0.3,
                                                          -0.1]),
      np.float32([0.5, -0.5, 1.0, 0.0]), np.float32([1.0, 2.0, 0.5, 1.5]),
      epsilon=1e-3, is_training=False, name='bn')
  h = tf.nn.conv2d(tf.nn.relu(h), w3, [1] * 4, 'SAME', name='c')
  h = tf.reduce_mean(tf.nn.relu(h), [1, 2])
  tf.nn.bias_add(tf.matmul(h, w4, name='fc'), np.float32([0.0, 0.1]),
                 name='y')
  feed = {'x:0': np.random.RandomState(10).randn(2, 6, 6, 2).astype(
      np.float32)}
  small, report = shrink_same(feed)
  assert dict((l.name, (l.inputs_after, l.outputs_after))
              for l in report.layers) == {
                  'a': (2, 3), 'b': (2, 3), 'c': (3, 3), 'fc': (3, 2)}
  assert stops(report) == []
  # Channel 2 was relu(0.3) everywhere: c's zero padding makes it a map,
  # added with c's output; no Mul by 0 is left.
  values = consts(small)
  muls = [n for n in small.node if n.op == 'Mul']
  assert muls and all(np.all(values[n.input[1]] != 0) for n in muls)
  np.testing.assert_allclose(values['bn/shrink_offset'], np.float32(
      [0.1, 0.2, -0.1]) - np.float32([0.5, -0.5, 0.0]) * np.float32(
          [1.0, 0.5, 2.0]) / np.sqrt(np.float32([1.0, 2.0, 1.5]) + 1e-3),
                             rtol=1e-6)
