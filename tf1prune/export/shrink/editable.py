"""What the shrink can edit: layers with weights of their own, and the ops
between them whose per-channel parameters are constants of their own.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.frozen_graph import FrozenGraph
    >>> from tf1prune.export.shrink.editable import classify, find_layers
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4, 4, 2], name='x')
    ...   a = tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), [1] * 4, 'SAME', name='a')
    ...   b = tf.nn.bias_add(a, tf.zeros([3]), name='b')
    ...   y = tf.nn.relu(a * b, name='y')
    >>> view = FrozenGraph(g.as_graph_def(), ['y'])
    >>> list(find_layers(view)[0])
    ['a']
    >>> classify(view, view.nodes['b'])[0].kind
    'elementwise'

`find_layers` gives the Conv2D, MatMul, depthwise convs, transposed convs
(`Conv2DBackpropInput`, whose output shape constant the shrink rewrites)
and Conv3D whose weight is a constant used by that layer only (NHWC or
NDHWC, MatMul not transposed); `classify` gives
an op's row of `tf1prune.channels`' table (`Op`) when the shrink can edit
it: its per-channel parameter (`channel_const`) and a Reshape's target must
be constants used by that op only (or `[tf.shape(x)[0], -1]`).
`reads_shape_only` recognizes the extra ones channel's shape read, and
`reads_batch_size_only` a read of the batch size: neither reads a channel.
"""

import collections

import numpy as np

from tf1prune.channels import classify as classify_channels
from tf1prune.export.shrink.frozen_graph import (attr_int, attr_str,
                                                 split_input)


class Layer(collections.namedtuple('Layer', ['node', 'kind', 'weight'])):
  """A layer the shrink edits: its node, kind ('conv', 'dense',
  'depthwise', 'conv_transpose' or 'conv3d') and weight (a Const's name)."""

  @property
  def data(self):
    """The index of its data input (a transposed conv's is 2)."""
    return 2 if self.kind == 'conv_transpose' else 0

  @property
  def in_axis(self):
    """The weight axis of its input channels (a transposed conv's filter
    is `[kh, kw, out, in]`)."""
    return -1 if self.kind == 'conv_transpose' else -2

  @property
  def out_axis(self):
    """The weight axis of its output channels."""
    return -2 if self.kind == 'conv_transpose' else -1

  @property
  def rank(self):
    """The rank of its weight and of its data input."""
    return {'dense': 2, 'conv3d': 5}.get(self.kind, 4)

# kind: a `tf1prune.channels` kind ('elementwise', 'pool', 'pad', 'reduce',
# 'concat', 'depthwise', 'reshape', 'slice', 'spatial', 'split'); inputs:
# the indices of the region's inputs; output: its output (a split's first:
# `outputs_of` gives them all); const: the per-channel const (elementwise),
# the depthwise weight, the reshape target, a slice's end (size) on the
# channel axis or a SplitV's size_splits, else None; extra: as the
# `ChannelOp`'s (a slice's: its [H, W] slices only); rule: its row.
# loose: the inputs of an element-wise op that it broadcasts over the
# channels (a one-channel map that is not a constant: its values are not
# known to the shrink).
Op = collections.namedtuple('Op', ['kind', 'node', 'inputs', 'output',
                                   'const', 'extra', 'rule', 'loose'],
                            defaults=[()])
_KINDS = {'Conv2D': 'conv', 'MatMul': 'dense',
          'DepthwiseConv2dNative': 'depthwise',
          'Conv2DBackpropInput': 'conv_transpose', 'Conv3D': 'conv3d'}


def output_sizes(g, node):
  """The Const that holds the output channel count of transposed conv
  `node`: its `input_sizes` `[N, H, W, C]`, or the last entry of the `Pack`
  it reads (`tf.stack([tf.shape(x)[0], H, W, C])`), a constant of its own;
  else None."""
  const = g.exclusive_const(node, 0)
  if const is not None:
    return const if g.value(const).shape == (4,) else None
  name, port = split_input(node.input[0])
  pack = g.nodes.get(name)
  users = g.consumers(name) if pack is not None else None
  if port or pack is None or pack.op != 'Pack' or len(g.inputs(pack)) != 4 \
      or not users or [u.name for u, _ in users] != [node.name] or \
      name in g.outputs:
    return None
  const = g.exclusive_const(pack, 3)
  return const if const is not None and g.value(const).shape == () else None


