"""Channel groups over any view: which weights' filters go together.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.channels import GraphView
    >>> from tf1prune.channels.groups import GroupWalk
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [1, 4, 4, 3])
    ...   a = tf.nn.conv2d(x, tf.ones([1, 1, 3, 8]), [1] * 4, 'SAME')
    ...   b = tf.nn.conv2d(a, tf.ones([1, 1, 8, 8]), [1] * 4, 'SAME')
    ...   y = tf.nn.relu(a + b)
    >>> walk = GroupWalk(GraphView(g), ['a', 'b'])
    >>> walk.produce('a', 'a', -1, a, 8)
    >>> walk.produce('b', 'b', -1, b, 8)
    >>> walk.run()
    >>> [str(group) for group in walk.groups()]
    ['8 channels: a, b']

`GroupWalk(view, order)` is the one walk behind `find_channel_groups`
(the training graph, `tf1prune.channels.training_graph`) and the Keras
`Pruner` (`tf1prune.keras.shrink.groups`): each member that starts
channels (a conv or dense kernel) seeds the output of the node it feeds
(`produce`); a depthwise kernel is a member whose entries along axis 2 are
the channels of the depthwise conv's input (`depthwise`, given to `Forward`
as its `spread` hook); `Forward` follows the channels, and `groups()`
clusters the members whose channels share a set of the union-find into
`ChannelGroup`s, with why a group is blocked or gives the model's outputs.
`ChannelTrace(walk)` holds the groups and says which group's unit each
channel of a tensor of the view is (what a budget's cost model counts).
"""

import collections

import numpy as np

from tf1prune.channels.forward import Forward
from tf1prune.channels.propagate import UnionFind
from tf1prune.channels.table import NOT_READING, OUTPUT_OPS, rule_of

__all__ = ['ChannelGroup', 'ChannelTrace', 'GroupMember', 'GroupWalk']


class GroupMember(collections.namedtuple(
    'GroupMember', ['name', 'weight', 'axis', 'units'])):
  """One weight of a `ChannelGroup`.

  Attributes:
    name: the raw weight's name (as `MaskedWeight.name`; `layer/kernel` for
      a Keras weight).
    weight: the raw weight (a tensor, or a Keras variable).
    axis: the weight axis whose entries are its channels: -1 for conv kernels
      `[kh, kw, in, out]` (Conv3D's `[kd, kh, kw, in, out]`) and dense
      `[in, out]`, 2 for depthwise kernels `[kh, kw, in, multiplier]` and
      transposed conv filters `[kh, kw, out, in]`.
    units: tuple of ints, the group's unit of each entry along `axis`.
  """


class ChannelGroup(collections.namedtuple(
    'ChannelGroup', ['members', 'num_units', 'blocked', 'outputs',
                     'stop'])):
  """Weights whose channels are pruned together.

  Attributes:
    members: tuple of `GroupMember`, in graph order.
    num_units: how many coupled channels the group has.
    blocked: None, or why its channels cannot be removed.
    outputs: None, or why its channels are the model's outputs (they reach a
      softmax, a softmax loss, an argmax or a top-k, or nothing reads them):
      filter pruning leaves such a group alone unless the user names it.
    stop: None, or (node, op, why) where its channels reach an op of the
      model that the table stops (not a layer, an output op, a summary or
      a loss over the batch): the shrink keeps the group's channels there,
      so filters pruned in it stay in the exported graph.
  """

  def __new__(cls, members, num_units, blocked, outputs=None, stop=None):
    return super(ChannelGroup, cls).__new__(cls, members, num_units, blocked,
                                            outputs, stop)

  def __str__(self):
    text = '%d channels: %s' % (self.num_units,
                                ', '.join(m.name for m in self.members))
    return text + (' (blocked: %s)' % self.blocked if self.blocked else '')


class _StopsWalk(Forward):
  """`Forward` that records, per channel id, the first op of the model
  where the table stops it (`GroupWalk`'s `stops`)."""

  def __init__(self, view, spread):
    super(_StopsWalk, self).__init__(view, spread)
    self.stops = {}

  def _loss(self, node):
    """True for a reduction over the batch axis (a loss or a metric, not
    part of the exported model)."""
    view = self.view
    if rule_of(view.op_type(node)).kind != 'reduce':
      return False
    inputs = view.inputs(node)
    axes = view.constant(inputs[1]) if len(inputs) > 1 else None
    return axes is None or 0 in [int(a) for a in np.ravel(axes)]

  def ended(self, node, why):
    view = self.view
    op = view.op_type(node)
    if rule_of(op).kind == 'layer' or op in OUTPUT_OPS or \
        op in NOT_READING or self._loss(node):
      return
    for tensor in view.inputs(node):
      for i in self.ids.get(view.key(tensor), ()) if self.carries(
          tensor) else ():
        if i is not None:
          self.stops.setdefault(i, (view.name(node), op, why))


