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

How channels are followed, from each masked weight that feeds a `Conv2D`,
`Conv3D` or `MatMul` (its output channels are the last axis, NHWC or
NDHWC), or a transposed conv (`Conv2DBackpropInput`, filter `[kh, kw, out,
in]`: its output channels are axis 2), or a 1-D conv (`tf.nn.conv1d`: its
filter goes through an `ExpandDims`), directly or through identities,
casts and the `where` of `tf1prune.lock`, forward through the graph (the
ops `tf.gradients` built left out), is the op table of `tf1prune.channels`,
which the shrink uses too:

- kept per channel: bias adds, batch norm (fused, or `tf.nn` ops with
  per-channel statistics), activations, pools, pads, reductions over the
  spatial axes, casts, identities (`IdentityN` too), reshapes of `[N, C]`
  to `[N, 1, 1, C]` and back, and a `Mul` by a tensor that carries no
  channels (dropout, attention);
- coupled: an element-wise op (`Add`, `Mul`, `Maximum`, `AddN`, ...) of
  tensors that all carry channels (a residual stream, an SE gate, `x *
  sigmoid(x)`); `ConcatV2` on the channel axis places its inputs' channels
  at their offsets, and `Split` / `SplitV` give each output the channels at
  its offset; a depthwise conv couples its filter `[:, :, c, :]` with
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

import tensorflow.compat.v1 as tf

from tf1prune.channels.graph_view import GraphView, is_gradient
from tf1prune.channels.groups import (ChannelGroup, ChannelTrace,
                                      GroupMember, GroupWalk)
from tf1prune.graph.masking import masked_weight_records

__all__ = ['ChannelGroup', 'ChannelTrace', 'GroupMember',
           'find_channel_groups', 'format_channel_groups', 'trace_channels']

def _static_dims(tensor):
  shape = tensor.get_shape()
  return shape.as_list() if shape.ndims is not None else None


_PASS_WEIGHT = frozenset(['Identity', 'Select', 'SelectV2', 'Cast'])


def _weight_uses(tensor):
  """Yields (tensor, consumer) from a masked weight through the ops that keep
  its shape: identities, casts and the `where` of `tf1prune.lock`, and the
  `ExpandDims` of a leading axis by which `tf.nn.conv1d` makes its filter
  `[k, in, out]` a Conv2D's `[1, k, in, out]`."""
  pending, seen = [tensor], set()
  while pending:
    tensor = pending.pop()
    if tensor.name in seen:
      continue
    seen.add(tensor.name)
    shape = tensor.get_shape().as_list()
    for op in tensor.consumers():
      if is_gradient(op):
        continue
      yield tensor, op
      out = op.outputs[0] if op.outputs else None
      if out is None:
        continue
      if (op.type in _PASS_WEIGHT and out.get_shape().as_list() == shape) or (
          op.type == 'ExpandDims' and out.get_shape().as_list() == [1] + shape):
        pending.append(out)


# The layers whose weight (input 1) writes the channels of their output
# along an axis: -1, or 2 for a transposed conv's `[kh, kw, out, in]`.
_OUTPUT_AXIS = {'Conv2D': -1, 'Conv3D': -1, 'MatMul': -1,
                'Conv2DBackpropInput': 2}


def _channels_last(op):
  if op.type == 'MatMul':
    return not op.get_attr('transpose_b')
  return op.get_attr('data_format') in (b'NHWC', 'NHWC', b'NDHWC', 'NDHWC')


def _register(walk, record):
  """Makes `record` a member of `walk` where it feeds a layer."""
  for weight, op in _weight_uses(record.masked_weight):
    if len(op.inputs) < 2 or op.inputs[1] is not weight:
      continue
    if op.type == 'DepthwiseConv2dNative':
      walk.depthwise(op, record.name, record.weight)
    elif op.type in _OUTPUT_AXIS and _channels_last(op):
      axis = _OUTPUT_AXIS[op.type]
      walk.produce(record.name, record.weight, axis, op.outputs[0],
                   _static_dims(record.weight)[axis])


def trace_channels(graph=None, records=None):
  """Returns the `ChannelTrace` of the masked weights of `graph`.

  Args, and the groups: as `find_channel_groups`.
  """
  graph = graph or tf.get_default_graph()
  if records is None:
    records = masked_weight_records(graph)
  walk = GroupWalk(GraphView(graph), [r.name for r in records])
  for record in records:
    _register(walk, record)
  walk.run()
  return ChannelTrace(walk)


def find_channel_groups(graph=None, records=None):
  """Returns the `ChannelGroup`s of the masked weights of `graph`.

  Args:
    graph: a `tf.Graph`; default: the default graph.
    records: the `MaskedWeight`s to consider; default: all of `graph`'s.
      Weights that feed no `Conv2D`, `Conv3D`, `MatMul`, transposed conv
      or depthwise conv (NHWC or NDHWC, no transposed operand) belong to
      no group.

  Returns:
    A list of `ChannelGroup`, members and groups in the order of `records`.
  """
  return trace_channels(graph, records).groups


def format_channel_groups(groups):
  """Returns the groups as text, one line each (see `ChannelGroup.__str__`)."""
  return '\n'.join(str(g) for g in groups)
