"""The CIFAR-10 CNN of contrib's pruning example, every weight layer masked.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> from cifar10_example import model
    >>> with tf.Graph().as_default():
    ...   logits = model.inference(tf.zeros([2, 24, 24, 3]))
    ...   logits.shape.as_list(), [m.op.name for m in tf1prune.get_masks()]
    ([2, 10], ['conv1/mask', 'conv2/mask', 'local3/mask', 'local4/mask', 'softmax_linear/mask'])

conv1 (5x5, 64) -> max pool 3x3/2 -> LRN -> conv2 (5x5, 64) -> LRN -> max pool
3x3/2 -> local3 (384) -> local4 (192) -> softmax_linear (num_classes), the
layout, initialisers and weight decay of the TensorFlow CIFAR-10 tutorial model.
Only the input of local3 depends on the image size: `ceil(h/4) * ceil(w/4) * 64`
(2304 for 24x24 CIFAR crops, 256 for 8x8 digits), so one function serves both.
Every kernel goes through `tf1prune.masked_conv2d` / `masked_fully_connected`
(the benchmarks pass plain layers instead to build a never-masked twin).
"""

import tensorflow.compat.v1 as tf

import tf1prune

__all__ = ['LAYERS', 'LOGITS_NAME', 'inference', 'loss']

# The masked layers, in creation order; each has <name>/weights and <name>/mask.
LAYERS = ('conv1', 'conv2', 'local3', 'local4', 'softmax_linear')
# The op name of the logits when `inference` is called outside any name scope.
LOGITS_NAME = 'logits'


def _weight_decay(scale):
  """Returns a regularizer `scale * sum(w**2) / 2`, or None for scale 0."""
  if not scale:
    return None

  def regularizer(weights):
    return tf.multiply(tf.nn.l2_loss(weights), scale, name='weight_loss')

  return regularizer


def _pool(net, name):
  return tf.nn.max_pool(net, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                        padding='SAME', name=name)


def _norm(net, name):
  return tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def inference(images, num_classes=10, weight_decay=0.004,
              conv2d=tf1prune.masked_conv2d,
              fully_connected=tf1prune.masked_fully_connected):
  """Builds the masked CIFAR-10 CNN.

  Args:
    images: float32 tensor `[batch, height, width, channels]` with known
      height, width and channels (any batch size).
    num_classes: number of output classes, >= 2.
    weight_decay: L2 factor on local3 and local4 weights (as in the tutorial);
      0 adds none. The terms go to `tf.GraphKeys.REGULARIZATION_LOSSES`.
    conv2d, fully_connected: the layer functions, called as
      `tf1prune.masked_conv2d(inputs, num_outputs, kernel_size, **kwargs)` and
      `tf1prune.masked_fully_connected(inputs, num_outputs, **kwargs)` with
      the keyword arguments `weights_initializer`, `biases_initializer`,
      `scope`, and `weights_regularizer` / `activation_fn` for the dense
      layers. The defaults are tf1prune's masked layers.

  Returns:
    float32 logits `[batch, num_classes]`, an op named `LOGITS_NAME` (prefixed
    by the current name scope).

  Raises:
    ValueError: `images` is not rank 4 with known height, width and channels,
      or `num_classes` < 2.
  """
  images = tf.convert_to_tensor(images)
  shape = images.get_shape()
  if shape.ndims != 4 or not shape[1:].is_fully_defined():
    raise ValueError('inference needs images of shape [batch, height, width, '
                     'channels] with known height, width and channels, got '
                     '%s' % shape)
  if not isinstance(num_classes, int) or num_classes < 2:
    raise ValueError('num_classes must be an int >= 2, got %r' % (num_classes,))
  normal = tf.truncated_normal_initializer
  decay = _weight_decay(weight_decay)
  net = conv2d(
      images, 64, 5, weights_initializer=normal(stddev=5e-2),
      biases_initializer=tf.zeros_initializer(), scope='conv1')
  net = _norm(_pool(net, 'pool1'), 'norm1')
  net = conv2d(
      net, 64, 5, weights_initializer=normal(stddev=5e-2),
      biases_initializer=tf.constant_initializer(0.1), scope='conv2')
  net = _pool(_norm(net, 'norm2'), 'pool2')
  flat_size = net.get_shape()[1:].num_elements()
  net = tf.reshape(net, [-1, flat_size], name='flatten')
  net = fully_connected(
      net, 384, weights_initializer=normal(stddev=0.04),
      weights_regularizer=decay,
      biases_initializer=tf.constant_initializer(0.1), scope='local3')
  net = fully_connected(
      net, 192, weights_initializer=normal(stddev=0.04),
      weights_regularizer=decay,
      biases_initializer=tf.constant_initializer(0.1), scope='local4')
  net = fully_connected(
      net, num_classes, activation_fn=None,
      weights_initializer=normal(stddev=1 / 192.0),
      biases_initializer=tf.zeros_initializer(), scope='softmax_linear')
  return tf.identity(net, name=LOGITS_NAME)


def loss(logits, labels):
  """Mean cross entropy plus every regularization loss of the graph.

  Args:
    logits: float32 `[batch, num_classes]`.
    labels: int `[batch]`, class indices in `[0, num_classes)`.

  Returns:
    float32 scalar, named `total_loss`.
  """
  cross_entropy = tf.reduce_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=tf.cast(labels, tf.int64), logits=logits),
      name='cross_entropy')
  regularization = tf.losses.get_regularization_losses()
  return tf.add_n([cross_entropy] + regularization, name='total_loss')
