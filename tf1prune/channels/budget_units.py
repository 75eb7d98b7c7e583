"""The units a budget prunes: its channel groups' units, numbered in turn.

    >>> import collections
    >>> from tf1prune.channels.budget_units import BudgetUnits
    >>> from tf1prune.channels.groups import ChannelGroup, GroupMember
    >>> a = ChannelGroup((GroupMember('a/w', None, -1, (0, 1, 2)),), 3, None)
    >>> b = ChannelGroup((GroupMember('b/w', None, -1, (0, 1)),), 2, None)
    >>> Item = collections.namedtuple('Item', ['group'])
    >>> units = BudgetUnits('flops:0.5', [Item(b)], [a, b])
    >>> units.unit_group.tolist(), units.width([(1, 0), (1, 1), None], 3)
    ([0, 0], Width(fixed=1, units=((0, 1), (1, 1))))

Both backends' budgets (the graph `tf1prune.training.budget.BudgetPlan`,
the Keras `tf1prune.keras._budget.KerasBudget`) prune the channel groups of
their `CoupledTargets` as one set of units: group i's units are numbered
from `offsets[i]`. A `ChannelTrace` says which (group, unit) each channel
of a tensor is; `width` turns that into the `tf1prune.channels.cost.Width`
the cost model counts, `channel_units` into the unit of each channel.
"""

import collections

import numpy as np

from tf1prune.channels.cost import Width

__all__ = ['BudgetUnits']


class BudgetUnits(object):
  """The units of the groups a budget prunes.

  Args:
    budget: the budget (for the error message).
    items: the `CoupledTargets` it prunes (anything with `.group`).
    groups: every `ChannelGroup` of the trace, in its order (what a
      `ChannelTrace`'s (group index, unit) pairs index).

  Attributes:
    items, groups: the items and their groups.
    offsets: the first unit of each group.
    unit_group: int [U], each unit's group (its index in `items`).
    num_units: U.

  Raises:
    ValueError: there is no group to prune.
  """

  def __init__(self, budget, items, groups):
    self.items = list(items)
    self.groups = [item.group for item in self.items]
    if not self.items:
      raise ValueError(
          'budget %s: no channel group can be pruned: give the layers a '
          'filter granularity (granularity_map=[.*:coupled_filter]) and leave '
          'them out of do_not_prune; the warnings above say why each group '
          'stays dense' % (budget,))
    index = dict((id(g), i) for i, g in enumerate(groups))
    self._unit_index, self.offsets, total = {}, [], 0
    for group in self.groups:
      self.offsets.append(total)
      for unit in range(group.num_units):
        self._unit_index[(index[id(group)], unit)] = total + unit
      total += group.num_units
    self.num_units = total
    self.unit_group = np.repeat(np.arange(len(self.items)),
                                [g.num_units for g in self.groups])

  def width(self, channels, full):
    """The `Width` of a tensor whose channels are `channels` (a
    `ChannelTrace.channels` list, or None: `full` channels of no unit)."""
    if channels is None:
      return Width(full or 0, ())
    fixed, counts = 0, collections.Counter()
    for channel in channels:
      unit = None if channel is None else self._unit_index.get(channel)
      if unit is None:
        fixed += 1
      else:
        counts[unit] += 1
    return Width(fixed, tuple(sorted(counts.items())))

  def channel_units(self, channels):
    """int32 [C]: the unit of each channel of `channels`, or -1."""
    return np.array([-1 if c is None else self._unit_index.get(c, -1)
                     for c in channels], np.int32)

  def split(self, units):
    """The [U] array or tensor `units`, one piece per group."""
    return [units[o:o + g.num_units] for o, g in zip(self.offsets,
                                                     self.groups)]
