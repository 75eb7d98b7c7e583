"""The CIFAR-10 example network for the benchmarks, masked or never masked.

    >>> import tensorflow.compat.v1 as tf
    >>> from bench._cifar_net import inference
    >>> with tf.Graph().as_default():
    ...   logits = inference(tf.zeros([2, 24, 24, 3]), masked=False)
    ...   logits.shape.as_list(), len(tf.global_variables())
    ([2, 10], 10)

The network is `cifar10_example.model.inference` (the benchmarks run from the
checkout), without weight decay. With `masked=True` its layers are tf1prune's
`masked_conv2d` / `masked_fully_connected`; with `masked=False` they are the
plain layers below, built from `tf.get_variable` and `tf.nn` with the same
variable names, shapes and initialisers, so the two graphs differ only by the
masks (and the twin can load the masked graph's `weights`/`biases`).
"""

import tensorflow.compat.v1 as tf

from cifar10_example import model

LAYERS = model.LAYERS
LOGITS_NAME = model.LOGITS_NAME


def plain_conv2d(inputs, num_outputs, kernel_size, weights_initializer,
                 biases_initializer, scope):
  """`masked_conv2d` without the mask: SAME convolution, bias, ReLU."""
  with tf.variable_scope(scope):
    in_ch = inputs.get_shape().as_list()[-1]
    weights = tf.get_variable(
        'weights', [kernel_size, kernel_size, in_ch, num_outputs],
        initializer=weights_initializer)
    biases = tf.get_variable('biases', [num_outputs],
                             initializer=biases_initializer)
    net = tf.nn.convolution(inputs, weights, padding='SAME')
    return tf.nn.relu(tf.nn.bias_add(net, biases))


def plain_fully_connected(inputs, num_outputs, weights_initializer,
                          biases_initializer, scope, weights_regularizer=None,
                          activation_fn=tf.nn.relu):
  """`masked_fully_connected` without the mask (and without a regularizer)."""
  if weights_regularizer is not None:
    raise ValueError('plain_fully_connected takes no weights_regularizer, got '
                     '%r; build the model with weight_decay=0' %
                     (weights_regularizer,))
  with tf.variable_scope(scope):
    in_size = inputs.get_shape().as_list()[-1]
    weights = tf.get_variable('weights', [in_size, num_outputs],
                              initializer=weights_initializer)
    biases = tf.get_variable('biases', [num_outputs],
                             initializer=biases_initializer)
    net = tf.nn.bias_add(tf.matmul(inputs, weights), biases)
    return activation_fn(net) if activation_fn else net


def inference(images, masked, num_classes=10):
  """Builds the example network on `images` (`[batch, h, w, c]`, known h, w, c).

  Args:
    images: float32 4-D tensor.
    masked: True for tf1prune's masked layers, False for plain `tf.nn` ones.
    num_classes: size of the logits.

  Returns:
    float32 logits `[batch, num_classes]`, an op named `logits`.
  """
  if masked:
    return model.inference(images, num_classes, weight_decay=0.0)
  return model.inference(images, num_classes, weight_decay=0.0,
                         conv2d=plain_conv2d,
                         fully_connected=plain_fully_connected)
