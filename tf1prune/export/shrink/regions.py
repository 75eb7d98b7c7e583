"""Channel regions: the tensors of a frozen graph whose channels go together.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.frozen_graph import FrozenGraph
    >>> from tf1prune.export.shrink.regions import explore, find_layers
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4, 4, 2], name='x')
    ...   a = tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), [1] * 4, 'SAME', name='a')
    ...   b = tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), [1] * 4, 'SAME', name='b')
    ...   h = tf.concat([tf.nn.relu(a + b), x], 3, name='cat')
    ...   y = tf.nn.conv2d(h, tf.ones([1, 1, 5, 1]), [1] * 4, 'SAME', name='y')
    >>> view = FrozenGraph(g.as_graph_def(), ['y'])
    >>> layers, _ = find_layers(view)
    >>> region = explore(view, layers, 'a')
    >>> sorted(l.node.name for l in region.sources)
    ['a', 'b']
    >>> sorted(l.node.name for l, _ in region.sinks)   # x is in the concat
    ['a', 'b', 'y']
    >>> region.classes('cat')[:3].tolist() == region.classes('a').tolist()
    True

A region starts at the output of a Conv2D or MatMul layer and grows through
every op that keeps channels apart, both forward (to the users of a tensor)
and backward (to the producers of the other inputs of an add, a multiply or
a concat). Which ops those are, and how they tie channels, is the op table
of `tf1prune.channels` (its frozen view: every input that is not a constant
carries channels); the shrink adds what it needs to edit them: a
per-channel parameter must be a constant used by that op only, a Reshape's
target too. A `StridedSlice` of channel 0:1 read only by `Shape` (the extra
ones channel of `extra_channels`) reads no channel: it is passed by. It
ends at the inputs of the next Conv2D and MatMul layers (the sinks) and at
the layers that produce its tensors (the sources).

Channel elements of the region's tensors are tied into classes (union-find):
a class is one channel that can only be removed everywhere at once. A tensor
used by anything else (a graph output, an LRN, a shape read, ...) pins its
channels, with the reason.
"""

import collections

import numpy as np

from tf1prune.channels import UnionFind, rule_of, tie
from tf1prune.channels import classify as classify_channels
from tf1prune.export.shrink.frozen_graph import attr_str, split_input
from tf1prune.export.shrink.lrn import rewritten_lrn

Layer = collections.namedtuple('Layer', ['node', 'kind', 'weight'])
# kind: a `tf1prune.channels` kind ('elementwise', 'pool', 'pad', 'reduce',
# 'concat', 'depthwise', 'reshape'); inputs: the indices of the region's
# inputs; const: the per-channel const (elementwise), the depthwise weight or
# the reshape target, else None; extra: as the `ChannelOp`'s; rule: its row.
Op = collections.namedtuple('Op', ['kind', 'node', 'inputs', 'output',
                                   'const', 'extra', 'rule'])
_KINDS = {'Conv2D': 'conv', 'MatMul': 'dense',
          'DepthwiseConv2dNative': 'depthwise'}


def _as_layer(g, node):
  """(Layer, None) for a Conv2D/MatMul/depthwise with its own const weight,
  (None, why) for one that is not shrunk, (None, None) for other ops."""
  kind = _KINDS.get(node.op)
  if kind is None:
    return None, None
  if kind != 'dense' and attr_str(node, 'data_format', 'NHWC') != 'NHWC':
    return None, 'only NHWC convolutions are shrunk'
  if kind == 'dense' and any(node.attr[k].b for k in (
      'transpose_a', 'transpose_b') if k in node.attr):
    return None, 'transposed MatMul is not shrunk'
  weight = g.exclusive_const(node, 1)
  if weight is None:
    return None, 'its weight is not a constant used by this layer only'
  if g.value(weight).ndim != (2 if kind == 'dense' else 4):
    return None, 'unexpected weight rank'
  return Layer(node, kind, weight), None


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


def _is_const(g, name):
  source, port = split_input(name)
  while source in g.nodes and port == 0:
    op = g.nodes[source].op
    if op == 'Const':
      return True
    if op not in ('Identity', 'Snapshot'):
      return False
    source, port = split_input(g.nodes[source].input[0])
  return False


def _rank(g, name):
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
  if any(node.attr[k].i for k in ('ellipsis_mask', 'new_axis_mask',
                                  'shrink_axis_mask') if k in node.attr):
    return False
  if any(node.attr[k].i & 8 for k in ('begin_mask', 'end_mask')
         if k in node.attr):
    return False
  ends = [g.const_behind(i) for i in node.input[1:]]
  if any(e is None or np.shape(e) != (4,) for e in ends):
    return False
  return [int(e[3]) for e in ends] == [0, 1, 1]


