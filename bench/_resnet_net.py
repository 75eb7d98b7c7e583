"""A small resnet_v1-style network with batch norm, masked or never masked.

    >>> import tensorflow.compat.v1 as tf
    >>> from bench._resnet_net import inference, available
    >>> with tf.Graph().as_default():
    ...   ok = available()
    ...   shape = inference(tf.zeros([2, 24, 24, 3]), masked=True).shape.as_list() if ok else [2, 10]
    >>> shape
    [2, 10]

conv 3x3x16 + BN + relu, then three stages of two basic blocks (16, 32, 64
filters, stride 2 at the start of the second and third stages; a basic block
is conv-BN-relu-conv-BN plus the shortcut, a 1x1 conv + BN where the shape
changes, then relu), global average pooling and a 10-way fully connected
layer: the resnet_v1 layout of He et al. for CIFAR, 14 layers. Every conv has
`normalizer_fn=batch_norm` (training mode, moving averages in UPDATE_OPS).
Masked: `tf1prune.masked_conv2d` / `masked_fully_connected`; never masked:
`tf_slim.conv2d` / `fully_connected` with the same arguments and names.

The batch norm is tf1prune's own `batch_norm` where it exists, else
tf_slim's; tf_slim's layers cannot be built under Keras 3 (TF 2.x), so there
`available()` is False unless tf1prune provides one.
"""

import tensorflow.compat.v1 as tf

import tf1prune


def _slim():
  import tf_slim  # pylint: disable=g-import-not-at-top
  return tf_slim


def _batch_norm():
  """The batch_norm layer function to use, or None."""
  if hasattr(tf1prune, 'batch_norm'):
    return tf1prune.batch_norm
  if tf.__version__.startswith('1.'):
    return _slim().batch_norm
  return None


def available():
  """True when the masked and the never-masked nets can both be built here."""
  return _batch_norm() is not None and tf.__version__.startswith('1.')


def inference(images, masked, num_classes=10):
  """Builds the network on `images` (`[batch, h, w, 3]`); returns logits."""
  norm = _batch_norm()
  if norm is None:
    raise RuntimeError('no batch_norm for this TensorFlow (tf_slim needs '
                       'Keras 2; tf1prune.batch_norm is not there)')
  if masked:
    conv, fc = tf1prune.masked_conv2d, tf1prune.masked_fully_connected
  else:
    conv, fc = _slim().conv2d, _slim().fully_connected
  params = {'is_training': True, 'decay': 0.997, 'epsilon': 1e-5,
            'scale': True}
  init = tf.variance_scaling_initializer()

  def conv_bn(net, depth, kernel, stride, scope, relu=True):
    return conv(net, depth, kernel, stride=stride, normalizer_fn=norm,
                normalizer_params=params, weights_initializer=init,
                activation_fn=tf.nn.relu if relu else None, scope=scope)

  net = conv_bn(images, 16, 3, 1, 'conv1')
  for stage, depth in enumerate((16, 32, 64)):
    for block in range(2):
      stride = 2 if stage > 0 and block == 0 else 1
      scope = 'block%d_%d' % (stage + 1, block + 1)
      shortcut = net
      if stride != 1 or net.get_shape().as_list()[-1] != depth:
        shortcut = conv_bn(net, depth, 1, stride, scope + '/shortcut',
                           relu=False)
      residual = conv_bn(net, depth, 3, stride, scope + '/conv1')
      residual = conv_bn(residual, depth, 3, 1, scope + '/conv2', relu=False)
      net = tf.nn.relu(shortcut + residual)
  net = tf.reduce_mean(net, [1, 2])
  logits = fc(net, num_classes, activation_fn=None, scope='logits')
  return tf.identity(logits, name='logits')
