"""How important a channel is, over every layer it touches.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.channels.importance import Touch, magnitude
    >>> producer = Touch('a', tf.constant([[1., 2.], [1., 2.]]), 1, (0, 1))
    >>> consumer = Touch('b', tf.constant([[3., 3.], [1., 1.]]), 0, (0, 1))
    >>> with tf.Session() as sess:
    ...   sess.run(magnitude([producer, consumer], 'l1', 2)).tolist()
    [2.1666666666666665, 1.8333333333333333]

Pure functions of tensors, for both backends (the graph `Pruning`'s
budget, `tf1prune.training.budget`, and the Keras `Pruner`'s).
A channel of a budget's unit is written by the filters of its group's
members and read by the input slices of the layers after them (the next
convs' kernels at that input channel; a dense layer's rows at a flatten).
A `Touch` is one such weight: its entries along `axis` belong to the units
`units` (-1: to none). Removing the unit removes all of them, so its
importance sums over them all, as the group norms of Torch-Pruning do:

- `magnitude` (`l1`, `l2`): each weight's per-channel norms, divided by that
  weight's mean norm (layers of different sizes and scales compare), summed
  per unit: a channel read by four layers weighs more than one read by one;
- Taylor (the graph `Pruning`'s `tf1prune.training.budget.Taylor`):
  `|sum(w * dL/dw)|` over each weight's channel, averaged over the steps
  and summed per unit (`summed`), in the loss's own units (no
  normalization);
- `bn_scale`: `|gamma|` of the batch norms after the members, each divided
  by its mean, summed per unit.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

__all__ = ['Touch', 'bn_scales', 'covered', 'magnitude', 'per_channel',
           'scales_or', 'summed']


class Touch(collections.namedtuple('Touch', ['name', 'weight', 'axis',
                                             'units', 'variable'])):
  """A weight whose entries along `axis` belong to budget units (see the
  module docstring): `units[i]`, the global unit of channel i, or -1.
  `variable`: the raw weight the optimizer updates (None: `weight`)."""

  def __new__(cls, name, weight, axis, units, variable=None):
    return super(Touch, cls).__new__(cls, name, weight, axis, units,
                                     variable)


def per_channel(tensor, axis, reduce_fn):
  """`reduce_fn` over every axis of `tensor` but `axis`: float64 [C]."""
  rank = tensor.get_shape().ndims
  axis %= rank
  return tf.cast(reduce_fn(tensor, [a for a in range(rank) if a != axis]),
                 tf.float64)


def _normalized(values):
  """`values` over their mean (as they are where the mean is 0)."""
  mean = tf.reduce_mean(values)
  return tf.where_v2(mean > 0, values / tf.where_v2(mean > 0, mean, 1.0),
                     values)


def _sum_units(pieces, num_units):
  """Float64 [num_units]: each piece's values added to their units."""
  total = tf.zeros([num_units], tf.float64)
  for values, units in pieces:
    units = np.asarray(units, np.int32)
    keep = np.flatnonzero(units >= 0)
    total += tf.unsorted_segment_sum(tf.gather(values, keep), units[keep],
                                     num_units)
  return total


def magnitude(touches, criterion, num_units):
  """Float64 [num_units]: the `l1` or `l2` norms of every touching weight,
  each over its mean, summed per unit."""
  pieces = []
  for touch in touches:
    weight = tf.abs(tf.cast(touch.weight, tf.float64))
    if criterion == 'l1':
      norms = per_channel(weight, touch.axis, tf.reduce_sum)
    else:
      norms = tf.sqrt(per_channel(tf.square(weight), touch.axis,
                                  tf.reduce_sum))
    pieces.append((_normalized(norms), touch.units))
  return _sum_units(pieces, num_units)


def summed(values, num_units):
  """Float64 [num_units] of [(float [C] values, units)], as they are."""
  return _sum_units([(tf.cast(v, tf.float64), u) for v, u in values],
                    num_units)


def _read(value):
  """The value of a variable (a TF variable's `read_value`) or tensor."""
  read = getattr(value, 'read_value', None)
  return read() if read is not None else tf.convert_to_tensor(value)


def bn_scales(scales, num_units):
  """Float64 [num_units] of [(gamma variable or tensor, units)]: each
  |gamma| over its mean, summed per unit."""
  return _sum_units([(_normalized(tf.abs(tf.cast(_read(v), tf.float64))), u)
                     for v, u in scales], num_units)


def covered(scales, num_units):
  """bool [num_units]: the units some gamma of `scales` (as `bn_scales`
  takes them) covers."""
  found = np.zeros(num_units, bool)
  for _, units in scales:
    found[units] = True
  return found


def scales_or(values, scales, num_units):
  """Float64 [num_units]: `bn_scales` of `scales` for the units they cover
  (`covered`), `values` (another criterion's) for the others."""
  if not scales:
    return values
  return tf.where_v2(covered(scales, num_units),
                     bn_scales(scales, num_units), values)
