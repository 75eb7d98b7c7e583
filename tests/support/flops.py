"""The FLOPs a pruned net ideally keeps: what its shrink is measured against.

    >>> import numpy as np
    >>> import tensorflow.compat.v1 as tf
    >>> from tests.support.flops import live_channels
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [1, 4, 4, 2])
    ...   conv = tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), [1] * 4, 'SAME')
    ...   y = tf.nn.relu(conv)
    ...   live_channels(y, {conv.op.name: np.array([True, False, True])}, {})
    array([ True, False,  True])

A layer's output channel is dead when no mask keeps it (`live_channels`
follows the live channels from the layers through the ops after them);
`ideal_flops` costs each layer of a shrink report at its FLOPs times the
live fractions of its input and output channels. `group_live_outputs` gives
the live output channels of each layer from the masks and the coupled
channel groups instead of the frozen weights.
"""

import numpy as np

_JOIN = ('Add', 'AddV2', 'AddN', 'Sub', 'Mul', 'Maximum', 'Minimum')


def live_channels(tensor, seeds, memo):
  """bool per channel (last axis) of `tensor`: something a mask kept reaches it.

  `seeds` is {layer op name: bool per output channel}. A depthwise conv
  repeats its input's channels, element-wise joins keep what any full-width,
  non-constant input keeps, concats join, a Reshape that flattens repeats its
  input's channels, any other op passes its first input when it is as wide,
  and everything else counts as live. `memo` is {tensor name: result}.
  """
  if tensor.name in memo:
    return memo[tensor.name]
  op = tensor.op
  width = tensor.shape.as_list()[-1]
  first = op.inputs[0] if op.inputs else None
  if op.name in seeds:
    live = seeds[op.name]
  elif op.type == 'DepthwiseConv2dNative':
    live = np.repeat(live_channels(first, seeds, memo),
                     op.inputs[1].shape.as_list()[-1])
  elif op.type in _JOIN:
    parts = [live_channels(t, seeds, memo) for t in op.inputs
             if t.shape.ndims and t.shape.as_list()[-1] == width and
             t.op.type != 'Const']
    live = np.logical_or.reduce(parts) if parts else np.ones(width, bool)
  elif op.type == 'ConcatV2':
    live = np.concatenate([live_channels(t, seeds, memo)
                           for t in op.inputs[:-1]])
  elif op.type == 'Reshape' and first.shape.ndims and \
      width % first.shape.as_list()[-1] == 0:
    live = np.tile(live_channels(first, seeds, memo),
                   width // first.shape.as_list()[-1])
  elif first is not None and first.shape.ndims and op.type != 'Const' and \
      first.shape.as_list()[-1] == width:
    live = live_channels(first, seeds, memo)
  else:
    live = np.ones(width, bool)
  memo[tensor.name] = live
  return live


def ideal_flops(graph, report, seeds):
  """FLOPs of the shrink report's layers without the channels no mask kept.

  Each layer costs its FLOPs times the live fraction of its input channels,
  and of its output channels unless it is a depthwise conv (whose outputs
  are its inputs' channels). `seeds` as in `live_channels`.
  """
  memo, total = {}, 0.0
  for layer in report.layers:
    op = graph.get_operation_by_name(layer.name)
    fraction = live_channels(op.inputs[0], seeds, memo).mean()
    if op.type != 'DepthwiseConv2dNative':
      fraction *= live_channels(op.outputs[0], seeds, memo).mean()
    total += layer.flops_before * fraction
  return total


def group_live_outputs(graph, groups, masks, masked):
  """{layer op name: bool per output channel} from the masks and groups.

  `masks` is {raw weight name: mask}, `masked` {masked weight op name: raw
  weight name}.
  """
  alive_units = {}
  for index, group in enumerate(groups):
    alive = np.zeros(group.num_units, bool)
    for member in group.members:
      mask = masks[member.name]
      axis = member.axis % mask.ndim
      nonzero = np.moveaxis(mask, axis, -1).reshape(-1, mask.shape[axis])
      np.logical_or.at(alive, np.asarray(member.units),
                       nonzero.any(axis=0))
    alive_units[index] = alive
  live = {}
  for op in graph.get_operations():
    if op.type not in ('Conv2D', 'MatMul'):
      continue
    weight = op.inputs[1]
    while weight.op.type == 'Identity':
      weight = weight.op.inputs[0]
    weight = masked.get(weight.op.name)
    width = op.outputs[0].shape.as_list()[-1]
    out = np.ones(width, bool)
    for index, group in enumerate(groups):
      for member in group.members:
        if member.name == weight and member.axis == -1:
          out = alive_units[index][np.asarray(member.units)]
    live[op.name] = out
  return live
