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
every op whose output channel `c` depends on input channels `c` only, both
forward (to the users of a tensor) and backward (to the producers of the
other inputs of an add or a concat): activations, BiasAdd/Add/Sub/Mul by a
per-channel constant or a `[1, H, W, C]` map, pools, spatial Pad, a spatial
Mean or Squeeze, residual Add/AddV2/Sub of two tensors, ConcatV2 on the
channel axis, DepthwiseConv2dNative (input channel k feeds outputs
`k * m .. k * m + m - 1`), and a Reshape of NHWC to `[N, K]` (row `r` reads
channel `r % C`). A `StridedSlice` of channel 0:1 read only by `Shape` (the
extra ones channel of `extra_channels`) reads no channel: it is passed by. It ends at the inputs of the next Conv2D and MatMul layers
(the sinks) and at the layers that produce its tensors (the sources).

Channel elements of the region's tensors are tied into classes (union-find):
a class is one channel that can only be removed everywhere at once. A tensor
used by anything else (a graph output, an LRN, a shape read, ...) pins its
channels, with the reason.
"""

import collections

import numpy as np

from tf1prune.export.shrink.frozen_graph import attr_ints, attr_str, split_input


def _softplus(v):
  return np.logaddexp(0.0, v)


_SELU = (1.0507009873554804934193349852946, 1.6732632423543772848170429916717)

# op type -> f(values as float64, node) for elementwise ops.
ELEMENTWISE = {
    'Identity': lambda v, n: v,
    'Snapshot': lambda v, n: v,
    'Relu': lambda v, n: np.maximum(v, 0.0),
    'Relu6': lambda v, n: np.clip(v, 0.0, 6.0),
    'Elu': lambda v, n: np.where(v > 0, v, np.expm1(np.minimum(v, 0.0))),
    'Selu': lambda v, n: _SELU[0] * np.where(
        v > 0, v, _SELU[1] * np.expm1(np.minimum(v, 0.0))),
    'LeakyRelu': lambda v, n: np.where(
        v > 0, v, v * (n.attr['alpha'].f if 'alpha' in n.attr else 0.2)),
    'Sigmoid': lambda v, n: 1.0 / (1.0 + np.exp(-v)),
    'Tanh': lambda v, n: np.tanh(v),
    'Softplus': lambda v, n: _softplus(v),
}
_MIXING = {
    'LRN': 'LRN normalizes across neighbouring channels',
    'FusedBatchNorm': 'batch norm in training form (or with statistics that '
                      'are not constants) is not folded',
    'Concat': 'concat with the axis first (Concat v1) is not shrunk',
    'Softmax': 'softmax mixes all channels',
    'Shape': 'it reads the shape, which the shrink changes',
}
for _v in ('FusedBatchNormV2', 'FusedBatchNormV3'):
  _MIXING[_v] = _MIXING['FusedBatchNorm']

Layer = collections.namedtuple('Layer', ['node', 'kind', 'weight'])
# kind: 'act', 'add', 'sub', 'rsub', 'mul' (const), 'sum', 'diff', 'pool',
# 'pad', 'mean', 'squeeze', 'concat', 'depthwise', 'flatten'.
Op = collections.namedtuple('Op', ['kind', 'node', 'inputs', 'output',
                                   'const', 'extra'])
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



def _binary(g, node, channels):
  op, consts = node.op, [_is_const(g, i) for i in node.input[:2]]
  if not any(consts):
    shapes = [g.shapes.get(split_input(i)[0]) for i in node.input[:2]]
    if op == 'Mul':
      return None, 'it multiplies two tensors: the shrink does not pass it'
    if op not in ('Add', 'AddV2', 'Sub'):
      return None, 'its other input is not a per-channel constant'
    if None in shapes or any(not s or s[-1] != channels or len(s) != len(
        shapes[0]) for s in shapes):
      return None, 'its inputs do not line up channel by channel'
    return Op('sum' if op != 'Sub' else 'diff', node, [0, 1], node.name,
              None, None), None
  index = 0 if consts[1] else 1    # the tensor input
  shape = g.shapes.get(split_input(node.input[index])[0])
  if shape and shape[-1] is not None and shape[-1] != channels:
    return None, 'it spreads its input over the channels of a constant'
  const = channel_const(g, node, 1 - index, channels)
  if const is None:
    return None, 'its other input is not a per-channel constant'
  kind = {'Add': 'add', 'AddV2': 'add', 'BiasAdd': 'add', 'BiasAddV1': 'add',
          'Mul': 'mul', 'Sub': 'sub' if index == 0 else 'rsub'}[op]
  return Op(kind, node, [index], node.name, const, None), None


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


def classify(g, node):
  """Op for a node that keeps channels apart, or (None, why) otherwise."""
  op, name = node.op, node.name
  out = g.shapes.get(name)
  if not out or out[-1] is None:
    return None, 'its output shape is unknown'
  channels, rank = out[-1], len(out)
  nhwc = attr_str(node, 'data_format', 'NHWC') in ('NHWC', 'N...C')
  if op in ELEMENTWISE:
    return Op('act', node, [0], name, None, None), None
  if op in ('BiasAdd', 'BiasAddV1', 'Add', 'AddV2', 'Sub', 'Mul'):
    if not nhwc:
      return None, 'only NHWC BiasAdd is shrunk'
    return _binary(g, node, channels)
  if op in ('MaxPool', 'AvgPool'):
    if rank != 4 or not nhwc:
      return None, 'only NHWC pooling is shrunk'
    return Op('pool', node, [0], name, None, None), None
  if op in ('Pad', 'PadV2'):
    pads = g.const_behind(node.input[1])
    fill = g.const_behind(node.input[2]) if op == 'PadV2' else np.zeros(())
    if pads is None or fill is None or pads.shape != (4, 2) or \
        np.any(pads[[0, 3]]) or fill.size != 1:
      return None, 'only a constant Pad of the height and width is shrunk'
    return Op('pad', node, [0], name, None, (pads[1:3].tolist(),
                                             float(fill.reshape(-1)[0]))), None
  if op == 'Mean':
    axes = g.const_behind(node.input[1])
    keep = node.attr['keep_dims'].b if 'keep_dims' in node.attr else False
    source_rank = _rank(g, split_input(node.input[0])[0])
    if axes is None or source_rank != 4 or \
        set((np.asarray(axes).reshape(-1) % 4).tolist()) != {1, 2}:
      return None, 'only a Mean over height and width is shrunk'
    return Op('mean', node, [0], name, None, keep), None
  if op == 'Squeeze':
    dims = set(d % 4 for d in attr_ints(node, 'squeeze_dims', []))
    if _rank(g, split_input(node.input[0])[0]) != 4 or dims != {1, 2}:
      return None, 'only a Squeeze of height and width is shrunk'
    return Op('squeeze', node, [0], name, None, None), None
  if op == 'ConcatV2':
    count = node.attr['N'].i
    axis = g.const_behind(node.input[count])
    if axis is None or int(axis) % rank != rank - 1:
      return None, 'concat not on the channel axis mixes channels'
    return Op('concat', node, list(range(count)), name, None, None), None
  if op == 'DepthwiseConv2dNative':
    layer, why = _as_layer(g, node)
    if layer is None:
      return None, why
    return Op('depthwise', node, [0], name, layer.weight, layer), None
  if op == 'Reshape':
    return _flatten(g, node)
  return None, _MIXING.get(op, '%s is not among the ops the shrink passes' % op)


def _flatten(g, node):
  source = g.shapes.get(split_input(node.input[0])[0])
  target = g.exclusive_const(node, 1)
  if not source or len(source) != 4 or source[-1] is None or target is None:
    return None, 'only a Reshape of NHWC to [N, K] by a constant is shrunk'
  shape = g.value(target)
  width = g.shapes[node.name][-1] if g.shapes.get(node.name) else None
  users = g.consumers(node.name)
  if width is None and users and len(users) == 1 and \
      users[0][0].op == 'MatMul' and users[0][1] == 0:
    weight = g.exclusive_const(users[0][0], 1)
    width = g.value(weight).shape[0] if weight is not None else None
  if shape.ndim != 1 or shape.size != 2 or width is None or \
      width % source[-1] or shape[-1] not in (-1, width):
    return None, ('the reshape to %s does not keep whole channels in the '
                  'rows of a matrix [N, K]' % (shape.tolist(),))
  return Op('flatten', node, [0], node.name, target, width // source[-1]), None


class Region(object):
  """Tensors whose channels are tied, with their sources, sinks and pins."""

  def __init__(self):
    self.ids = collections.OrderedDict()  # tensor -> element ids
    self.parent = []
    self.ops = []
    self.sources = []     # Layer
    self.sinks = []       # (Layer, tensor)
    self.pins = []        # (tensor, (node, op, reason))
    self.broken = None    # (node, op, reason): channels do not line up

  def add(self, tensor, channels):
    start = len(self.parent)
    self.parent.extend(range(start, start + channels))
    self.ids[tensor] = np.arange(start, start + channels)

  def find(self, i):
    root = i
    while self.parent[root] != root:
      root = self.parent[root]
    while self.parent[i] != root:
      self.parent[i], i = root, self.parent[i]
    return root

  def union(self, a, b):
    for i, j in zip(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)):
      i, j = self.find(int(i)), self.find(int(j))
      if i != j:
        self.parent[max(i, j)] = min(i, j)

  def classes(self, tensor):
    return np.array([self.find(int(i)) for i in self.ids[tensor]], np.int64)


def _tie(region, op):
  """Unions the channel elements that `op` ties; False if they do not fit."""
  ids = region.ids
  out = ids[op.output]
  inputs = [ids[split_input(op.node.input[i])[0]] for i in op.inputs]
  if op.kind == 'concat':
    if sum(i.size for i in inputs) != out.size:
      return False
    offset = 0
    for i in inputs:
      region.union(i, out[offset:offset + i.size])
      offset += i.size
    return True
  if op.kind in ('depthwise', 'flatten'):
    if out.size % inputs[0].size:
      return False
    per = out.size // inputs[0].size
    grid = out.reshape(-1, per) if op.kind == 'depthwise' else \
        out.reshape(per, -1).T
    if grid.shape[0] != inputs[0].size:
      return False
    for column in grid.T:
      region.union(inputs[0], column)
    return True
  if any(i.size != out.size for i in inputs):
    return False
  for i in inputs:
    region.union(i, out)
  return True


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
    region.pins.append((tensor, (node.name, node.op, reason)))

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
