"""The masks of a `tf1prune.plan.PruningPlan` as TF ops, in a graph or eagerly.

    >>> import numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> from tf1prune.plan.mask_update import MaskUnit, compute_masks
    >>> plan = tf1prune.PruningSpec.from_hparams().plan()
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   w = tf.constant(np.arange(1., 11.), tf.float32)
    ...   unit = MaskUnit(['w'], w, tf.constant(0.0), plan.weight('w'))
    ...   mask, threshold = compute_masks(plan, [unit], 0.7, None)['w']
    ...   sess.run(mask).tolist(), float(sess.run(threshold))
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0], 8.0)

`compute_masks` is the one place the decisions of a plan meet the mask math
(`tf1prune.masks`): the weights of each `global_pruning_groups` pattern are
ranked together at the global sparsity, every other weight (or coupled channel
group) alone at its own sparsity, and scores are kept by the plan's
`Selection` (`threshold_selector`: the exact top-k or the histogram estimate,
with `threshold_decay`). `tf1prune.Pruning` calls it while it builds its
update op, the Keras `Pruner` eagerly at each update: the same plan and the
same weights give the same masks.
"""

import collections

import tensorflow.compat.v1 as tf

from tf1prune.masks import global_masks, histogram_threshold
from tf1prune.masks._select import magnitude_mask_and_count

__all__ = ['MaskUnit', 'compute_masks', 'threshold_selector']


class MaskUnit(collections.namedtuple(
    'MaskUnit', ['names', 'weights', 'threshold', 'spec', 'granularity'])):
  """What is pruned as one: a weight, or the members of a coupled group.

  Attributes:
    names: list of the weights' names.
    weights: the weight tensor, or for a coupled channel group the list of
      its members' tensors (then `granularity` is their `CoupledUnits`).
    threshold: the float scalar (tensor or variable) of the last threshold;
      `threshold_decay` averages with it.
    spec: the (first) weight's `WeightSpec`: its target sparsity and group.
    granularity: None for `spec.granularity`, or the granularity to use.
  """

  def __new__(cls, names, weights, threshold, spec, granularity=None):
    return super(MaskUnit, cls).__new__(
        cls, list(names), weights, threshold, spec,
        spec.granularity if granularity is None else granularity)


def threshold_selector(selection, old_threshold, on_count=None):
  """Returns select(scores, sparsity) -> (float32 mask, threshold).

  Args:
    selection: a `tf1prune.plan.Selection` (method, decay, nbins).
    old_threshold: float scalar, the last threshold; with `decay` > 0 the new
      one is `decay * old + (1 - decay) * new` (an old +inf is not averaged).
    on_count: None, or called as on_count(count) with the int32 count of
      the NaN and infinite scores whenever the exact method counted them on
      the way (`tf1prune.masks._select.magnitude_mask_and_count`).
  """
  decay = float(selection.decay)

  def smooth(new):
    if decay == 0.0:
      return new
    old = tf.cast(old_threshold, new.dtype)  # the threshold has the weight dtype
    return tf.where_v2(tf.is_finite(old), decay * old + (1.0 - decay) * new, new)

  def keep(scores, t, strict):
    # NaN scores rank above everything (tf1prune.masks): always kept.
    scores = tf.cast(scores, tf.float32)
    above = scores > t if strict else scores >= t
    return tf.cast(tf.logical_or(above, tf.is_nan(scores)), tf.float32)

  def select(scores, sparsity):
    if selection.method == 'histogram':
      t = smooth(histogram_threshold(scores, sparsity, selection.nbins))
      return keep(scores, t, True), t
    mask, t, count = magnitude_mask_and_count(scores, sparsity)
    if count is not None and on_count is not None:
      on_count(count)
    if decay == 0.0:
      return mask, t
    t = smooth(t)
    return keep(scores, t, False), t

  return select


def _add(results, unit, mask, threshold):
  if isinstance(unit.weights, (list, tuple)):
    results.update((n, (m, threshold)) for n, m in zip(unit.names, mask))
  else:
    results[unit.names[0]] = (mask, threshold)


def compute_masks(plan, units, sparsity, sparsity_of, non_finite=None):
  """Returns {weight name: (float32 mask, threshold)} of every unit's weights.

  Args:
    plan: the `tf1prune.plan.PruningPlan`.
    units: the `MaskUnit`s, in ranking order (ties keep the earliest).
    sparsity: the global sparsity (float, or float32 scalar tensor): that of
      the global pruning groups.
    sparsity_of: `WeightSpec` -> the sparsity of a unit ranked alone
      (`plan.sparsity_of`); may be None when every unit is in a group or
      has no target of its own.
    non_finite: None, or a dict that gets {weight name: int32 count of its
      NaN and infinite entries} for each weight whose select counted them on
      the way: a weight ranked alone by the exact method on the magnitudes
      of its entries (`threshold_selector`, `Granularity.ranks_entries`).
  """
  results = {}
  for members in plan.global_groups(units, lambda u: u.spec.group).values():
    if not members:
      continue
    # The last threshold of the group is that of a member it ranks: an N:M
    # member keeps a threshold of its own (`global_masks`).
    ranked = [u for u in members
              if getattr(u.granularity, 'ranks_scores', True)] or members
    with tf.name_scope('global_pruning'):
      masks = global_masks(
          [(u.weights, u.granularity) for u in members], sparsity,
          threshold_selector(plan.selection, ranked[0].threshold))
    for unit, (mask, threshold) in zip(members, masks):
      _add(results, unit, mask, threshold)
  for unit in units:
    if unit.spec.group is not None:
      continue
    coupled = isinstance(unit.weights, (list, tuple))
    own = (sparsity if sparsity_of is None or unit.spec.target_sparsity is None
           else sparsity_of(unit.spec))
    counts = []
    with tf.name_scope(unit.names[0] + ('_coupled_pruning_ops' if coupled
                                        else '_pruning_ops')):
      select = threshold_selector(plan.selection, unit.threshold,
                                  counts.append)
      mask, threshold = unit.granularity.compute_mask(unit.weights, own, select)
    _add(results, unit, mask, threshold)
    if (non_finite is not None and not coupled and len(counts) == 1 and
        unit.granularity.ranks_entries(unit.weights.shape.as_list())):
      non_finite[unit.names[0]] = counts[0]
  return results
