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

`CoupledFilter` is the granularity of the `granularity_map` value
`coupled_filter`; `CoupledFilter.units(axes, units, num_units)` is the
granularity of one whole channel group (its `compute_mask` takes the list of
the members' weights and returns one mask per member), so the group can be
ranked globally like any weight (`tf1prune.masks._global.global_masks`).
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.masks._granularity import Granularity, max_magnitude
from tf1prune.masks._select import keep_count, magnitude_mask

__all__ = ['CoupledFilter', 'CoupledUnits', 'REDUCTIONS',
           'coupled_filter_masks', 'unit_keep_count']

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
    return max_magnitude(magnitudes, others)
  if importance == 'l2':
    return tf.sqrt(tf.reduce_sum(tf.square(magnitudes), axis=others))
  return tf.reduce_sum(magnitudes, axis=others)


def _round_up(keep, num_units, min_channels, multiple):
  keep = tf.maximum(keep, min(min_channels, num_units))
  keep = (keep + multiple - 1) // multiple * multiple
  return tf.minimum(keep, num_units)


def unit_keep_count(num_units, sparsity, min_channels=1, multiple=1):
  """How many units a group keeps at `sparsity` (int32 scalar tensor).

  `keep_count(num_units, sparsity)`, raised to `min(min_channels, num_units)`,
  then rounded up to a multiple of `multiple`, capped at `num_units`.
  """
  return _round_up(keep_count(num_units, sparsity), num_units, min_channels,
                   multiple)


class CoupledFilter(Granularity):
  """Filters pruned by coupled channel: the `coupled_filter` granularity.

  Alone (`compute_mask` on one weight) it is filter pruning of the last axis
  with `min_channels` and `multiple`; `Pruning` uses `units` to prune all the
  members of a `tf1prune.ChannelGroup` at once.

  Args:
    importance: filter norm, 'l1', 'l2' or 'max' of `abs(w)`.
    reduction: 'sum', 'mean' or 'max' of the members' norms per unit.
    min_channels: int >= 0, units kept at least (while the group has them).
    multiple: int >= 1, the kept count is rounded up to a multiple of it.

  Raises:
    ValueError: an argument is not one of those.
  """

  name = 'coupled_filter'

  def __init__(self, importance='l1', reduction='sum', min_channels=1,
               multiple=1):
    _check('group_importance', importance, _NORMS)
    _check('channel_group_reduction', reduction, REDUCTIONS)
    if (isinstance(min_channels, bool) or int(min_channels) != min_channels or
        min_channels < 0):
      raise ValueError('min_channels must be an int >= 0, got %r' %
                       (min_channels,))
    if isinstance(multiple, bool) or int(multiple) != multiple or multiple < 1:
      raise ValueError('channel_multiple must be an int >= 1, got %r' %
                       (multiple,))
    self.importance, self.reduction = importance, reduction
    self.min_channels, self.multiple = int(min_channels), int(multiple)

  def units(self, axes, units, num_units, keep_units=None):
    """Returns the `CoupledUnits` granularity of one channel group.

    Args:
      axes: per member, the axis of its channels (-1, or 2 for depthwise).
      units: per member, a tuple of ints: the unit of each entry on its axis.
      num_units: int, the group's number of units.
      keep_units: optional bool tensor [num_units]: units always kept (locked
        channels); they rank above every other unit.
    """
    return CoupledUnits(self, axes, units, num_units, keep_units)

  def removes_outputs(self, shape):
    """True: a unit is a filter (output channel) of every member."""
    return True

  def compute_mask(self, weight, sparsity, select):
    """Returns (float32 mask shaped like `weight`, threshold): its filters."""
    n = weight.get_shape().as_list()[-1]
    masks, threshold = self.units([-1], [tuple(range(n))], n).compute_mask(
        [weight], sparsity, select)
    return masks[0], threshold

  def __eq__(self, other):
    return type(other) is type(self) and vars(other) == vars(self)

  def __ne__(self, other):
    return not self == other

  def __hash__(self):
    return hash(tuple(sorted(vars(self).items())))

  def __repr__(self):
    return 'CoupledFilter(%r, %r, min_channels=%d, multiple=%d)' % (
        self.importance, self.reduction, self.min_channels, self.multiple)


class CoupledUnits(Granularity):
  """The units of one channel group; `compute_mask` takes all its weights.

  Built by `CoupledFilter.units`. `scores(weights)` are the unit scores
  (float64 [num_units]); `compute_mask(weights, sparsity, select)` keeps
  `unit_keep_count(num_units, sparsity, min_channels, multiple)` units and
  returns ([float32 mask per weight], threshold). When `select` returns a
  unit mask of its own (global ranking) the kept count is rounded up after
  it: the best further units are added until it is at least `min_channels`
  and a multiple of `multiple`.
  """

  def __init__(self, coupled, axes, units, num_units, keep_units=None):
    self.coupled = coupled
    self.axes = list(axes)
    self.units = [np.asarray(u, np.int32) for u in units]
    self.num_units = int(num_units)
    self.keep_units = keep_units

  def scores(self, weights):
    """Returns the float64 [num_units] unit scores (locked units: +inf)."""
    norms = []
    for weight, axis, ids in zip(weights, self.axes, self.units):
      if weight.get_shape().as_list()[axis] != len(ids):
        raise ValueError('%s has %d entries on axis %d but %d units were given'
                         % (weight.name, weight.get_shape().as_list()[axis],
                            axis, len(ids)))
      norms.append(tf.cast(_filter_norms(weight, axis, self.coupled.importance),
                           tf.float64))
    norms, ids = tf.concat(norms, 0), np.concatenate(self.units)
    if self.coupled.reduction == 'max':
      # Over the bit patterns, as `max_magnitude`: NaN above +inf.
      scores = tf.bitcast(tf.unsorted_segment_max(
          tf.bitcast(norms, tf.int64), ids, self.num_units), tf.float64)
    else:
      scores = tf.unsorted_segment_sum(norms, ids, self.num_units)
      if self.coupled.reduction == 'mean':
        scores /= np.maximum(np.bincount(ids, minlength=self.num_units),
                             1).astype(np.float64)
    if self.keep_units is not None:
      scores = tf.where_v2(self.keep_units,
                           tf.fill([self.num_units], np.float64(np.inf)), scores)
    return scores

  def _sparsity_of(self, keep):
    return 1.0 - tf.cast(keep, tf.float64) / self.num_units

  def compute_mask(self, weights, sparsity, select):
    """Returns ([float32 mask shaped like each weight], float32 threshold)."""
    scores = self.scores(weights)
    coupled = self.coupled
    keep = unit_keep_count(self.num_units, sparsity, coupled.min_channels,
                           coupled.multiple)
    unit_mask, threshold = select(scores, self._sparsity_of(keep))
    unit_mask = tf.cast(unit_mask, tf.float32)
    kept = tf.cast(tf.reduce_sum(unit_mask), tf.int32)
    wanted = _round_up(kept, self.num_units, coupled.min_channels,
                       coupled.multiple)
    # Only when select kept fewer (global ranking, threshold decay).
    unit_mask = tf.cond(
        kept < wanted, lambda: tf.maximum(unit_mask, magnitude_mask(
            scores, self._sparsity_of(wanted))[0]), lambda: unit_mask)
    if self.keep_units is not None:
      unit_mask = tf.maximum(unit_mask, tf.cast(self.keep_units, tf.float32))
    return self.spread(weights, unit_mask), threshold

  def spread(self, weights, unit_mask):
    """Returns the float32 mask of each weight from the [num_units] mask."""
    masks = []
    for weight, axis, ids in zip(weights, self.axes, self.units):
      shape = weight.get_shape().as_list()
      line = [1] * len(shape)
      line[axis % len(shape)] = len(ids)
      kept = tf.reshape(tf.gather(unit_mask, ids), line)
      masks.append(tf.cast(tf.broadcast_to(kept, shape), tf.float32))
    return masks


def coupled_filter_masks(members, num_units, sparsity, select,
                         importance='l2', reduction='sum', min_channels=1,
                         multiple=1, keep_units=None):
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
    keep_units: optional bool tensor [num_units], units always kept.

  Raises:
    ValueError: a bad `importance`, `reduction`, `min_channels`, `multiple`,
      or `units` that do not fit a member's axis.
  """
  coupled = CoupledFilter(importance, reduction, min_channels, multiple)
  group = coupled.units([m[1] for m in members], [m[2] for m in members],
                        num_units, keep_units)
  return group.compute_mask([m[0] for m in members], sparsity, select)
