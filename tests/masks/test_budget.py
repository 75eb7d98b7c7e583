"""`budget_masks` against a NumPy reference that removes one unit at a time.

The reference scores every unit the documented way (importance over its
group's mean or max, over the cost one of its group's units saves at the
current widths, counted from the layers directly), then walks the units
from the lowest score up, rounding each group's kept count after every
step, and stops at the first model within the budget.
"""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.channels.cost import CostModel, Layer, Width
from tf1prune.masks import budget_masks


def _chain(sizes, inputs=5, outputs=3, kernel=9, positions=16):
  """A chain of convs whose outputs are the groups: the `CostModel`, the
  unit groups and a cost function of a keep vector computed from the
  layers' formula directly."""
  widths, start = [Width(inputs, ())], 0
  for size in sizes:
    widths.append(Width(0, tuple((u, 1) for u in range(start,
                                                        start + size))))
    start += size
  widths.append(Width(outputs, ()))
  layers = [Layer('l%d' % i, 'conv', widths[i], widths[i + 1], kernel, 1,
                  positions, True) for i in range(len(widths) - 1)]
  group = np.repeat(np.arange(len(sizes)), sizes)

  def cost(keep, metric):
    kept = [inputs] + [keep[group == g].sum() for g in range(len(sizes))] + \
        [outputs]
    total = 0.0
    for a, b in zip(kept[:-1], kept[1:]):
      if metric == 'flops':
        total += 2.0 * kernel * a * b * positions
      else:
        total += kernel * a * b + b
    return total
  return CostModel(start, layers), group, cost


