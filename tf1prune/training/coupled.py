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
decision for all members. The rules are those of `tf1prune.plan.coupled`,
which the Keras `Pruner` follows too; here each warning is logged once per
graph (`coupled_groups()` and the update op plan the groups again), and a
locked mask entry that is kept keeps its unit in every member
(`locked_units`).
"""

import weakref

import tensorflow.compat.v1 as tf

from tf1prune.channels.training_graph import find_channel_groups
from tf1prune.plan.coupled import (CoupledTargets, split_coupled,
                                   units_kept_by_locks)

__all__ = ['CoupledTargets', 'locked_units', 'plan_coupled']

_WARNED = weakref.WeakKeyDictionary()   # graph -> messages already logged


def warn_once(graph, message, *args):
  """Logs `message % args` once per graph (`coupled_groups()` and the update
  op plan the groups again)."""
  text = message % args
  seen = _WARNED.setdefault(graph or tf.get_default_graph(), set())
  if text not in seen:
    seen.add(text)
    tf.logging.warning('%s', text)


def _shape(target):
  shape = target.record.weight.get_shape()
  return shape.as_list() if shape.is_fully_defined() else None


def plan_coupled(targets, records, graph=None, plan=None, groups=None):
  """Splits `Pruning`'s targets into plain ones and coupled channel groups.

  `tf1prune.plan.coupled.split_coupled` over the groups of `graph`.

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
    (plain targets, list of `CoupledTargets`), as `split_coupled`.

  Raises:
    ValueError: members of one group have different `weight_sparsity_map`
      targets or `global_pruning_groups`.
  """
  return split_coupled(
      targets, lambda: (find_channel_groups(graph, records)
                        if groups is None else groups),
      [r.name for r in records], plan,
      lambda text: warn_once(graph, '%s', text),
      lambda t: t.record.name, _shape)


def locked_units(item):
  """Returns a bool [num_units] tensor of the units a lock keeps, or None.

  A unit is kept when any member has a locked mask entry that is 1 (kept) in
  it: pruning the unit would leave that entry, so the channel could not go.
  """
  kept = []
  for target in item.targets:
    if target.frozen is None:
      kept.append(None)
    else:
      mask = target.record.mask.read_value()
      kept.append(tf.logical_and(target.frozen, tf.greater(mask, 0)))
  return units_kept_by_locks(item.group, kept)
