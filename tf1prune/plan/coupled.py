"""Which weights are pruned per channel group (`coupled_filter`), and which
stay dense because they give the model's outputs: for both backends.

    >>> import collections, tf1prune
    >>> from tf1prune.channels.groups import ChannelGroup, GroupMember
    >>> from tf1prune.plan.coupled import split_coupled
    >>> plan = tf1prune.PruningSpec.from_hparams(tf1prune.get_pruning_hparams(
    ...     ).parse('granularity_map=[.*:coupled_filter]')).plan()
    >>> group = ChannelGroup((GroupMember('a/w', None, -1, (0, 1)),
    ...                       GroupMember('c/w', None, -1, (0, 1))), 2, None)
    >>> Target = collections.namedtuple('Target', ['name', 'spec'])
    >>> targets = [Target(n, plan.weight(n)) for n in ('a/w', 'c/w', 'd/w')]
    >>> plain, coupled = split_coupled(
    ...     targets, lambda: [group], ['a/w', 'c/w', 'd/w'], plan, print,
    ...     lambda t: t.name, lambda t: [3, 2])
    coupled_filter: d/w feed no NHWC Conv2D, MatMul or depthwise conv, ...
    >>> plain, [str(item.group) for item in coupled]
    ([], ['2 channels: a/w, c/w'])

`split_coupled` is the rule the graph `Pruning` (`tf1prune.training.coupled`)
and the Keras `Pruner` both follow; each backend finds the channel groups
(`tf1prune.channels.groups`) in its own model and gives its own targets
(anything with a `.spec`, the `WeightSpec`) and its own way to warn. The
rules:

- a group is pruned as coupled only if every member is pruned (not in
  `do_not_prune`) with `coupled_filter`; otherwise its `coupled_filter`
  members stay dense and a warning names the others (they keep their own
  granularity);
- a blocked group (`ChannelGroup.blocked`, e.g. an identity shortcut from
  the input) stays dense, with a warning saying why;
- a group whose channels are the model's outputs (`ChannelGroup.outputs`:
  they reach a softmax, a softmax loss, an argmax or a top-k, or nothing
  reads them) stays dense, with a warning naming its layers and why, unless
  a `granularity_map` entry names them (matches them and not every weight:
  `PruningPlan.keeps_outputs`); so does a weight pruned alone with a
  granularity that removes whole output channels (`filter`, blocks over
  every input);
- a `coupled_filter` weight in no group (it feeds no NHWC `Conv2D`, plain
  `MatMul` or depthwise conv) stays dense, with a warning;
- a group whose channels reach an op that the shrink stops
  (`ChannelGroup.stop`: an op the table does not pass, a slice of a channel
  range, ...) is pruned, with a warning naming the group, the op and why:
  its pruned filters stay in the exported graph;
- the group's sparsity is its members' `weight_sparsity_map` target, which
  must be the same for all (or none: the global schedule); different targets
  in one group are refused with a `ValueError`;
- in `global_pruning_groups`, all members must be in the same global group;
  the group's units are then ranked with the other weights of that group,
  and `channel_group_min_channels` / `channel_group_multiple` are applied to
  each channel group after the ranking;
- a locked mask entry that is kept locks its whole unit: the unit is kept in
  every member (`units_kept_by_locks`), and locked zeros stay zero.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.masks import CoupledFilter

__all__ = ['CoupledTargets', 'split_coupled', 'units_kept_by_locks']


class CoupledTargets(collections.namedtuple(
    'CoupledTargets', ['group', 'targets', 'granularity', 'spec'])):
  """One channel group pruned as a unit.

  Attributes:
    group: its `tf1prune.ChannelGroup`.
    targets: the backend's target of each member, in member order.
    granularity: the members' `CoupledFilter`.
    spec: the first member's `WeightSpec`: its target sparsity and global
      pruning group are the group's.
  """


def _check_one(group, targets, name_of, attribute, what):
  values = collections.OrderedDict()
  for t in targets:
    values.setdefault(getattr(t.spec, attribute), []).append(name_of(t))
  if len(values) > 1:
    raise ValueError(
        'channel group [%s] is pruned as one unit (coupled_filter) but its '
        'members have different %s: %s; give all its members the same one '
        '(or leave all of them out)' % (str(group), what, '; '.join(
            '%s for %s' % (v, ', '.join(n)) for v, n in values.items())))


def _removes_outputs(target, shape_of):
  shape = shape_of(target)
  return shape is not None and target.spec.granularity.removes_outputs(shape)


def _guard_outputs(plain, groups, plan, names, warn, name_of, shape_of):
  """The targets of `plain` that `plan.keeps_outputs` does not leave dense."""
  outputs = dict((m.name, g.outputs) for g in groups for m in g.members
                 if g.outputs)
  kept = []
  for target in plain:
    name = name_of(target)
    if _removes_outputs(target, shape_of) and plan.keeps_outputs(
        target.spec, shape_of(target), outputs.get(name), names):
      warn(plan.outputs_warning([name], outputs[name]))
    else:
      kept.append(target)
  return kept


def split_coupled(targets, find_groups, names, plan, warn, name_of,
                  shape_of):
  """Splits pruned targets into plain ones and coupled channel groups.

  Also applies the guard of the model's outputs (`PruningPlan.keeps_outputs`)
  to every target whose granularity removes whole output channels.

  Args:
    targets: the pruned targets, each with `.spec` (its `WeightSpec`).
    find_groups: `() -> [ChannelGroup]` of every weight of the model (unpruned
      ones too: they couple channels as well); called only when needed.
    names: the names of every weight of the model (pruned or not).
    plan: the `tf1prune.plan.PruningPlan` the targets' specs come from; None:
      no guard of the outputs.
    warn: `warn(text)`, called once per warning.
    name_of: target -> its weight's name (a group member's name).
    shape_of: target -> its static shape (a list of ints), or None.

  Returns:
    (plain targets, list of `CoupledTargets`): weights whose `coupled_filter`
    cannot be honoured, and weights the guard leaves dense, are in neither
    (they stay dense; a warning says why).

  Raises:
    ValueError: members of one group have different `weight_sparsity_map`
      targets or `global_pruning_groups`.
  """
  wanted = collections.OrderedDict(
      (name_of(t), t) for t in targets
      if isinstance(t.spec.granularity, CoupledFilter))
  plain = [t for t in targets if name_of(t) not in wanted]
  guarded = plan is not None and any(_removes_outputs(t, shape_of)
                                     for t in plain)
  if not wanted and not guarded:
    return plain, []
  groups = find_groups()
  if guarded:
    plain = _guard_outputs(plain, groups, plan, names, warn, name_of,
                           shape_of)
  coupled, seen = [], set()
  for group in groups:
    members = [m.name for m in group.members]
    chosen = [n for n in members if n in wanted]
    if not chosen:
      continue
    seen.update(chosen)
    others = [n for n in members if n not in wanted]
    if group.blocked:
      warn('coupled_filter: channel group [%s] is blocked (%s); its weights '
           'stay dense' % (group, group.blocked))
    elif plan is not None and any(
        plan.keeps_outputs(wanted[n].spec, shape_of(wanted[n]) or [],
                           group.outputs, names) for n in chosen):
      warn(plan.outputs_warning(chosen, group.outputs))
    elif others:
      warn('coupled_filter: channel group [%s] has members not pruned with '
           'coupled_filter (%s: do_not_prune or another granularity); %s '
           'stay dense. Give the whole group coupled_filter to prune it.' % (
               group, ', '.join(others), ', '.join(chosen)))
    else:
      if group.stop is not None:
        warn('coupled_filter: channel group [%s] reaches %s (%s), where the '
             'shrink stops its channels (%s): its filters are pruned, but '
             'the exported graph keeps them' % ((group,) + tuple(
                 group.stop)))
      items = [wanted[n] for n in members]
      _check_one(group, items, name_of, 'target_sparsity',
                 'weight_sparsity_map targets')
      _check_one(group, items, name_of, 'group', 'global_pruning_groups')
      coupled.append(CoupledTargets(group, items, items[0].spec.granularity,
                                    items[0].spec))
  lonely = [n for n in wanted if n not in seen]
  if lonely:
    warn('coupled_filter: %s feed no NHWC Conv2D, MatMul or depthwise conv, '
         'so they are in no channel group; they stay dense' %
         ', '.join(lonely))
  return plain, coupled


def units_kept_by_locks(group, kept_entries):
  """Returns a bool [num_units] tensor of the units a lock keeps, or None.

  A unit is kept when any member has a locked mask entry that is 1 (kept) in
  it: pruning the unit would leave that entry, so the channel could not go.

  Args:
    group: the `ChannelGroup`.
    kept_entries: per member, None (nothing locked) or a bool tensor (or
      array) of its shape: the entries that are locked and kept.
  """
  hits = []
  for member, kept in zip(group.members, kept_entries):
    if kept is None:
      continue
    kept = tf.convert_to_tensor(kept)
    rank = kept.get_shape().ndims
    axis = member.axis % rank
    per_entry = tf.reduce_any(kept, axis=[a for a in range(rank) if a != axis])
    hits.append(tf.unsorted_segment_max(
        tf.cast(per_entry, tf.int32), np.asarray(member.units, np.int32),
        group.num_units))
  if not hits:
    return None
  return tf.reduce_max(tf.stack(hits), axis=0) > 0