def _reference(importance, group, cost, budget, current, normalization,
               least, multiple, locked, metric, exponent):
  importance = np.where(np.isnan(importance), np.inf, importance)
  if locked is not None:
    importance = np.where(locked, np.inf, importance)
  groups = group.max() + 1
  sizes = np.bincount(group)
  score = importance.copy()
  for g in range(groups):
    finite = importance[group == g][np.isfinite(importance[group == g])]
    if normalization == 'mean':
      scale = finite.sum() / max(len(finite), 1)
    elif normalization == 'max':
      scale = finite.max() if len(finite) else 0.0
    else:
      scale = 1.0
    if scale > 0:
      score[group == g] = importance[group == g] / scale
  for g in range(groups):
    # What one unit of g saves: the cost with one of its units gone, over
    # the group (the cost is bilinear: any unit of g gives the same).
    units = np.nonzero(group == g)[0]
    saved = 0.0
    for u in units:
      up, down = current.copy(), current.copy()
      up[u], down[u] = 1.0, 0.0
      saved += cost(up, metric) - cost(down, metric)
    saved /= len(units)
    score[units] = (score[units] / saved ** exponent if saved > 0
                    else np.inf)
  score = np.where(np.isfinite(importance), score, np.inf)
  order = sorted(range(len(score)), key=lambda u: (score[u], u))
  rank = np.zeros(len(score), int)
  for g in range(groups):
    units = [u for u in sorted(np.nonzero(group == g)[0],
                               key=lambda u: (-importance[u], u))]
    rank[units] = np.arange(len(units))

  def keep_after(n):
    left = np.bincount(group[order[:n]], minlength=groups)
    kept = np.maximum(sizes - left, np.minimum(least, sizes))
    kept = np.minimum(-(-kept // multiple) * multiple, sizes)
    return (rank < kept[group]).astype(np.float64)

  removable = int(np.isfinite(score).sum())
  for n in range(removable + 1):
    keep = keep_after(n)
    if cost(keep, metric) <= budget:
      return keep
  return keep_after(removable)


def _run(*args, **kwargs):
  keep, cost = budget_masks(*args, **kwargs)
  with tf.Session() as sess:
    return sess.run([keep, cost])


@pytest.mark.parametrize('seed', range(12))
def test_equals_the_one_at_a_time_reference(seed):
  rs = np.random.RandomState(seed)
  sizes = rs.randint(1, 9, rs.randint(1, 5))
  model, group, cost = _chain(sizes)
  metric = ('flops', 'params')[seed % 2]
  importance = rs.uniform(0, 1, len(group))
  importance[rs.rand(len(group)) < 0.2] = rs.uniform(0, 1)   # ties
  if seed % 3 == 0:
    importance[rs.randint(len(group))] = np.nan
  current = (rs.rand(len(group)) < 0.8).astype(np.float64)
  locked = rs.rand(len(group)) < 0.1 if seed % 4 == 1 else None
  normalization = ('mean', 'max', 'none')[seed % 3]
  least, multiple = (1, 1) if seed % 2 else (rs.randint(0, 3),
                                             rs.randint(1, 4))
  exponent = (0.0, 0.5, 1.0, 2.0)[seed % 4]
  dense = cost(np.ones(len(group)), metric)
  budget = dense * rs.uniform(0.1, 0.9)
  expected = _reference(importance, group, cost, budget, current,
                        normalization, least, multiple, locked, metric,
                        exponent)
  keep, achieved = _run(
      tf.constant(importance), group, model.arrays(metric), budget,
      tf.constant(current), normalization, least, multiple,
      None if locked is None else tf.constant(locked), exponent)
  assert keep.tolist() == expected.tolist()
  assert achieved == cost(expected, metric)
  assert achieved == model.cost(expected, metric)


def test_the_smallest_model_when_the_budget_cannot_be_met():
  model, group, cost = _chain([4, 4])
  keep, achieved = _run(tf.constant(np.arange(8.0)), group,
                        model.arrays('params'), 1.0, min_channels=2,
                        multiple=1)
  assert keep.tolist() == [0, 0, 1, 1, 0, 0, 1, 1]
  assert achieved == cost(keep, 'params') > 1.0


def test_a_budget_above_the_cost_keeps_everything():
  model, group, _ = _chain([3, 2])
  keep, achieved = _run(tf.constant(np.ones(5)), group,
                        model.arrays('flops'), 1e12)
  assert keep.tolist() == [1.0] * 5
  assert achieved == model.cost(None, 'flops')


@pytest.mark.parametrize('seed', range(6))
def test_monotone_removes_what_current_removed_first(seed):
  # A unit `current` removed leaves before any other, whatever its
  # importance; then the rest go as they would with those units given
  # the lowest importance of all (unnormalized, no floor: nothing else
  # moves the order).
  rs = np.random.RandomState(seed)
  model, group, cost = _chain(rs.randint(2, 7, 3))
  importance = rs.uniform(1, 2, len(group))
  current = (rs.rand(len(group)) < 0.7).astype(np.float64)
  budget = cost(current, 'flops') * (0.5, 0.8, 1.2)[seed % 3]
  keep, achieved = _run(tf.constant(importance), group,
                        model.arrays('flops'), budget, tf.constant(current),
                        'none', 0, monotone=True)
  assert (keep <= current).all() and achieved <= budget
  lowest = np.where(current > 0, importance, importance - 10.0)
  expected = _reference(lowest, group, cost, budget, current, 'none', 0, 1,
                        None, 'flops', 0.0) * current     # none comes back
  assert keep.tolist() == expected.tolist()


@pytest.mark.parametrize('kwargs,message', [
    (dict(normalization='sum'),
     "normalization must be 'mean', 'max' or 'none', got 'sum'"),
    (dict(min_channels=-1), r'min_channels must be an int >= 0 or one per '
     r'group \(1\), got -1'),
    (dict(min_channels=[1, 2]), r'one per group \(1\), got \[1, 2\]'),
    (dict(multiple=0), 'multiple must be an int >= 1, got 0'),
])
def test_bad_arguments_name_the_value(kwargs, message):
  model, group, _ = _chain([2])
  with pytest.raises(ValueError, match=message):
    budget_masks(tf.constant(np.ones(2)), group, model.arrays('flops'), 1.0,
                 **kwargs)


def test_a_group_without_units_is_refused():
  model, _, _ = _chain([2, 2])
  with pytest.raises(ValueError, match='no group empty, got'):
    budget_masks(tf.constant(np.ones(4)), [0, 0, 2, 2],
                 model.arrays('flops'), 1.0)
