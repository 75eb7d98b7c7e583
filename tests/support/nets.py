"""A checkpoint the export tests share: conv, conv, fc, the first conv's
first filters emptied (so the shrink has channels to remove)."""

import os

import tensorflow.compat.v1 as tf

import tf1prune


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
