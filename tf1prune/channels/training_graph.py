"""Coupled output channels: which filters of a training graph go together.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> x = tf.placeholder(tf.float32, [1, 8, 8, 3])
    >>> a = tf1prune.masked_conv2d(x, 8, 3, scope='a')
    >>> b = tf1prune.masked_conv2d(a, 4, 3, scope='b')
    >>> c = tf1prune.masked_conv2d(b, 8, 1, activation_fn=None, scope='c')
    >>> y = tf.nn.relu(a + c)                  # residual add: a and c coupled
    >>> for group in tf1prune.find_channel_groups():
    ...   print(group)
    8 channels: a/weights, c/weights
    4 channels: b/weights

Removing output channel 5 of `a` only makes the network smaller if channel 5 of
`c` goes too: both are added into the same tensor. A `ChannelGroup` is such a
set of weights, and its `num_units` coupled channels are what filter pruning
keeps or drops as one unit (`tf1prune.masks.coupled_filter_masks`).

How channels are followed, from each masked weight that feeds a `Conv2D` or
`MatMul` (its output channels are the last axis, NHWC; directly or through
identities, casts and the `where` of `tf1prune.lock`), forward through the
graph (the ops `tf.gradients` built left out), is the op table of
`tf1prune.channels`, which the shrink uses too:

- kept per channel: bias adds, batch norm (fused, or `tf.nn` ops with
  per-channel statistics), activations, pools, pads, reductions over the
  spatial axes, casts, identities (`IdentityN` too), reshapes of `[N, C]`
  to `[N, 1, 1, C]` and back, and a `Mul` by a tensor that carries no
  channels (dropout, attention);
- coupled: an element-wise op (`Add`, `Mul`, `Maximum`, `AddN`, ...) of
  tensors that all carry channels (a residual stream, an SE gate, `x *
  sigmoid(x)`); `ConcatV2` on the channel axis places its inputs' channels
  at their offsets; a depthwise conv couples its filter `[:, :, c, :]` with
  input channel c and spreads it over its `c * multiplier + m` outputs; a
  flatten into a dense layer ends there (the dense layer reads rows);
- blocked: a channel added to a tensor that no masked weight produced (an
  identity shortcut from the input) cannot be removed; its group says why in
  `blocked` and is not pruned by coupled filter pruning;
- the model's outputs: channels that reach a softmax, a softmax loss, an
  argmax or a top-k, or that nothing reads (the final output of an
  inference graph: no op takes them, or only summaries, `tf.print` and
  shape reads, `tf1prune.channels.forward`), are the model's outputs (one
  class each); the group says why in `outputs`, and filter pruning
  (`filter`, `coupled_filter`) leaves it alone unless the user names the
  layer (`tf1prune.plan.PruningPlan.keeps_outputs`).
Any other op ends the walk (its output carries no channels). NCHW graphs are
not followed.
"""

import collections

import tensorflow.compat.v1 as tf

from tf1prune.channels import Forward, GraphView, UnionFind
from tf1prune.graph.masking import masked_weight_records

__all__ = ['ChannelGroup', 'ChannelTrace', 'GroupMember',
           'find_channel_groups', 'format_channel_groups', 'trace_channels']

class GroupMember(collections.namedtuple(
    'GroupMember', ['name', 'weight', 'axis', 'units'])):
  """One weight of a `ChannelGroup`.

  Attributes:
    name: the raw weight's name (as `MaskedWeight.name`).
    weight: the raw weight tensor.
    axis: the weight axis whose entries are its channels: -1 for conv kernels
      `[kh, kw, in, out]` and dense `[in, out]`, 2 for depthwise kernels
      `[kh, kw, in, multiplier]`.
    units: tuple of ints, the group's unit of each entry along `axis`.
  """


class ChannelGroup(collections.namedtuple(
    'ChannelGroup', ['members', 'num_units', 'blocked', 'outputs'])):
  """Weights whose channels are pruned together.

  Attributes:
    members: tuple of `GroupMember`, in graph order.
    num_units: how many coupled channels the group has.
    blocked: None, or why its channels cannot be removed.
    outputs: None, or why its channels are the model's outputs (they reach a
      softmax, a softmax loss, an argmax or a top-k, or nothing reads them):
      filter pruning leaves such a group alone unless the user names it.
  """

  def __new__(cls, members, num_units, blocked, outputs=None):
    return super(ChannelGroup, cls).__new__(cls, members, num_units, blocked,
                                            outputs)

  def __str__(self):
    text = '%d channels: %s' % (self.num_units,
                                ', '.join(m.name for m in self.members))
    return text + (' (blocked: %s)' % self.blocked if self.blocked else '')


def _static_dims(tensor):
  shape = tensor.get_shape()
  return shape.as_list() if shape.ndims is not None else None


_PASS_WEIGHT = frozenset(['Identity', 'Select', 'SelectV2', 'Cast'])


def _weight_uses(tensor):
  """Yields (tensor, consumer) from a masked weight through the ops that keep
  its shape: identities, casts and the `where` of `tf1prune.lock`."""
  pending, seen = [tensor], set()
  while pending:
    tensor = pending.pop()
    if tensor.name in seen:
      continue
    seen.add(tensor.name)
    for op in tensor.consumers():
      yield tensor, op
      out = op.outputs[0] if op.outputs else None
      if (op.type in _PASS_WEIGHT and out is not None and
          out.get_shape().as_list() == tensor.get_shape().as_list()):
        pending.append(out)


