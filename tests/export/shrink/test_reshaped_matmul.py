"""A 1x1 conv written as `Reshape [N*H*W, C] -> MatMul -> Reshape [N, H, W,
C']`: its empty columns go, and its FLOPs count the rows of one example."""

import numpy as np
import tensorflow.compat.v1 as tf

from tests.support.graphs import consts
from tests.support.shrunk_graphs import glorot, shrink_same, stops


def test_a_reshaped_1x1_conv_loses_its_empty_columns_and_counts_per_example():
  w1, w2, w3 = glorot(7, [3, 4], [3, 3, 4, 2], [2, 2])
  w1[:, 1] = 0.0                                    # column 1 is empty
  b1 = np.float32([0.2, 0.5, -0.1, 0.3])            # relu(0.5) stays in it
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  rows = tf.reshape(x, [-1, 3])
  h = tf.nn.bias_add(tf.matmul(rows, w1, name='pointwise'), b1)
  h = tf.nn.relu(tf.reshape(h, [-1, 8, 8, 4], name='back'))
  h = tf.nn.conv2d(h, w2, [1] * 4, 'SAME', name='conv')
  h = tf.reduce_mean(tf.nn.relu(h), [1, 2])
  tf.nn.bias_add(tf.matmul(h, w3, name='fc'), np.float32([0.0, 0.1]),
                 name='y')
  feed = {'x:0': np.random.RandomState(8).randn(2, 8, 8, 3).astype(
      np.float32)}
  small, report = shrink_same(feed)
  assert stops(report) == []
  pointwise, conv, _ = report.layers
  assert (pointwise.name, pointwise.outputs_before, pointwise.outputs_after) \
      == ('pointwise', 4, 3)
  # 2 x 3 x 4 multiply-adds per row, 8 x 8 rows per example.
  assert (pointwise.flops_before, pointwise.flops_after) == (1536, 1152)
  assert (conv.inputs_before, conv.inputs_after) == (4, 3)
  assert consts(small)['back/shape'].tolist() == [-1, 8, 8, 3]
