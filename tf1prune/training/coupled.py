"""Which weights `Pruning` prunes per channel group (`coupled_filter`), and
which it leaves dense because they give the model's outputs.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [1, 8, 8, 3])
    ...   a = tf1prune.masked_conv2d(x, 8, 3, scope='a')
    ...   c = tf1prune.masked_conv2d(a, 8, 1, activation_fn=None, scope='c')
    ...   y = tf.nn.relu(a + c)
    ...   loss = tf.reduce_mean(y)        # reads y: a and c are no outputs
    ...   step = tf.train.get_or_create_global_step()
    ...   p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
    ...       'granularity_map=[.*:coupled_filter]'))
    ...   [str(item.group) for item in p.coupled_groups()]
    ['8 channels: a/weights, c/weights']

A weight whose `granularity_map` value is `coupled_filter` is pruned with the
other members of its `tf1prune.ChannelGroup` (found from the graph when the
update op is built): one unit score per coupled channel, one keep/drop
decision for all members. The rules:

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
- each warning is logged once per graph;
- a `coupled_filter` weight in no group (it feeds no NHWC `Conv2D`, plain
  `MatMul` or depthwise conv) stays dense, with a warning;
- the group's sparsity is its members' `weight_sparsity_map` target, which
  must be the same for all (or none: the global schedule); different targets
  in one group are refused with a `ValueError`;
- in `global_pruning_groups`, all members must be in the same global group;
  the group's units are then ranked with the other weights of that group,
  and `channel_group_min_channels` / `channel_group_multiple` are applied to
  each channel group after the ranking;
- a locked mask entry that is kept locks its whole unit: the unit is kept in
  every member (`tf1prune.lock`), and locked zeros stay zero.
"""

import collections
import weakref

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.channels.training_graph import find_channel_groups
from tf1prune.masks import CoupledFilter

__all__ = ['CoupledTargets', 'locked_units', 'plan_coupled']


class CoupledTargets(collections.namedtuple(
    'CoupledTargets', ['group', 'targets', 'granularity', 'spec'])):
  """One channel group pruned as a unit.

  Attributes:
    group: its `tf1prune.ChannelGroup`.
    targets: `Pruning`'s target (record, spec, frozen) of each member, in
      member order.
    granularity: the members' `CoupledFilter`.
    spec: the first member's `WeightSpec`: its target sparsity and global
      pruning group are the group's.
  """


def _names(targets):
  return ', '.join(t.record.name for t in targets)


def _check_one(group, targets, attribute, what):
  values = collections.OrderedDict()
  for t in targets:
    values.setdefault(getattr(t.spec, attribute), []).append(t.record.name)
  if len(values) > 1:
    raise ValueError(
        'channel group [%s] is pruned as one unit (coupled_filter) but its '
        'members have different %s: %s; give all its members the same one '
        '(or leave all of them out)' % (str(group), what, '; '.join(
            '%s for %s' % (v, ', '.join(n)) for v, n in values.items())))


_WARNED = weakref.WeakKeyDictionary()   # graph -> messages already logged


def warn_once(graph, message, *args):
  """Logs `message % args` once per graph (`coupled_groups()` and the update
  op plan the groups again)."""
  text = message % args
  seen = _WARNED.setdefault(graph or tf.get_default_graph(), set())
  if text not in seen:
    seen.add(text)
    tf.logging.warning('%s', text)


def _shape(record):
  shape = record.weight.get_shape()
  return shape.as_list() if shape.is_fully_defined() else None


def _removes_outputs(target):
  shape = _shape(target.record)
  return shape is not None and target.spec.granularity.removes_outputs(shape)


def _guard_outputs(plain, groups, plan, graph, names):
  """The targets of `plain` that `plan.keeps_outputs` does not leave dense."""
  outputs = {m.name: g.outputs for g in groups for m in g.members
             if g.outputs}
  kept = []
  for target in plain:
    name = target.record.name
    if _removes_outputs(target) and plan.keeps_outputs(
        target.spec, _shape(target.record), outputs.get(name), names):
      warn_once(graph, '%s', plan.outputs_warning([name], outputs[name]))
    else:
      kept.append(target)
  return kept


