"""A removed channel's bias and batch norm entries, zeroed with its filter.

    >>> import numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> from tf1prune.training import channel_params
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [None, 3])
    ...   h = tf1prune.masked_fully_connected(x, 4, scope='fc')
    ...   record = tf1prune.masked_weight_records()[0]
    ...   owner = channel_params.Owner([(record, -1, (0, 1, 2, 3))], 4)
    ...   found = channel_params.find([owner])
    ...   zero = channel_params.zero_op(found, [owner])
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = sess.run(tf.assign(tf.global_variables()[3], [1., 2., 3., 4.]))
    ...     _ = sess.run(record.mask[:, 1].assign(tf.zeros([3])))
    ...     _ = sess.run(zero)
    ...     [v.op.name for v, _, _, _ in found], sess.run(found[0][0]).tolist()
    (['fc/biases'], [1.0, 0.0, 3.0, 4.0])

With filter pruning alone, a removed filter leaves its channel at the
constant its bias (or batch norm offset) gives, and what follows the channel
(an LRN, a non-linear op, pooling of a padded constant) can keep the shrink
from removing it. With a budget (and with `prune_channel_params=True`),
`Pruning` zeroes, for every output channel whose filters its masks removed,
the bias added to the layer's output and the scale and offset of a batch
norm that reads it, at each mask update and, through `PruningHook`, after
every training step: the channel is exactly 0 in every forward pass and in
every checkpoint, and the network trains without it.

An `Owner` is the weights whose output channels share units (one weight
pruned by filters, or the members of a channel group); `find` lists the
parameters after their layers, `zero_op` multiplies each by its units' keep
values.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.channels.graph_view import is_gradient
from tf1prune.graph.masking import graph_variables

__all__ = ['Owner', 'find', 'owner_of_group', 'zero_op']

VARIABLES = frozenset(['VariableV2', 'Variable', 'VarHandleOp'])
# ExpandDims: tf.nn.conv1d's filter.
_THROUGH = frozenset(['Identity', 'ReadVariableOp', 'Cast', 'Mul', 'Select',
                      'SelectV2', 'Enter', 'ExpandDims'])
LAYERS = frozenset(['Conv2D', 'DepthwiseConv2dNative', 'MatMul',
                    'Conv2DBackpropInput', 'Conv3D'])
BATCH_NORMS = frozenset(['FusedBatchNorm', 'FusedBatchNormV2',
                         'FusedBatchNormV3'])
BIAS_ADDS = frozenset(['BiasAdd', 'BiasAddV1', 'Add', 'AddV2'])


def source(tensor):
  """The variable op (or Const) that `tensor` is read from, or None: through
  reads, identities, casts, masks and locks."""
  pending, seen = [tensor.op], set()
  while pending:
    op = pending.pop()
    if op.name in seen:
      continue
    seen.add(op.name)
    if op.type in VARIABLES or op.type == 'Const':
      return op
    if op.type in _THROUGH:
      pending.extend(reversed([t.op for t in op.inputs]))
  return None


def static(tensor):
  """The static shape of `tensor` as a list, or None."""
  shape = tensor.get_shape()
  return shape.as_list() if shape.ndims is not None else None


def followers(tensor):
  """The ops that read `tensor`, through identities."""
  pending, found = [tensor], []
  while pending:
    for op in pending.pop().consumers():
      if op.type == 'Identity':
        pending.append(op.outputs[0])
      else:
        found.append(op)
  return found


def _per_channel_variable(tensor, channels):
  """The variable `tensor` reads if it is one value per channel, else None."""
  shape = static(tensor)
  found = source(tensor)
  if (shape is None or [d for d in shape if d != 1] != [channels] or
      found is None or found.type not in VARIABLES):
    return None
  return found


def params_after(output, channels):
  """[(variable op, what)]: the bias added to a layer's `output` and the
  scale and offset of a batch norm that reads it (or its bias add)."""
  found, pending = [], [output]
  while pending:
    tensor = pending.pop()
    for op in followers(tensor):
      if op.type in BIAS_ADDS and len(op.inputs) == 2:
        variable = _per_channel_variable(op.inputs[1], channels)
        if variable is not None and op.inputs[0] is tensor:
          found.append((variable, 'bias'))
          pending.append(op.outputs[0])
      elif op.type in BATCH_NORMS and op.inputs[0] is tensor:
        for index, what in ((1, 'scale'), (2, 'offset')):
          variable = _per_channel_variable(op.inputs[index], channels)
          if variable is not None:
            found.append((variable, what))
  return found


class Owner(collections.namedtuple('Owner', ['members', 'num_units'])):
  """Weights whose output channels share units.

  Attributes:
    members: list of (`MaskedWeight`, axis, units): the weight's entries
      along `axis` are its channels, `units[i]` the unit of channel i.
    num_units: how many units there are.
  """

  def kept(self):
    """Float32 [num_units]: 1 for the units the first member's mask keeps."""
    record, axis, units = self.members[0]
    mask = record.mask.read_value()
    rank = mask.get_shape().ndims
    axis %= rank
    kept = tf.reduce_max(tf.abs(tf.cast(mask, tf.float32)),
                         axis=[a for a in range(rank) if a != axis])
    return tf.unsorted_segment_max(kept, np.asarray(units, np.int32),
                                   self.num_units)


