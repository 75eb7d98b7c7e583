"""Global pruning to a cost: which channel units stay so that the model fits.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.channels.cost import CostModel, Layer, Width
    >>> from tf1prune.masks import budget_masks
    >>> a = Width(0, tuple((u, 1) for u in range(4)))        # units 0-3
    >>> b = Width(0, tuple((u, 1) for u in range(4, 6)))     # units 4-5
    >>> model = CostModel(6, [Layer('a', 'dense', Width(10, ()), a, 1, 1, 1, 0),
    ...                       Layer('b', 'dense', a, b, 1, 1, 1, 0),
    ...                       Layer('c', 'dense', b, Width(1, ()), 1, 1, 1, 0)])
    >>> model.cost(None, 'params')
    50.0
    >>> importance = tf.constant([4., 3., 2., 1., 5., 5.], tf.float64)
    >>> keep, cost = budget_masks(importance, [0, 0, 0, 0, 1, 1],
    ...                           model.arrays('params'), 30.0)
    >>> with tf.Session() as sess:
    ...   sess.run(keep).tolist(), float(sess.run(cost))
    ([1.0, 1.0, 0.0, 0.0, 1.0, 1.0], 26.0)

Every unit (a channel of a `tf1prune.ChannelGroup`, or a filter of a weight
pruned alone) gets one score: its importance, divided by its group's mean
importance (`normalization='mean'`, so that layers of different sizes
compare; 'max', or 'none' to keep the importance as it is), divided by what
removing one of its group's units saves at the current widths (the
derivative of the cost model's sum, averaged over the group's units) to the
power `cost_exponent` (0 by default: the importance alone ranks, and units
that save nothing never leave; 1: importance per unit of cost saved). Units
leave in the order of that score, lowest first, until the cost of what is
left is within the budget; each group then keeps its best units by its own
importance, as many as the order left it, raised to `min_channels` and to
a multiple of `multiple` (so the cost can end up below the budget by up to
one such step). The search is a bisection over how many units leave: the
cost never grows as more leave, so it is exact.

Scores are float64; a NaN importance ranks as +inf (kept), and so do
`locked` units. When even the smallest model the rules allow costs more than
the budget, that model is the result (`cost` then exceeds the budget).
"""

import numpy as np
import tensorflow.compat.v1 as tf

__all__ = ['BilinearCost', 'NORMALIZATIONS', 'budget_masks', 'group_floors',
           'marginal_costs', 'minimum_keep']

NORMALIZATIONS = ('mean', 'max', 'none')


def group_floors(sizes, min_channels):
  """int64 [G]: the units each group of `sizes` units keeps at least under a
  budget: `min_channels` (`channel_group_min_channels`), raised to 2, at
  most the group's size.

  Two, not one: the shrink never narrows a conv to one input and one output
  channel, which TF 2.x's oneDNN kernels compute wrongly (it would keep a
  second one), so a budget that counted one would not be met.
  """
  least = max(int(min_channels), 2)
  return np.array([min(least, int(size)) for size in sizes], np.int64)