def plan_coupled(targets, records, graph=None, plan=None, groups=None):
  """Splits `Pruning`'s targets into plain ones and coupled channel groups.

  Also applies the guard of the model's outputs (`PruningPlan.keeps_outputs`)
  to every target whose granularity removes whole output channels.

  Args:
    targets: the pruned targets (`.record`, `.spec`, `.frozen`).
    records: every `MaskedWeight` of the graph (unpruned ones too: they
      couple channels as well).
    graph: the graph to walk; default the default graph.
    plan: the `tf1prune.plan.PruningPlan` the targets' specs come from: a
      weight whose output channels are the model's outputs is pruned by
      filters only if it says so (the user named the layer); None: no guard.
    groups: the `ChannelGroup`s of `records` in `graph`, if found already
      (`find_channel_groups`).

  Returns:
    (plain targets, list of `CoupledTargets`): weights whose `coupled_filter`
    cannot be honoured, and weights the guard leaves dense, are in neither
    (they stay dense; a warning says why).

  Raises:
    ValueError: members of one group have different `weight_sparsity_map`
      targets or `global_pruning_groups`.
  """
  wanted = collections.OrderedDict(
      (t.record.name, t) for t in targets
      if isinstance(t.spec.granularity, CoupledFilter))
  plain = [t for t in targets if t.record.name not in wanted]
  guarded = plan is not None and any(_removes_outputs(t) for t in plain)
  if not wanted and not guarded:
    return plain, []
  if groups is None:
    groups = find_channel_groups(graph, records)
  all_names = [r.name for r in records]
  if guarded:
    plain = _guard_outputs(plain, groups, plan, graph, all_names)
  coupled, seen = [], set()
  for group in groups:
    names = [m.name for m in group.members]
    chosen = [n for n in names if n in wanted]
    if not chosen:
      continue
    seen.update(chosen)
    others = [n for n in names if n not in wanted]
    if group.blocked:
      warn_once(graph,
                 'coupled_filter: channel group [%s] is blocked (%s); its '
                 'weights stay dense', group, group.blocked)
    elif plan is not None and any(
        plan.keeps_outputs(wanted[n].spec, _shape(wanted[n].record) or [],
                           group.outputs, all_names) for n in chosen):
      warn_once(graph, '%s', plan.outputs_warning(chosen, group.outputs))
    elif others:
      warn_once(graph,
          'coupled_filter: channel group [%s] has members not pruned with '
          'coupled_filter (%s: do_not_prune or another granularity); %s stay '
          'dense. Give the whole group coupled_filter to prune it.', group,
          ', '.join(others), ', '.join(chosen))
    else:
      members = [wanted[n] for n in names]
      _check_one(group, members, 'target_sparsity',
                 'weight_sparsity_map targets')
      _check_one(group, members, 'group', 'global_pruning_groups')
      coupled.append(CoupledTargets(group, members, members[0].spec.granularity,
                                    members[0].spec))
  lonely = [n for n in wanted if n not in seen]
  if lonely:
    warn_once(graph,
        'coupled_filter: %s feed no NHWC Conv2D, MatMul or depthwise conv, so '
        'they are in no channel group; they stay dense', ', '.join(lonely))
  return plain, coupled


def locked_units(item):
  """Returns a bool [num_units] tensor of the units a lock keeps, or None.

  A unit is kept when any member has a locked mask entry that is 1 (kept) in
  it: pruning the unit would leave that entry, so the channel could not go.
  """
  hits = []
  for member, target in zip(item.group.members, item.targets):
    if target.frozen is None:
      continue
    mask = target.record.mask
    rank = mask.get_shape().ndims
    axis = member.axis % rank
    kept = tf.logical_and(target.frozen, tf.greater(mask.read_value(), 0))
    per_entry = tf.reduce_any(kept, axis=[a for a in range(rank) if a != axis])
    hits.append(tf.unsorted_segment_max(
        tf.cast(per_entry, tf.int32), np.asarray(member.units, np.int32),
        item.group.num_units))
  if not hits:
    return None
  return tf.reduce_max(tf.stack(hits), axis=0) > 0
