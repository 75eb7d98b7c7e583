"""Small nets and checkpoints that tests in several folders build.

    >>> import numpy as np
    >>> import tensorflow.compat.v1 as tf
    >>> from tests.support.nets import depthwise_block
    >>> with tf.Graph().as_default():
    ...   feed, h, w2 = depthwise_block(np.random.RandomState(0))
    ...   feed.shape, h.shape.as_list(), w2.shape
    ((2, 5, 5, 2), [None, 5, 5, 16], (1, 1, 16, 4))

`depthwise_block` is a MobileNet block of constants whose first conv has
empty filters (the shrink's padding tests), `small_resnet_v1` a tf_slim
ResNet of two small blocks under `tf1prune.pruning_scope()`, and
`save_conv_net` checkpoints a conv, conv, fc net whose first conv lost
filters (the export tests).
"""

import contextlib
import os

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support.graphs import const

_TF1 = tf.__version__.startswith('1.')


def depthwise_block(rs, removed=10, channels=16, outputs=4, size=5,
                    batch=None, kernel=1, padding='VALID', act=tf.nn.relu6):
  """A MobileNet block of constants in the default graph, `x` to `y`.

  conv1 1x1 (`removed` of `channels` filters empty, biases in [0.5, 1)) ->
  relu -> `depthwise` 3x3 SAME -> bias -> `act` -> conv2 (`kernel` square,
  `padding`, `outputs` filters) = y, on x [batch, size, size, 2]. A removed
  channel is a constant before the depthwise conv and a map after it (its
  zero padding): 9 kinds of position (corners, edges, interior). The
  constants are drawn from `rs` (a NumPy RandomState).

  Returns:
    (feed [2, size, size, 2], the tensor conv2 reads, conv2's weight).
  """
  x = tf.placeholder(tf.float32, [batch, size, size, 2], name='x')
  w1 = rs.randn(1, 1, 2, channels).astype(np.float32)
  w1[..., :removed] = 0.0
  h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, const(w1), [1] * 4, 'SAME'),
                                const(rs.uniform(0.5, 1.0, channels))))
  h = tf.nn.depthwise_conv2d(h, const(rs.randn(3, 3, channels, 1)), [1] * 4,
                             'SAME', name='depthwise')
  h = act(tf.nn.bias_add(h, const(rs.uniform(0.5, 1.0, channels))))
  w2 = rs.randn(kernel, kernel, channels, outputs).astype(np.float32)
  tf.nn.conv2d(h, const(w2), [1] * 4, padding, name='y')
  return rs.randn(2, size, size, 2).astype(np.float32), h, w2


def small_resnet_v1(images, num_classes, normalized=True):
  """The logits of a small tf_slim resnet_v1 under `tf1prune.pruning_scope()`.

  Two blocks of two bottleneck units (base depth 4 with stride 2, then 8),
  scope `resnet`, in inference mode.

  Args:
    images: [batch, height, width, 3] float32.
    num_classes: the logits' width.
    normalized: in resnet_v1's arg scope (batch norm; on TF 2.x, where
      `tf_slim.batch_norm` cannot be built, `tf1prune.batch_norm` through
      `slim_compat.use_tf1prune_batch_norm()`); else convs with biases.
  """
  import tf_slim as slim  # pylint: disable=g-import-not-at-top
  from tf_slim.nets import resnet_v1  # pylint: disable=g-import-not-at-top
  blocks = [resnet_v1.resnet_v1_block('block1', base_depth=4, num_units=2,
                                      stride=2),
            resnet_v1.resnet_v1_block('block2', base_depth=8, num_units=2,
                                      stride=1)]
  compat = contextlib.ExitStack()
  if normalized:   # resnet_arg_scope() reads slim.batch_norm: after the patch
    if not _TF1:
      compat.enter_context(
          tf1prune.graph.slim_compat.use_tf1prune_batch_norm())
    compat.enter_context(slim.arg_scope(resnet_v1.resnet_arg_scope()))
  with compat, tf1prune.pruning_scope():
    logits, _ = resnet_v1.resnet_v1(images, blocks, num_classes,
                                    is_training=False, scope='resnet')
  return logits


def save_conv_net(directory, size, filters, outputs, emptied):
  """Saves conv1 (`filters[0]`), conv2 (`filters[1]`), fc (`outputs`).

  The input `x` is `[None, size, size, 3]`, the output `fc/BiasAdd`; conv1's
  first `emptied` filters are masked to zero. Returns the number of
  trainable variables (weights and biases).
  """
  with tf.Graph().as_default():
    tf.set_random_seed(5)
    x = tf.placeholder(tf.float32, [None, size, size, 3], name='x')
    net = tf1prune.masked_conv2d(x, filters[0], 3, scope='conv1')
    net = tf1prune.masked_conv2d(net, filters[1], 3, scope='conv2')
    net = tf.reshape(net, [-1, size * size * filters[1]])
    tf1prune.masked_fully_connected(net, outputs, activation_fn=None,
                                    scope='fc')
    mask = tf1prune.get_masks()[0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.assign(mask[..., :emptied],
                         tf.zeros([3, 3, 3, emptied])))
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'))
    return len(tf.trainable_variables())