def _as_layer(g, node):
  """(Layer, None) for a Conv2D/MatMul/depthwise/Conv2DBackpropInput/
  Conv3D with its own const weight, (None, why) for one that is not
  shrunk, (None, None) for other ops."""
  kind = _KINDS.get(node.op)
  if kind is None:
    return None, None
  if kind != 'dense' and attr_str(node, 'data_format', 'NHWC') not in (
      'NHWC', 'NDHWC'):
    return None, 'only NHWC convolutions are shrunk'
  if kind == 'dense' and any(node.attr[k].b for k in (
      'transpose_a', 'transpose_b') if k in node.attr):
    return None, 'transposed MatMul is not shrunk'
  weight = g.exclusive_const(node, 1)
  if weight is None:
    return None, 'its weight is not a constant used by this layer only'
  layer = Layer(node, kind, weight)
  if g.value(weight).ndim != layer.rank:
    return None, 'unexpected weight rank'
  if kind == 'conv_transpose' and output_sizes(g, node) is None:
    return None, ('its output shape (input_sizes) is not a constant of its '
                  'own: the shrink cannot write its kept channel count')
  if kind in ('conv', 'conv3d'):
    # A grouped Conv2D: its filter holds in_channels / groups input
    # channels, and TF derives the groups from the two widths.
    source = g.shape(g.inputs(node)[0])
    if source and source[-1] is not None and \
        source[-1] != g.value(weight).shape[layer.in_axis]:
      return None, 'grouped convolutions are not shrunk'
  return layer, None


def find_layers(g):
  """({name: Layer} in graph order, [(node, op, why)] of layers not shrunk)."""
  layers, skipped = collections.OrderedDict(), []
  for name in g.order():
    layer, why = _as_layer(g, g.nodes[name])
    if layer is not None:
      layers[name] = layer
    elif why:
      skipped.append((name, g.nodes[name].op, why))
  return layers, skipped


def channel_const(g, node, index, channels):
  """The const input `index` of `node` if it is per channel: a scalar, `[C]`,
  `[1, .., 1, C]` or a `[1, H, W, C]` map used by `node` only; else None."""
  const = g.exclusive_const(node, index)
  if const is None:
    return None
  shape = g.value(const).shape
  if not shape or (shape[-1] == channels and (
      all(d == 1 for d in shape[:-1]) or (len(shape) == 4 and shape[0] == 1))):
    return const
  return None


def is_const(g, name):
  source, port = split_input(name)
  while source in g.nodes and port == 0:
    op = g.nodes[source].op
    if op == 'Const':
      return True
    if op not in ('Identity', 'Snapshot'):
      return False
    source, port = split_input(g.nodes[source].input[0])
  return False


def static_rank(g, name):
  shape = g.shapes.get(name)
  return None if shape is None else len(shape)


def reads_shape_only(g, node):
  """True for a StridedSlice of channel 0:1 read by Shape ops only (the ones
  channel shrink makes): it reads N, H and W, whatever the channels."""
  if node.op != 'StridedSlice' or len(node.input) != 4:
    return False
  users = g.consumers(node.name)
  if not users or any(user.op != 'Shape' for user, _ in users):
    return False
  if any(attr_int(node, k, 0) for k in ('ellipsis_mask', 'new_axis_mask',
                                        'shrink_axis_mask')):
    return False
  if any(attr_int(node, k, 0) & 8 for k in ('begin_mask', 'end_mask')):
    return False
  ends = [g.const_behind(i) for i in node.input[1:]]
  if any(e is None or np.shape(e) != (4,) for e in ends):
    return False
  return [int(e[3]) for e in ends] == [0, 1, 1]


def _batch_size_slice(g, node):
  """True for `StridedSlice(shape, [0], [1], [1])` taking one number."""
  if node.op != 'StridedSlice' or len(node.input) != 4:
    return False
  if not attr_int(node, 'shrink_axis_mask', 0) & 1 or any(
      attr_int(node, k, 0) for k in ('ellipsis_mask', 'new_axis_mask',
                                     'end_mask')):
    return False
  ends = [g.const_behind(i) for i in node.input[1:]]
  return all(e is not None and np.shape(e) == (1,) for e in ends) and \
      [int(e[0]) for e in ends] == [0, 1, 1]


def reads_batch_size_only(g, node):
  """True for a Shape whose users all take the batch size alone
  (`tf.shape(x)[0]`, as TF 1.15's `slim.flatten` does): it reads no
  channel, and the shrink changes none of what it gives."""
  users = g.consumers(node.name)   # None if an output > 0 is read
  return node.op == 'Shape' and bool(users) and all(
      _batch_size_slice(g, user) for user, _ in users)