class GroupWalk(object):
  """The members of the channel groups; `Forward` follows their channels.

  Args:
    view: a channel view (see `tf1prune.channels`).
    order: the members' names in the order groups list them.
  """

  def __init__(self, view, order):
    self.forward = _StopsWalk(view, self._depthwise)
    self.sets = self.forward.sets
    self.members = []      # (name, weight, axis, set ids)
    self.depthwise_members = {}    # depthwise node name -> (name, weight)
    self.order = dict((name, i) for i, name in enumerate(order))
    self.unit_of_root = {}  # set root -> (group index, unit), by `groups`

  def produce(self, name, weight, axis, tensor, channels):
    """Member `name` writes the `channels` channels of `tensor` (its
    entries along `axis`, one per channel)."""
    ids = self.forward.seed(tensor, channels)
    self.members.append((name, weight, axis, ids))

  def depthwise(self, node, name, weight, axis=2, multiplier=1):
    """Member `name` is the filter of the depthwise conv `node`: its entries
    along axis 2 are the channels of the node's input (`axis` -1: its last
    axis holds `multiplier` entries per input channel, as a grouped conv's
    kernel `[kh, kw, 1, C * multiplier]`)."""
    self.depthwise_members[self.forward.view.name(node)] = (
        name, weight, axis, multiplier)

  def run(self):
    self.forward.run()

  def _depthwise(self, node, first):
    member = self.depthwise_members.get(self.forward.view.name(node))
    ids = list(first)
    if member is not None:
      for c, i in enumerate(ids):
        if i is None:
          ids[c] = int(self.sets.add()[0])
          self.forward.blocked[ids[c]] = (
              'depthwise %s reads input channel %d, which no masked weight '
              'produces' % (self.forward.view.name(node), c))
      name, weight, axis, multiplier = member
      units = ids if axis == 2 else [i for i in ids for _ in range(multiplier)]
      self.members.append((name, weight, axis, units))
    return ids

  def groups(self):
    """Clusters members that share a set into `ChannelGroup`s."""
    layers = UnionFind()
    ids = list(layers.add(len(self.members)))
    owner = {}
    for index, (_, _, _, sets) in enumerate(self.members):
      for i in sets:
        root = self.sets.find(i)
        if root in owner:
          layers.union([owner[root]], [ids[index]])
        owner[root] = ids[index]
    clusters = collections.OrderedDict()
    by_order = sorted(range(len(self.members)),
                      key=lambda i: self.order[self.members[i][0]])
    for index in by_order:
      clusters.setdefault(layers.find(index), []).append(index)
    blocked, outputs, stops = {}, {}, {}
    for i, reason in self.forward.blocked.items():
      blocked.setdefault(self.sets.find(i), reason)
    for i, where in sorted(self.forward.stops.items()):
      stops.setdefault(self.sets.find(i), where)
    for i, reason in self.forward.outputs.items():
      outputs.setdefault(self.sets.find(i), reason)
    result = []
    for indices in clusters.values():
      unit_of = collections.OrderedDict()
      members, reason, output, stop = [], None, None, None
      for index in indices:
        name, weight, axis, sets = self.members[index]
        roots = [self.sets.find(i) for i in sets]
        units = tuple(unit_of.setdefault(r, len(unit_of)) for r in roots)
        members.append(GroupMember(name, weight, axis, units))
        for r in roots:
          reason = reason or blocked.get(r)
          output = output or outputs.get(r)
          stop = stop or stops.get(r)
      for root, unit in unit_of.items():
        self.unit_of_root[root] = (len(result), unit)
      result.append(ChannelGroup(tuple(members), len(unit_of), reason,
                                 output, stop))
    return result


class ChannelTrace(object):
  """The channel groups of a `GroupWalk` (run) and the channels of its
  view's tensors.

  Attributes:
    groups: the `ChannelGroup`s, as `find_channel_groups` returns them.
  """

  def __init__(self, walk):
    self._walk = walk
    self.groups = walk.groups()

  def channels(self, tensor):
    """Per channel of `tensor` (a tensor of the walked view: a `tf.Tensor`,
    a Keras view's tensor key), its (group index, unit), or None for a
    channel of no group; None for a tensor that carries no channel of a
    member."""
    ids = self._walk.forward.ids.get(self._walk.forward.view.key(tensor))
    if ids is None:
      return None
    find, unit_of = self._walk.sets.find, self._walk.unit_of_root
    return [None if i is None else unit_of.get(find(i)) for i in ids]
