"""A layer that is a graph output, has no bias and an emptied filter of its
own, and reads a removed channel that is not 0."""

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune


def _run(graph_def, feed):
  with tf.Graph().as_default():
    tf.import_graph_def(graph_def, name='')
    with tf.Session() as sess:
      return sess.run('y:0', {'x:0': feed})


def test_an_output_layer_that_takes_a_folded_constant_keeps_its_empty_filter():
  w1 = np.ones([3, 4], np.float32)
  w1[:, 1] = 0.0                       # output 1 of the first layer is empty
  b1 = np.array([0.0, 2.0, 0.0, 0.0], np.float32)
  w2 = np.ones([4, 2], np.float32)
  w2[:, 0] = 0.0                       # and output 0 of y (an output: it stays)
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
  tf.matmul(h, w2, name='y')           # no bias
  small, report = tf1prune.shrink_graph_def(
      tf.get_default_graph().as_graph_def(), ['y'])
  feed = np.random.RandomState(0).randn(5, 3).astype(np.float32)
  want = np.maximum(feed.astype(np.float64).dot(w1) + b1, 0.0).dot(w2)
  np.testing.assert_allclose(_run(small, feed), want, rtol=1e-6, atol=1e-6)
  # relu(2) * w2[1] = [0, 2] now comes from an Add that took y's name.
  assert [(l.name, l.outputs_before, l.outputs_after) for l in report.layers] \
      == [('MatMul', 4, 3), ('y/shrink_unfolded', 2, 2)]
  assert [(s.layer, s.node, s.op, s.reason, s.channels)
          for s in report.stops] == [
              ('y/shrink_unfolded', 'y', 'Add', 'it is a graph output', 1)]
  values = dict((n.name, tf.make_ndarray(n.attr['value'].tensor))
                for n in small.node if n.op == 'Const')
  np.testing.assert_array_equal(values['y/shrink_unfolded/value'], [0.0, 2.0])
