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
identities, casts and the `where` of `tf1prune.lock`):

- kept per channel: bias adds, batch norm (fused, or `tf.nn` ops with
  per-channel statistics), activations, pools, `Pad`, reductions over the
  spatial axes, casts, identities, and `Mul` by any tensor (dropout,
  attention);
- coupled: `Add`/`AddV2`/`AddN`/`Sub`/`Maximum`/`Minimum` of two tensors that
  both carry channels (a residual stream); `ConcatV2` on the channel axis
  places its inputs' channels at their offsets; a depthwise conv couples its
  filter `[:, :, c, :]` with input channel c and spreads it over its `c *
  multiplier + m` outputs; a flatten into a dense layer ends there (the dense
  layer reads rows);
- blocked: a channel added to a tensor that no masked weight produced (an
  identity shortcut from the input) cannot be removed; its group says why in
  `blocked` and is not pruned by coupled filter pruning.
Any other op ends the walk (its output carries no channels). NCHW graphs are
not followed.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.masking import masked_weight_records

__all__ = ['ChannelGroup', 'GroupMember', 'find_channel_groups',
           'format_channel_groups']

_PRODUCERS = ('Conv2D', 'MatMul')
_UNARY = frozenset([
    'Relu', 'Relu6', 'Elu', 'Selu', 'LeakyRelu', 'Sigmoid', 'Tanh', 'Softplus',
    'Softsign', 'Swish', 'Identity', 'StopGradient', 'CheckNumerics', 'Cast',
    'MaxPool', 'AvgPool', 'BiasAdd', 'FusedBatchNorm', 'FusedBatchNormV2',
    'FusedBatchNormV3', 'Pad', 'PadV2', 'MirrorPad', 'Rsqrt', 'Sqrt', 'Square',
    'Neg', 'Abs', 'Exp', 'Log', 'Reciprocal', 'Snapshot'])
_ADDS = frozenset(['Add', 'AddV2', 'AddN', 'Sub', 'Maximum', 'Minimum',
                   'SquaredDifference'])
_REDUCTIONS = frozenset(['Mean', 'Max', 'Sum', 'Min'])


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
    'ChannelGroup', ['members', 'num_units', 'blocked'])):
  """Weights whose channels are pruned together.

  Attributes:
    members: tuple of `GroupMember`, in graph order.
    num_units: how many coupled channels the group has.
    blocked: None, or why its channels cannot be removed.
  """

  def __str__(self):
    text = '%d channels: %s' % (self.num_units,
                                ', '.join(m.name for m in self.members))
    return text + (' (blocked: %s)' % self.blocked if self.blocked else '')


class _UnionFind(object):
  """Channels as ints; `union` joins two, `find` names a set by its root."""

  def __init__(self):
    self.parent = []

  def add(self):
    self.parent.append(len(self.parent))
    return len(self.parent) - 1

  def find(self, i):
    while self.parent[i] != i:
      self.parent[i] = self.parent[self.parent[i]]
      i = self.parent[i]
    return i

  def union(self, i, j):
    i, j = self.find(i), self.find(j)
    if i != j:
      self.parent[max(i, j)] = min(i, j)


def _static_dims(tensor):
  shape = tensor.get_shape()
  return shape.as_list() if shape.ndims is not None else None


def _channels(tensor):
  dims = _static_dims(tensor)
  return dims[-1] if dims else None


def _is_per_channel(tensor, channels):
  """A parameter-like operand: every axis but the last has size 1."""
  dims = _static_dims(tensor)
  return (dims is not None and all(d == 1 for d in dims[:-1]) and
          dims[-1:] in ([channels], [1], []))


