"""Filter masks for coupled channels: one keep/drop decision per unit.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks import coupled_filter_masks, magnitude_mask
    >>> a = np.array([[1., 5., 2., 9.]])                 # dense [in=1, out=4]
    >>> c = np.array([[3., 1., 0., 1.]])                 # added to a: coupled
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   members = [(tf.constant(w), -1, (0, 1, 2, 3)) for w in (a, c)]
    ...   masks, _ = sess.run(coupled_filter_masks(members, 4, 0.5, magnitude_mask))
    >>> masks[0].tolist(), masks[1].tolist()             # unit sums 4, 6, 2, 10
    ([[0.0, 1.0, 0.0, 1.0]], [[0.0, 1.0, 0.0, 1.0]])

A unit is one coupled channel of a `tf1prune.ChannelGroup`: the filters of all
members that write it. Its score reduces the members' filter norms ('sum',
'mean' or 'max' over members; each filter norm is 'l1', 'l2' or 'max' of
`abs(w)`); the best units are kept, at least `min_channels` and a multiple of
`multiple` (what hardware wants: 8, 16, 32) unless that is all of them.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.masks._select import keep_count

REDUCTIONS = ('sum', 'mean', 'max')
_NORMS = ('l1', 'l2', 'max')


def _check(name, value, allowed):
  if value not in allowed:
    raise ValueError('%s must be one of %s, got %r' %
                     (name, ', '.join(allowed), value))


def _filter_norms(weight, axis, importance):
  """The norm of every slice `weight[..., i, ...]` along `axis`: [n] floats."""
  rank = weight.get_shape().ndims
  axis %= rank
  others = [a for a in range(rank) if a != axis]
  magnitudes = tf.abs(tf.cast(weight, tf.float64 if weight.dtype.base_dtype ==
                              tf.float64 else tf.float32))
  if importance == 'max':
    return tf.reduce_max(magnitudes, axis=others)
  if importance == 'l2':
    return tf.sqrt(tf.reduce_sum(tf.square(magnitudes), axis=others))
  return tf.reduce_sum(magnitudes, axis=others)


def unit_keep_count(num_units, sparsity, min_channels=1, multiple=1):
  """How many units a group keeps at `sparsity` (int32 scalar tensor).

  `keep_count(num_units, sparsity)`, raised to `min(min_channels, num_units)`,
  then rounded up to a multiple of `multiple`, capped at `num_units`.
  """
  keep = keep_count(num_units, sparsity)
  keep = tf.maximum(keep, min(min_channels, num_units))
  keep = (keep + multiple - 1) // multiple * multiple
  return tf.minimum(keep, num_units)


def coupled_filter_masks(members, num_units, sparsity, select,
                         importance='l2', reduction='sum', min_channels=1,
                         multiple=1):
  """Returns ([float32 mask per member], float32 threshold).

  Args:
    members: list of (weight tensor of static shape, axis, units): the weight's
      entries along `axis` belong to units `units[i]` (ints in
      `[0, num_units)`).
    num_units: int, the group's number of coupled channels.
    sparsity: float scalar, the fraction of units to prune.
    select: `(scores, sparsity) -> (mask, threshold)`, exact top-k with ties
      kept in order (`tf1prune.masks.magnitude_mask`).
    importance: filter norm, 'l1', 'l2' or 'max' of `abs(w)`.
    reduction: 'sum', 'mean' or 'max' of the members' norms per unit.
    min_channels: int >= 0, units kept at least (while the group has them).
    multiple: int >= 1, the kept count is rounded up to a multiple of it.

  Raises:
    ValueError: a bad `importance`, `reduction`, `min_channels`, `multiple`,
      or `units` that do not fit a member's axis.
  """
  _check('group_importance', importance, _NORMS)
  _check('channel_group_reduction', reduction, REDUCTIONS)
  if int(min_channels) != min_channels or min_channels < 0:
    raise ValueError('min_channels must be an int >= 0, got %r' % min_channels)
  if int(multiple) != multiple or multiple < 1:
    raise ValueError('channel_multiple must be an int >= 1, got %r' % multiple)
  scores, ids = [], []
  for weight, axis, units in members:
    if weight.get_shape().as_list()[axis] != len(units):
      raise ValueError('%s has %d entries on axis %d but %d units were given' %
                       (weight.name, weight.get_shape().as_list()[axis], axis,
                        len(units)))
    scores.append(tf.cast(_filter_norms(weight, axis, importance), tf.float64))
    ids.append(np.asarray(units, np.int32))
  scores, ids = tf.concat(scores, 0), np.concatenate(ids)
  if reduction == 'max':
    unit_scores = tf.unsorted_segment_max(scores, ids, num_units)
  else:
    unit_scores = tf.unsorted_segment_sum(scores, ids, num_units)
    if reduction == 'mean':
      unit_scores /= np.maximum(np.bincount(ids, minlength=num_units),
                                 1).astype(np.float64)
  keep = unit_keep_count(num_units, sparsity, int(min_channels), int(multiple))
  unit_sparsity = 1.0 - tf.cast(keep, tf.float64) / num_units
  unit_mask, threshold = select(unit_scores, unit_sparsity)
  masks = []
  for weight, axis, units in members:
    shape = weight.get_shape().as_list()
    rank = len(shape)
    line = [1] * rank
    line[axis % rank] = len(units)
    kept = tf.reshape(tf.gather(unit_mask, np.asarray(units, np.int32)), line)
    masks.append(tf.cast(tf.broadcast_to(kept, shape), tf.float32))
  return masks, threshold
