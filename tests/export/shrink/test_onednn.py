"""TF 2.x's oneDNN kernels and convs of one input and one output channel.

The plain TensorFlow reproduction (no tf1prune): a 1x1 depthwise conv of
one channel, a 1x1 Conv2D of one channel in and out, its BiasAdd. With
oneDNN (TF 2.x on x86, the default) it aborts; in a process that ran such a
conv before, other graphs with such a conv abort too. The shrink does not
narrow a conv to one input and one output channel: it keeps two.
"""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tests.support.shrunk_graphs import glorot, shrink_same, stops

REPRODUCTION = '''
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
x = tf.placeholder(tf.float32, [None, 7, 9, 1])
one = np.full([1, 1, 1, 1], 0.5, np.float32)
h = tf.nn.depthwise_conv2d_native(x, one, [1, 1, 1, 1], 'SAME')
y = tf.nn.bias_add(tf.nn.conv2d(h, one, [1, 1, 1, 1], 'SAME'), [0.1])
with tf.Session() as sess:
  try:
    sess.run(y, {x: np.ones([2, 7, 9, 1], np.float32)})
    print('computed')
  except tf.errors.OpError as e:
    print(type(e).__name__, ' '.join(e.message.split()))
'''


def test_tensorflow_with_onednn_aborts_on_a_conv_of_one_channel():
  run = subprocess.run([sys.executable, '-c', REPRODUCTION],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
  assert run.returncode == 0, run.stderr
  if run.stdout.strip() == 'computed':
    pytest.skip('this TensorFlow computes it (TF 1.x, or oneDNN off: '
                'TF_ENABLE_ONEDNN_OPTS=0)')
  assert run.stdout.startswith('AbortedError')
  assert 'could not create a primitive descriptor for the reorder ' \
      'primitive' in run.stdout


def test_the_shrink_keeps_two_channels_where_a_conv_would_have_one():
  """a (1x1, 3) -> relu -> dw (1x1 depthwise) -> b (1x1, 1) -> mean -> y:
  two of a's filters are empty (bias 0), which would leave dw and b with
  one channel in and out."""
  wa, wd, wb, wy = glorot(11, [1, 1, 4, 3], [1, 1, 3, 1], [1, 1, 3, 1],
                          [1, 2])
  wa[..., 1:] = 0.0
  x = tf.placeholder(tf.float32, [None, 7, 9, 4], name='x')
  h = tf.nn.relu(tf.nn.conv2d(x, wa, [1] * 4, 'SAME', name='a'))
  h = tf.nn.depthwise_conv2d_native(h, wd, [1] * 4, 'SAME', name='dw')
  h = tf.nn.bias_add(tf.nn.conv2d(h, wb, [1] * 4, 'SAME', name='b'), [0.1])
  tf.nn.bias_add(tf.matmul(tf.reduce_mean(h, [1, 2]), wy, name='fc'),
                 np.float32([0.0, 0.2]), name='y')
  feed = {'x:0': np.random.RandomState(12).randn(2, 7, 9, 4).astype(
      np.float32)}
  small, report = shrink_same(feed)
  assert [(l.name, l.inputs_after, l.outputs_after) for l in report.layers] \
      == [('a', 4, 2), ('dw', 2, 2), ('b', 2, 1), ('fc', 1, 2)]
  assert stops(report) == [
      ('a', 'dw', 'DepthwiseConv2dNative', 'a conv that reads or writes it '
       'would have one input and one output channel, which TF 2.x\'s oneDNN '
       'kernels compute wrongly or not at all: two are kept', 1)]
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(small, name='')
  for op in graph.get_operations():
    if op.type in ('Conv2D', 'DepthwiseConv2dNative'):
      assert (op.inputs[0].shape[-1], op.outputs[0].shape[-1]) != (1, 1), \
          op.name