def owner_of_group(item):
  """The `Owner` of a `tf1prune.training.coupled.CoupledTargets`."""
  return Owner([(t.record, m.axis, m.units)
                for m, t in zip(item.group.members, item.targets)],
               item.group.num_units)


def _layer_ops(record):
  """The layer ops (`LAYERS`) that read a masked weight."""
  pending, found, seen = [record.masked_weight], [], set()
  while pending:
    tensor = pending.pop()
    for op in tensor.consumers():
      if op.name in seen:
        continue
      seen.add(op.name)
      if is_gradient(op):   # a gradient's Conv2DBackpropInput is no layer
        continue
      if op.type in LAYERS and len(op.inputs) > 1 and op.inputs[1] is tensor:
        found.append(op)
      elif op.type in ('Identity', 'Cast', 'Select', 'SelectV2',
                       'ExpandDims'):
        pending.append(op.outputs[0])
  return found


def find(owners):
  """[(variable, owner index, int32 units [C], what)]: the biases and batch
  norm scales and offsets after the owners' layers, each variable once,
  with the unit of each of its channels (`what`: 'bias', 'scale' or
  'offset')."""
  if not owners:
    return []
  variables = graph_variables(owners[0].members[0][0].mask.graph)
  found, seen = [], set()
  for position, owner in enumerate(owners):
    for record, axis, units in owner.members:
      for op in _layer_ops(record):
        channels = (static(op.outputs[0]) or [None])[-1]
        ids = np.asarray(units, np.int32)
        if op.type == 'DepthwiseConv2dNative':
          if axis % 4 != 2:
            continue
          ids = np.repeat(ids, static(op.inputs[1])[3])
        elif axis not in (-1, len(static(record.weight)) - 1):
          continue
        if channels is None or len(ids) != channels:
          continue
        for variable_op, what in params_after(op.outputs[0], channels):
          variable = variables.get(variable_op.name)
          if variable is None or variable_op.name in seen:
            continue
          seen.add(variable_op.name)
          found.append((variable, position, ids, what))
  return found


def zero_op(found, owners):
  """An op multiplying each parameter of `found` by its units' keep values
  (from the owners' masks now)."""
  kept = {}
  ops = []
  for variable, position, ids, _ in found:
    if position not in kept:
      kept[position] = owners[position].kept()
    keep = tf.gather(kept[position], ids)
    ops.append(tf.assign(variable, variable.read_value() * tf.cast(
        keep, variable.dtype.base_dtype)))
  return tf.group(*ops, name='zero_removed_channel_params')