def _batch_and_rest(g, name):
  """True for `Pack([tf.shape(x)[0], -1])`: the target `[batch, -1]`."""
  source, port = split_input(name)
  node = g.nodes.get(source)
  if port != 0 or node is None or node.op != 'Pack' or \
      len(node.input) != 2 or attr_int(node, 'axis', 0):
    return False
  first = g.nodes.get(split_input(node.input[0])[0])
  shape = None if first is None or len(first.input) != 4 else g.nodes.get(
      split_input(first.input[0])[0])
  rest = g.const_behind(node.input[1])
  return shape is not None and reads_batch_size_only(g, shape) and \
      rest is not None and np.ndim(rest) == 0 and int(rest) == -1


def _elementwise(g, found, channels):
  node = found.node
  if found.rule.value is None:
    return None, found.rule.why
  if any(is_const(g, g.inputs(node)[i]) for i in found.loose):
    return None, 'its other input is not a per-channel constant'
  if len(found.params) > 1:
    return None, 'it has more than one per-channel parameter'
  const = None
  if found.params:
    const = channel_const(g, node, found.params[0], channels)
    if const is None:
      return None, 'its other input is not a per-channel constant'
  return Op('elementwise', node, found.inputs, node.name, const, None,
            found.rule, found.loose), None


def _reshape(g, found, channels):
  node, const = found.node, None
  if node.op == 'Reshape' and not _batch_and_rest(g, node.input[1]):
    const = g.exclusive_const(node, 1)
    target = g.value(const) if const is not None else None
    if target is None or target.ndim != 1 or target[-1] not in (-1, channels):
      return None, ('only a Reshape by a constant of its own, or to [batch '
                    'size, -1], that keeps whole channels is shrunk')
  return Op('reshape', node, [0], node.name, const, found.extra,
            found.rule), None


def _slice(g, found):
  """A slice's Op: its const is the channel axis's explicit end (or size),
  when the shrink rewrites it to the kept channels (a constant of its own);
  a StridedSlice's end shared with other nodes stays valid, since it clamps
  to the channels."""
  node, (cuts, stop) = found.node, found.extra
  const = None
  if stop is not None:
    const = g.exclusive_const(node, 2)
    if const is None and node.op == 'Slice':
      return None, ('only a Slice whose size on the channel axis is -1 or a '
                    'constant of its own is shrunk')
  return Op('slice', node, [0], node.name, const, cuts, found.rule), None


def _split(g, found):
  """A Split's or SplitV's Op: its const is the size_splits of a SplitV
  of the channel axis, which the shrink rewrites (a constant of its own)."""
  node, (axis, rank, _) = found.node, found.extra
  const = None
  if node.op == 'SplitV' and axis == rank - 1:
    const = g.exclusive_const(node, 1)
    if const is None:
      return None, ('only a SplitV whose size_splits is a constant of its '
                    'own is shrunk')
  return Op('split', node, found.inputs, node.name, const, found.extra,
            found.rule), None


def outputs_of(g, op):
  """The tensors `op` writes: a split's outputs (`name`, `name:1`, ...),
  else its one output."""
  if op.kind == 'split':
    return [g.key(t) for t in g.all_outputs(op.node)]
  return [op.output]


def classify(g, node):
  """Op for a node that keeps channels apart, or (None, why) otherwise: the
  row of `tf1prune.channels`' op table, and what the shrink needs of it
  (constants used by this node only, that it can edit)."""
  found, why = classify_node(g, node)
  if found is None:
    return None, why
  channels = g.shapes[node.name][-1]
  kind = found.kind
  if kind == 'elementwise':
    return _elementwise(g, found, channels)
  if kind == 'reshape':
    return _reshape(g, found, channels)
  if kind == 'slice':
    return _slice(g, found)
  if kind == 'split':
    return _split(g, found)
  if kind == 'depthwise':
    layer, why = _as_layer(g, node)
    if layer is None:
      return None, why
    return Op(kind, node, [0], node.name, layer.weight, found.extra,
              found.rule), None
  if kind == 'concat':
    return Op(kind, node, list(range(len(found.extra))), node.name, None,
              found.extra, found.rule), None
  if kind == 'identity_n':
    return None, 'IdentityN is folded away by prepare; this one is not'
  return Op(kind, node, [0], node.name, None, found.extra, found.rule), None


def classify_node(g, node):
  """The `tf1prune.channels.ChannelOp` of `node` in the frozen view: every
  input that is not a constant carries channels."""
  return classify_channels(g, node, lambda tensor: not is_const(g, tensor))