def minimum_keep(unit_group, floors, multiple=1):
  """float64 [U]: the smallest keep mask the rules allow: in each group the
  first `floors[g]` units, rounded up to a multiple of `multiple` (at most
  the group's size). Its cost is the least a budget can reach."""
  unit_group = np.asarray(unit_group, np.int64)
  keep = np.zeros(len(unit_group))
  for group, least in enumerate(floors):
    units = np.flatnonzero(unit_group == group)
    least = min(-(-int(least) // multiple) * multiple, len(units))
    keep[units[:least]] = 1.0
  return keep


def _widths(arrays, keep):
  """The widths [T] (float64) with `keep` (float64 [U])."""
  per_entry = tf.gather(keep, arrays['entry_unit']) * arrays['entry_count']
  return arrays['fixed'] + tf.unsorted_segment_sum(
      per_entry, arrays['entry_width'], len(arrays['fixed']))


def _other(widths, index):
  """`widths[index]`, 1 where `index` is -1."""
  safe = np.maximum(index, 0)
  return tf.where_v2(index >= 0, tf.gather(widths, safe),
                     tf.ones_like(tf.gather(widths, safe)))


class BilinearCost(object):
  """A cost that is a sum of products of widths (`CostModel.arrays`), as
  tensors: `cost(keep)` and `marginals(keep, num_units)`. Any object with
  these two methods can be given to `budget_masks` instead (a latency
  table's, `tf1prune.latency.LatencyCost`)."""

  def __init__(self, arrays):
    self.arrays = arrays

  def cost(self, keep):
    arrays = self.arrays
    widths = _widths(arrays, keep)
    return tf.reduce_sum(arrays['coef'] * tf.gather(widths, arrays['first']) *
                         _other(widths, arrays['second']))

  def marginals(self, keep, num_units):
    return marginal_costs(self.arrays, keep, num_units)


def marginal_costs(arrays, keep, num_units):
  """What keeping each unit costs at `keep`: float64 [num_units], the
  derivative of the cost (`CostModel.arrays`) by each unit's keep value."""
  widths = _widths(arrays, keep)
  num = len(arrays['fixed'])
  first, second = arrays['first'], arrays['second']
  # d cost / d width[t]: each term's coefficient times its other factor.
  by_first = tf.unsorted_segment_sum(
      arrays['coef'] * _other(widths, second), first, num)
  pairs = np.nonzero(second >= 0)[0]
  by_second = tf.unsorted_segment_sum(
      arrays['coef'][pairs] * tf.gather(widths, first[pairs]), second[pairs],
      num)
  per_width = by_first + by_second
  return tf.unsorted_segment_sum(
      tf.gather(per_width, arrays['entry_width']) * arrays['entry_count'],
      arrays['entry_unit'], num_units)


def _normalized(importance, unit_group, num_groups, normalization):
  if normalization == 'none':
    return importance
  finite = tf.math.is_finite(importance)
  values = tf.where_v2(finite, importance, tf.zeros_like(importance))
  if normalization == 'mean':
    count = tf.unsorted_segment_sum(tf.cast(finite, tf.float64), unit_group,
                                    num_groups)
    scale = tf.unsorted_segment_sum(values, unit_group, num_groups) / \
        tf.maximum(count, 1.0)
  else:
    scale = tf.unsorted_segment_max(values, unit_group, num_groups)
  scale = tf.gather(scale, unit_group)
  return tf.where_v2(scale > 0, importance / tf.where_v2(
      scale > 0, scale, tf.ones_like(scale)), importance)


def _group_ranks(importance, unit_group):
  """Each unit's rank in its group, best first (ties: lower index first)."""
  by_score = tf.argsort(-importance, stable=True)
  order = tf.gather(by_score, tf.argsort(tf.gather(unit_group, by_score),
                                         stable=True))
  sizes = np.bincount(unit_group)
  starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
  position = tf.range(tf.size(order))
  rank = position - tf.gather(starts, tf.gather(unit_group, order))
  return tf.scatter_nd(order[:, None], rank, [len(unit_group)])


def budget_masks(importance, unit_group, cost, budget, current=None,
                 normalization='mean', min_channels=1, multiple=1,
                 locked=None, cost_exponent=0.0, monotone=False):
  """Returns (float32 [U] keep mask, float64 cost): the units that stay.

  Args:
    importance: float [U] tensor, the units' importance (higher: keep).
    unit_group: int sequence [U], each unit's group, 0 .. G - 1 (every
      group has at least one unit).
    cost: `CostModel.arrays(metric)` of the model, over the same units, or
      an object with `cost(keep)` and `marginals(keep, num_units)` tensors
      (`BilinearCost`, `tf1prune.latency.LatencyCost`).
    budget: float scalar (tensor), the cost allowed.
    current: optional float [U] tensor, the units kept now (1) or not (0):
      removal savings are taken at these widths; None: every unit kept.
    normalization: 'mean', 'max' or 'none' of each group's importances.
    min_channels: int >= 0, units a group keeps at least (while it has them),
      or one such int per group.
    multiple: int >= 1, each group's kept count is rounded up to a multiple.
    locked: optional bool [U] tensor, units always kept.
    cost_exponent: float >= 0, the power of what a unit saves that its
      importance is divided by (0: the importances alone rank, as NNCF's
      filter pruning does; 1: importance per unit of cost saved).
    monotone: True: a unit that `current` removed (and `locked` does not
      keep) stays removed: it leaves first and ranks last in its group, so a
      budget that only falls only removes units.

  Raises:
    ValueError: a bad `normalization`, `min_channels`, `multiple` or
      `unit_group`.
  """
  if isinstance(cost, dict):
    cost = BilinearCost(cost)
  if normalization not in NORMALIZATIONS:
    raise ValueError("normalization must be 'mean', 'max' or 'none', got %r"
                     % (normalization,))
  unit_group = np.asarray(unit_group, np.int32)
  num_groups = int(unit_group.max()) + 1 if unit_group.size else 0
  sizes = np.bincount(unit_group, minlength=num_groups)
  if unit_group.ndim != 1 or not unit_group.size or (sizes == 0).any():
    raise ValueError('unit_group must give every unit a group 0 .. G-1 with '
                     'no group empty, got %r' % (unit_group.tolist(),))
  least = np.asarray(min_channels)
  if least.dtype.kind not in 'iu' or least.ndim not in (0, 1) or (
      least.ndim == 1 and least.shape != sizes.shape) or (least < 0).any():
    raise ValueError('min_channels must be an int >= 0 or one per group '
                     '(%d), got %r' % (num_groups, min_channels))
  if isinstance(multiple, bool) or int(multiple) != multiple or multiple < 1:
    raise ValueError('multiple must be an int >= 1, got %r' % (multiple,))
  num_units = len(unit_group)
  importance = tf.cast(importance, tf.float64)
  importance = tf.where_v2(tf.math.is_nan(importance),
                           tf.fill([num_units], np.float64(np.inf)),
                           importance)
  if locked is not None:
    importance = tf.where_v2(locked, tf.fill([num_units], np.float64(np.inf)),
                             importance)
  keep_now = (tf.constant(np.ones(num_units)) if current is None else
              tf.cast(current, tf.float64))
  saves = tf.unsorted_segment_sum(cost.marginals(keep_now, num_units),
                                  unit_group, num_groups) / sizes
  saves = tf.gather(saves, unit_group)
  score = _normalized(importance, unit_group, num_groups, normalization)
  score = tf.where_v2(saves > 0, score / tf.pow(tf.where_v2(
      saves > 0, saves, tf.ones_like(saves)), float(cost_exponent)), tf.fill(
          [num_units], np.float64(np.inf)))
  score = tf.where_v2(tf.math.is_finite(importance), score,
                      tf.fill([num_units], np.float64(np.inf)))
  start = tf.constant(0)
  if monotone:
    gone = tf.logical_and(keep_now <= 0, importance < np.inf)
    start = tf.reduce_sum(tf.cast(gone, tf.int32))
    score = tf.where_v2(gone, tf.fill([num_units], np.float64(-np.inf)),
                        score)
    importance = tf.where_v2(gone, score, importance)
  order = tf.argsort(score, stable=True)            # lowest score leaves first
  position = tf.scatter_nd(order[:, None], tf.range(num_units), [num_units])
  removable = tf.reduce_sum(tf.cast(score < np.inf, tf.int32))
  rank = _group_ranks(importance, unit_group)
  floor = np.minimum(least, sizes)

  def keep_after(leaving):
    """The keep mask when the first `leaving` units of `order` leave."""
    left = tf.unsorted_segment_sum(tf.cast(position < leaving, tf.int32),
                                   unit_group, num_groups)
    kept = tf.maximum(sizes - left, floor)
    kept = tf.minimum((kept + multiple - 1) // multiple * multiple, sizes)
    return tf.cast(rank < tf.gather(kept, unit_group), tf.float64)

  budget = tf.cast(budget, tf.float64)

  def search(low, high):
    mid = (low + high) // 2
    fits = cost.cost(keep_after(mid)) <= budget
    return tf.where_v2(fits, low, mid + 1), tf.where_v2(fits, mid, high)

  low, _ = tf.while_loop(lambda low, high: low < high, search,
                         [start, removable])
  keep = keep_after(low)
  return tf.cast(keep, tf.float32), cost.cost(keep)
