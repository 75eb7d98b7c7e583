"""The gradual sparsity schedule of Zhu & Gupta (2017), as used by model_pruning.

    >>> from tf1prune.schedule import sparsity_at
    >>> sparsity_at(50, initial=0.0, target=0.9, begin=0, end=100, exponent=3.0)
    0.7875

At step t, with p = clip((t - begin) / (end - begin), 0, 1),
`s = target + (initial - target) * (1 - p) ** exponent`: the sparsity rises fast
at first and flattens as it nears the target. `sparsity_at` is the NumPy-free
reference; `sparsity_tensor` builds the same formula into the graph.
"""

import tensorflow.compat.v1 as tf

__all__ = ['sparsity_at', 'sparsity_tensor']


def sparsity_at(step, initial, target, begin, end, exponent):
  """Returns the scheduled sparsity at `step` as a Python float."""
  p = min(max(float(step - begin) / float(end - begin), 0.0), 1.0)
  return target + (initial - target) * (1.0 - p) ** exponent


def sparsity_tensor(step, initial, target, begin, end, exponent, name=None):
  """Returns the scheduled sparsity at the scalar int tensor `step`, float32."""
  with tf.name_scope(name, 'sparsity_schedule', [step]):
    p = tf.clip_by_value(
        tf.cast(step - begin, tf.float32) / float(end - begin), 0.0, 1.0)
    return tf.add(float(target), (float(initial) - float(target)) *
                  tf.pow(1.0 - p, float(exponent)), name='sparsity')