def _elementwise(g, found, channels):
  node = found.node
  if found.rule.value is None:
    return None, found.rule.why
  if found.loose:
    return None, 'its other input is not a per-channel constant'
  if len(found.params) > 1:
    return None, 'it has more than one per-channel parameter'
  const = None
  if found.params:
    const = channel_const(g, node, found.params[0], channels)
    if const is None:
      return None, 'its other input is not a per-channel constant'
  return Op('elementwise', node, found.inputs, node.name, const, None,
            found.rule), None


def _reshape(g, found, channels):
  node, const = found.node, None
  if node.op == 'Reshape':
    const = g.exclusive_const(node, 1)
    target = g.value(const) if const is not None else None
    if target is None or target.ndim != 1 or target[-1] not in (-1, channels):
      return None, ('only a Reshape by a constant of its own that keeps '
                    'whole channels is shrunk')
  return Op('reshape', node, [0], node.name, const, found.extra,
            found.rule), None


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
  return classify_channels(g, node, lambda tensor: not _is_const(g, tensor))


class Region(object):
  """Tensors whose channels are tied, with their sources, sinks and pins."""

  def __init__(self):
    self.ids = collections.OrderedDict()  # tensor -> element ids
    self.sets = UnionFind()
    self.ops = []
    self.sources = []     # Layer
    self.sinks = []       # (Layer, tensor)
    self.pins = []        # (tensor, (node, op, reason))
    self.broken = None    # (node, op, reason): channels do not line up

  def add(self, tensor, channels):
    self.ids[tensor] = self.sets.add(channels)

  def classes(self, tensor):
    return np.array([self.sets.find(i) for i in self.ids[tensor]], np.int64)


def _tie(region, op):
  """Unions the channel elements that `op` ties; False if they do not fit."""
  ids = {i: list(region.ids[split_input(op.node.input[i])[0]])
         for i in op.inputs}
  return tie(region.sets, op, ids, list(region.ids[op.output]))


def explore(g, layers, start):
  """The Region around the output tensor `start` of a layer in `layers`."""
  region, seen, queue = Region(), set(), []

  def add_tensor(name, at):
    if name in region.ids:
      return True
    shape = g.shapes.get(name)
    if not shape or shape[-1] is None:
      region.broken = (at.name, at.op, 'the channels of %s are unknown' % name)
      return False
    region.add(name, shape[-1])
    queue.append(name)
    return True

  def add_op(op):
    seen.add(op.node.name)
    names = [split_input(op.node.input[i]) for i in op.inputs]
    if any(port != 0 for _, port in names):
      region.broken = (op.node.name, op.node.op, 'it reads an output other '
                       'than 0')
      return
    for name in [n for n, _ in names] + [op.output]:
      if not add_tensor(name, op.node):
        return
    region.ops.append(op)
    if not _tie(region, op):
      region.broken = (op.node.name, op.node.op, 'its channels do not line up')

  def pin(tensor, node, reason):
    where = (node.name, node.op)
    lrn = rewritten_lrn(g, node.name)
    if lrn is not None:   # the ops an LRN became still normalize
      where, reason = (lrn, 'LRN'), rule_of('LRN').why
    region.pins.append((tensor, where + (reason,)))

  region.sources.append(layers[start])
  add_tensor(start, g.nodes[start])
  while queue and region.broken is None:
    tensor = queue.pop(0)
    producer = g.nodes[tensor]
    layer = layers.get(tensor)
    if layer is not None and layer.kind != 'depthwise':
      if layer not in region.sources:
        region.sources.append(layer)
    elif tensor not in seen:
      op, why = classify(g, producer)
      if op is None:
        pin(tensor, producer, 'its channels come from this %s, which the '
            'shrink does not remove' % producer.op)
      else:
        add_op(op)
    if tensor in g.outputs:
      pin(tensor, producer, 'it is a graph output')
    for user, index, port in g.users.get(tensor, []):
      if port != 0:
        pin(tensor, user, 'an output other than 0 is used')
        continue
      layer = layers.get(user.name)
      if layer is not None and layer.kind != 'depthwise':
        rank = _rank(g, tensor)
        if index != 0 or rank != (4 if layer.kind == 'conv' else 2):
          pin(tensor, user, 'it is not the data input of this layer')
        elif (layer, tensor) not in region.sinks:
          region.sinks.append((layer, tensor))
        continue
      if user.name in seen or reads_shape_only(g, user):
        continue
      op, why = classify(g, user)
      if op is not None and index not in op.inputs:
        op, why = None, 'it reads the tensor as a parameter'
      if op is None:
        pin(tensor, user, why)
      else:
        add_op(op)
  return region