def _constant(tensor):
  """The value of a `Const` tensor, else None."""
  if tensor.op.type != 'Const':
    return None
  return tf.make_ndarray(tensor.op.get_attr('value'))


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
  """Follows channels through a graph; see the module docstring."""

  def __init__(self, records):
    self.sets = _UnionFind()
    self.origins = {}      # tensor name -> list of set ids, None per channel
    self.members = []      # (record, axis, set ids)
    self.blocked = {}      # set id -> reason
    self.depthwise = {}    # depthwise op name -> record
    self.order = {r.name: i for i, r in enumerate(records)}
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
    ids = [self.sets.add() for _ in range(_static_dims(record.weight)[axis])]
    self.members.append((record, axis, ids))
    self.origins[op.outputs[0].name] = ids

  def run(self, graph):
    for op in graph.get_operations():
      if op.outputs and op.outputs[0].name not in self.origins:
        self._visit(op)

  def _of(self, tensor):
    return self.origins.get(tensor.name)

  def _visit(self, op):
    inputs = [self._of(t) for t in op.inputs]
    if not any(o is not None for o in inputs):
      return
    out = op.outputs[0]
    first = inputs[0]
    if op.type in _UNARY:
      if first is not None:
        self.origins[out.name] = first
    elif op.type == 'Mul':
      self._multiply(op, inputs)
    elif op.type in _ADDS:
      self._add(op, inputs)
    elif op.type in _REDUCTIONS:
      self._reduce(op, first)
    elif op.type == 'ConcatV2':
      self._concat(op, inputs)
    elif op.type == 'Reshape':
      self._reshape(op, first)
    elif op.type == 'Squeeze':
      dims = _static_dims(out)
      if first is not None and dims and dims[-1] == len(first):
        self.origins[out.name] = first
    elif op.type == 'DepthwiseConv2dNative' and first is not None:
      self._depthwise(op, first)

  def _multiply(self, op, inputs):
    carried = [o for o in inputs if o is not None]
    if len(carried) == 2 and len(carried[0]) == len(carried[1]):
      for i, j in zip(*carried):
        self._join(i, j)
    self.origins[op.outputs[0].name] = carried[0]

  def _add(self, op, inputs):
    carried = [o for o in inputs if o is not None]
    width = len(carried[0])
    if any(len(o) != width for o in carried):
      return
    for other in carried[1:]:
      for i, j in zip(carried[0], other):
        self._join(i, j)
    for tensor, origin in zip(op.inputs, inputs):
      if origin is None and not _is_per_channel(tensor, width):
        for i in carried[0]:
          if i is not None:
            self.blocked.setdefault(self.sets.find(i), 'added to %s, which no '
                                    'masked weight produces (in %s)' %
                                    (tensor.name, op.name))
    self.origins[op.outputs[0].name] = carried[0]

  def _join(self, i, j):
    if i is not None and j is not None:
      self.sets.union(i, j)

  def _reduce(self, op, first):
    axes = _constant(op.inputs[1])
    rank = len(_static_dims(op.inputs[0]) or [])
    if first is None or axes is None or not rank:
      return
    axes = set(int(a) % rank for a in np.ravel(axes))
    if rank - 1 not in axes:
      self.origins[op.outputs[0].name] = first

  def _concat(self, op, inputs):
    axis = _constant(op.inputs[-1])
    rank = len(_static_dims(op.outputs[0]) or [])
    if axis is None or not rank or int(axis) % rank != rank - 1:
      return
    joined = []
    for tensor, origin in zip(op.inputs[:-1], inputs[:-1]):
      if origin is None:
        width = _channels(tensor)
        if width is None:
          return
        origin = [None] * width
      joined.extend(origin)
    self.origins[op.outputs[0].name] = joined

  def _reshape(self, op, first):
    width = _channels(op.outputs[0])
    if first is not None and width and width % len(first) == 0:
      self.origins[op.outputs[0].name] = [first[p % len(first)]
                                          for p in range(width)]

  def _depthwise(self, op, first):
    multiplier = _static_dims(op.inputs[1])[-1]
    record = self.depthwise.get(op.name)
    ids = list(first)
    if record is not None:
      for c, i in enumerate(ids):
        if i is None:
          ids[c] = self.sets.add()
          self.blocked[ids[c]] = ('depthwise %s reads input channel %d, which '
                                  'no masked weight produces' % (op.name, c))
      self.members.append((record, 2, ids))
    self.origins[op.outputs[0].name] = [ids[j // multiplier]
                                        for j in range(len(ids) * multiplier)]

  def groups(self):
    """Clusters members that share a set into `ChannelGroup`s."""
    layers = _UnionFind()
    ids = [layers.add() for _ in self.members]
    owner = {}
    for index, (_, _, sets) in enumerate(self.members):
      for i in sets:
        root = self.sets.find(i)
        if root in owner:
          layers.union(owner[root], ids[index])
        owner[root] = ids[index]
    clusters = collections.OrderedDict()
    by_record = sorted(range(len(self.members)),
                       key=lambda i: self.order[self.members[i][0].name])
    for index in by_record:
      clusters.setdefault(layers.find(index), []).append(index)
    blocked = {}
    for i, reason in self.blocked.items():
      blocked.setdefault(self.sets.find(i), reason)
    result = []
    for indices in clusters.values():
      unit_of = collections.OrderedDict()
      members, reason = [], None
      for index in indices:
        record, axis, sets = self.members[index]
        roots = [self.sets.find(i) for i in sets]
        units = tuple(unit_of.setdefault(r, len(unit_of)) for r in roots)
        members.append(GroupMember(record.name, record.weight, axis, units))
        for r in roots:
          reason = reason or blocked.get(r)
      result.append(ChannelGroup(tuple(members), len(unit_of), reason))
    return result


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
  graph = graph or tf.get_default_graph()
  if records is None:
    records = masked_weight_records(graph)
  walk = _Walk(records)
  walk.run(graph)
  return walk.groups()


def format_channel_groups(groups):
  """Returns the groups as text, one line each (see `ChannelGroup.__str__`)."""
  return '\n'.join(str(g) for g in groups)
