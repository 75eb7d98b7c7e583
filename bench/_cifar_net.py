"""The CIFAR-10 example network for the benchmarks, masked or never masked.

    >>> import tensorflow.compat.v1 as tf
    >>> from bench._cifar_net import inference
    >>> with tf.Graph().as_default():
    ...   logits = inference(tf.zeros([2, 24, 24, 3]), masked=False)
    ...   logits.shape.as_list()
    [2, 10]

conv1 5x5x64 -> max pool 3x3/2 -> LRN -> conv2 5x5x64 -> LRN -> max pool 3x3/2
-> local3 384 -> local4 192 -> softmax_linear 10, as in the old contrib
example. With `masked=True` every kernel goes through `tf1prune.masked_conv2d`
/ `masked_fully_connected`; with `masked=False` the same layers are built from
`tf.get_variable` and `tf.nn` with the same variable names, shapes and
initialisers, so the two graphs differ only by the masks (and the twin can
load the masked graph's `weights`/`biases`).
"""

import tensorflow.compat.v1 as tf

import tf1prune

LAYERS = ('conv1', 'conv2', 'local3', 'local4', 'softmax_linear')
LOGITS_NAME = 'logits'


def _plain_conv(net, num_outputs, init, bias, scope):
  with tf.variable_scope(scope):
    in_ch = net.get_shape().as_list()[-1]
    weights = tf.get_variable('weights', [5, 5, in_ch, num_outputs],
                              initializer=init)
    biases = tf.get_variable('biases', [num_outputs],
                             initializer=tf.constant_initializer(bias))
    net = tf.nn.convolution(net, weights, padding='SAME')
    return tf.nn.relu(tf.nn.bias_add(net, biases))


def _plain_fc(net, num_outputs, init, bias, scope, relu=True):
  with tf.variable_scope(scope):
    in_size = net.get_shape().as_list()[-1]
    weights = tf.get_variable('weights', [in_size, num_outputs],
                              initializer=init)
    biases = tf.get_variable('biases', [num_outputs],
                             initializer=tf.constant_initializer(bias))
    net = tf.nn.bias_add(tf.matmul(net, weights), biases)
    return tf.nn.relu(net) if relu else net


def _masked_conv(net, num_outputs, init, bias, scope):
  return tf1prune.masked_conv2d(
      net, num_outputs, 5, weights_initializer=init,
      biases_initializer=tf.constant_initializer(bias), scope=scope)


def _masked_fc(net, num_outputs, init, bias, scope, relu=True):
  return tf1prune.masked_fully_connected(
      net, num_outputs, activation_fn=tf.nn.relu if relu else None,
      weights_initializer=init,
      biases_initializer=tf.constant_initializer(bias), scope=scope)


def inference(images, masked, num_classes=10):
  """Builds the network on `images` (`[batch, h, w, c]`, known h, w, c).

  Args:
    images: float32 4-D tensor.
    masked: True for tf1prune's masked layers, False for plain `tf.nn` ones.
    num_classes: size of the logits.

  Returns:
    float32 logits `[batch, num_classes]`, an op named `logits`.
  """
  conv, fc = (_masked_conv, _masked_fc) if masked else (_plain_conv, _plain_fc)
  normal = tf.truncated_normal_initializer
  net = conv(images, 64, normal(stddev=5e-2), 0.0, 'conv1')
  net = tf.nn.max_pool(net, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME', name='pool1')
  net = tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name='norm1')
  net = conv(net, 64, normal(stddev=5e-2), 0.1, 'conv2')
  net = tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name='norm2')
  net = tf.nn.max_pool(net, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME', name='pool2')
  net = tf.reshape(net, [-1, net.get_shape()[1:].num_elements()])
  net = fc(net, 384, normal(stddev=0.04), 0.1, 'local3')
  net = fc(net, 192, normal(stddev=0.04), 0.1, 'local4')
  net = fc(net, num_classes, normal(stddev=1 / 192.0), 0.0, 'softmax_linear',
           relu=False)
  return tf.identity(net, name=LOGITS_NAME)
