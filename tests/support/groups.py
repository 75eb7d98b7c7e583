"""What the channel group tests share: a masked conv and a summary of the
groups.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> from tests.support.groups import masked_conv, summary
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [1, 4, 4, 3])
    ...   y = masked_conv(masked_conv(x, 4, 'a'), 2, 'b')
    ...   summary(tf1prune.find_channel_groups())
    [(['a/weights'], 4, False), (['b/weights'], 2, False)]
"""

import tf1prune


def masked_conv(x, n, scope, k=1, **kwargs):
  """A `k` x `k` masked conv of `n` outputs, no activation."""
  return tf1prune.masked_conv2d(x, n, k, activation_fn=None, scope=scope,
                                **kwargs)


def summary(groups):
  """[(member names, units, blocked)] of the `ChannelGroup`s."""
  return [([m.name for m in g.members], g.num_units, g.blocked is not None)
          for g in groups]