class _Walk(object):
  """The members of the channel groups; `Forward` follows their channels."""

  def __init__(self, view, records):
    self.forward = Forward(view, self._depthwise)
    self.sets = self.forward.sets
    self.members = []      # (record, axis, set ids)
    self.depthwise = {}    # depthwise op name -> record
    self.order = {r.name: i for i, r in enumerate(records)}
    self.unit_of_root = {}  # set root -> (group index, unit), by `groups`
    for record in records:
      self._register(record)

  def _register(self, record):
    for weight, op in _weight_uses(record.masked_weight):
      if len(op.inputs) < 2 or op.inputs[1] is not weight:
        continue
      if op.type == 'DepthwiseConv2dNative':
        self.depthwise[op.name] = record
      elif op.type == 'Conv2D' and op.get_attr('data_format') in (b'NHWC',
                                                                   'NHWC'):
        self._produce(op, record, -1)
      elif op.type == 'MatMul' and not op.get_attr('transpose_b'):
        self._produce(op, record, -1)

  def _produce(self, op, record, axis):
    ids = self.forward.seed(op.outputs[0],
                            _static_dims(record.weight)[axis])
    self.members.append((record, axis, ids))

  def run(self):
    self.forward.run()

  def _depthwise(self, op, first):
    record = self.depthwise.get(op.name)
    ids = list(first)
    if record is not None:
      for c, i in enumerate(ids):
        if i is None:
          ids[c] = int(self.sets.add()[0])
          self.forward.blocked[ids[c]] = (
              'depthwise %s reads input channel %d, which no masked weight '
              'produces' % (op.name, c))
      self.members.append((record, 2, ids))
    return ids

  def groups(self):
    """Clusters members that share a set into `ChannelGroup`s."""
    layers = UnionFind()
    ids = list(layers.add(len(self.members)))
    owner = {}
    for index, (_, _, sets) in enumerate(self.members):
      for i in sets:
        root = self.sets.find(i)
        if root in owner:
          layers.union([owner[root]], [ids[index]])
        owner[root] = ids[index]
    clusters = collections.OrderedDict()
    by_record = sorted(range(len(self.members)),
                       key=lambda i: self.order[self.members[i][0].name])
    for index in by_record:
      clusters.setdefault(layers.find(index), []).append(index)
    blocked, outputs = {}, {}
    for i, reason in self.forward.blocked.items():
      blocked.setdefault(self.sets.find(i), reason)
    for i, reason in self.forward.outputs.items():
      outputs.setdefault(self.sets.find(i), reason)
    result = []
    for indices in clusters.values():
      unit_of = collections.OrderedDict()
      members, reason, output = [], None, None
      for index in indices:
        record, axis, sets = self.members[index]
        roots = [self.sets.find(i) for i in sets]
        units = tuple(unit_of.setdefault(r, len(unit_of)) for r in roots)
        members.append(GroupMember(record.name, record.weight, axis, units))
        for r in roots:
          reason = reason or blocked.get(r)
          output = output or outputs.get(r)
      for root, unit in unit_of.items():
        self.unit_of_root[root] = (len(result), unit)
      result.append(ChannelGroup(tuple(members), len(unit_of), reason,
                                 output))
    return result


class ChannelTrace(object):
  """The channel groups of a training graph and the channels of its tensors.

  Attributes:
    groups: the `ChannelGroup`s, as `find_channel_groups` returns them.
  """

  def __init__(self, walk):
    self._walk = walk
    self.groups = walk.groups()

  def channels(self, tensor):
    """Per channel of `tensor` (a `tf.Tensor` of the walked graph), its
    (group index, unit), or None for a channel of no group; None for a
    tensor that carries no channel of a masked weight."""
    ids = self._walk.forward.ids.get(tensor.name)
    if ids is None:
      return None
    find, unit_of = self._walk.sets.find, self._walk.unit_of_root
    return [None if i is None else unit_of.get(find(i)) for i in ids]


def trace_channels(graph=None, records=None):
  """Returns the `ChannelTrace` of the masked weights of `graph`.

  Args, and the groups: as `find_channel_groups`.
  """
  graph = graph or tf.get_default_graph()
  if records is None:
    records = masked_weight_records(graph)
  walk = _Walk(GraphView(graph), records)
  walk.run()
  return ChannelTrace(walk)


def find_channel_groups(graph=None, records=None):
  """Returns the `ChannelGroup`s of the masked weights of `graph`.

  Args:
    graph: a `tf.Graph`; default: the default graph.
    records: the `MaskedWeight`s to consider; default: all of `graph`'s.
      Weights that feed no `Conv2D`, `MatMul` or depthwise conv (NHWC, no
      transposed operand) belong to no group.

  Returns:
    A list of `ChannelGroup`, members and groups in the order of `records`.
  """
  return trace_channels(graph, records).groups


def format_channel_groups(groups):
  """Returns the groups as text, one line each (see `ChannelGroup.__str__`)."""
  return '\n'.join(str(g) for g in groups)
