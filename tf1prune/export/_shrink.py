"""Removes the channels pruning emptied from a frozen graph: a smaller graph.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export._shrink import shrink_graph_def
    >>> w1 = np.ones([3, 4], np.float32); w1[:, 1] = 0.0    # output 1 is empty
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 3], name='x')
    ...   h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), [0., 2., 0., 0.]))
    ...   y = tf.nn.bias_add(tf.matmul(h, np.ones([4, 2], np.float32)), [1., 1.],
    ...                      name='y')
    >>> small, report = shrink_graph_def(g.as_graph_def(), ['y'])
    >>> [(l.outputs_before, l.outputs_after) for l in report.layers]
    [(4, 3), (2, 2)]

The removed unit still added relu(2) * w2[1, :] to `y`; that constant is now
in `y`'s bias, so `y` is unchanged.

`shrink_graph_def` works on a frozen GraphDef whose weights are constants (the
output of `strip_pruning_vars_fn`). For each Conv2D (NHWC) and MatMul layer, in
graph order, the output channels whose filter is entirely zero are removed
from the layer, and the matching inputs from the next layer. The ops between
the two must act on each channel alone: BiasAdd, Add/Mul by a per-channel
constant, Relu, Relu6, Elu, Selu, LeakyRelu, Sigmoid, Tanh, Softplus,
Identity, MaxPool, AvgPool, and a Reshape to `[N', K]` into a dense layer
(the NHWC flatten `[N, H*W*C]`, `[N*H*W, C]`, or any K that is a multiple of
C: row entry r then holds channel `r % C`). A removed channel is constant
there: `f(b)` for its bias `b` and the activations `f` (pools keep a constant
constant: max pool ignores padding, average pool divides by the valid count).
Its contribution to the next layer, `f(b) * (sum of the next layer's weights
for it)`, is added to the next layer's bias. A next conv that pads with zeros
sees the constant only at its valid taps, so near the borders the contribution
differs: that difference is added back exactly as a constant `[1, H, W, C]`
map, in a new Add node `<bias>/shrink_fold` after the next layer's bias
(`fold_borders=False`: such channels stay unless their constant is 0). A next
layer without a bias gets such an Add node for the whole contribution. (If
the node to add after is a graph output, the Add takes its name and the node
becomes `<name>/shrink_unfolded`.)

Anything else stops the shrink of that layer and the report says where and
why: an op that mixes channels (LRN, FusedBatchNorm, concat, ...) or that the
shrink does not know, a tensor used by two ops, a graph output.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export import _graph_io as graph_io
from tf1prune.export._shrink_border import constant_response, conv_pads
from tf1prune.export._shrink_graph import (FrozenGraph, attr_ints, attr_str,
                                   split_input, static_shapes)
from tf1prune.export._shrink_report import LayerShrink, ShrinkReport, ShrinkStop

__all__ = ['shrink_graph_def', 'shrink_pb', 'ShrinkReport', 'LayerShrink',
           'ShrinkStop']


def _softplus(v):
  return np.logaddexp(0.0, v)


_SELU = (1.0507009873554804934193349852946, 1.6732632423543772848170429916717)

# op type -> f(values as float64, node) for elementwise ops.
_ELEMENTWISE = {
    'Identity': lambda v, n: v,
    'Snapshot': lambda v, n: v,
    'Relu': lambda v, n: np.maximum(v, 0.0),
    'Relu6': lambda v, n: np.clip(v, 0.0, 6.0),
    'Elu': lambda v, n: np.where(v > 0, v, np.expm1(v)),
    'Selu': lambda v, n: _SELU[0] * np.where(v > 0, v, _SELU[1] * np.expm1(v)),
    'LeakyRelu': lambda v, n: np.where(
        v > 0, v, v * (n.attr['alpha'].f if 'alpha' in n.attr else 0.2)),
    'Sigmoid': lambda v, n: 1.0 / (1.0 + np.exp(-v)),
    'Tanh': lambda v, n: np.tanh(v),
    'Softplus': lambda v, n: _softplus(v),
}
_POOLS = ('MaxPool', 'AvgPool')
_MIXING = {
    'LRN': 'LRN normalizes across neighbouring channels',
    'FusedBatchNorm': 'batch norm is not folded into the layer; fold it first',
    'FusedBatchNormV2': 'batch norm is not folded into the layer; fold it '
                        'first',
    'FusedBatchNormV3': 'batch norm is not folded into the layer; fold it '
                        'first',
    'ConcatV2': 'concat mixes the channels of several tensors',
    'Concat': 'concat mixes the channels of several tensors',
    'Softmax': 'softmax mixes all channels',
    'DepthwiseConv2dNative': 'depthwise conv keeps channels apart but is not '
                             'shrunk yet',
}


_Layer = collections.namedtuple('_Layer', ['node', 'kind', 'weight'])


def _as_layer(g, node):
  """Returns (_Layer, None) for a shrinkable Conv2D/MatMul, else (None, why)."""
  if node.op == 'Conv2D':
    if attr_str(node, 'data_format', 'NHWC') != 'NHWC':
      return None, 'only NHWC convolutions are shrunk'
    kind = 'conv'
  elif node.op == 'MatMul':
    if (node.attr['transpose_a'].b if 'transpose_a' in node.attr else False) \
        or (node.attr['transpose_b'].b if 'transpose_b' in node.attr else False):
      return None, 'transposed MatMul is not shrunk'
    kind = 'dense'
  else:
    return None, None
  weight = g.exclusive_const(node, 1)
  if weight is None:
    return None, 'its weight is not a constant used by this layer only'
  if g.value(weight).ndim != (4 if kind == 'conv' else 2):
    return None, 'unexpected weight rank'
  return _Layer(node, kind, weight), None


def _channel_const(g, node, index, channels, rank):
  """Classifies the const input `index` of `node`.

  Returns:
    (const name, 'vector') for a scalar, `[C]` or `[1, .., 1, C]` constant,
    (const name, 'map') for a `[1, H, W, C]` one (a folded border map), or
    (None, None).
  """
  const = g.exclusive_const(node, index)
  if const is None:
    return None, None
  shape = g.value(const).shape
  if not shape:
    return const, 'vector'
  if shape[-1] != channels or len(shape) > rank:
    return None, None
  if all(d == 1 for d in shape[:-1]):
    return const, 'vector'
  if len(shape) == 4 and shape[0] == 1:
    return const, 'map'
  return None, None


_Step = collections.namedtuple('_Step', ['kind', 'node', 'const', 'extra'])
# rows: how many inputs of the consumer read one channel (flatten: H * W).
_Chain = collections.namedtuple('_Chain', ['steps', 'consumer', 'rows'])


def _reshape_step(g, node):
  """A reshape step, or (None, why); checked against the next layer later."""
  const = g.exclusive_const(node, 1)
  if const is None:
    return None, 'its shape is not a constant used by this reshape only'
  target = g.value(const)
  if target.ndim != 1 or target.size != 2:
    return None, 'the reshape to %s is not to a matrix [N, K]' % (
        target.tolist(),)
  return _Step('reshape', node, const, None), None


def _rows_per_channel(g, reshape, consumer, channels):
  """How many rows of the next dense layer read each channel, or (None, why).

  A row-major reshape of NHWC to [N', K] puts channel c at the positions
  r % C == c of each row when K is a multiple of C.
  """
  rows = g.value(consumer.weight).shape[0]
  target = g.value(reshape.const)
  if rows % channels or target[-1] not in (-1, rows):
    return None, ('the reshape to %s does not keep whole channel groups in the '
                  'rows of %s (%d inputs, %d channels)' % (
                      target.tolist(), consumer.node.name, rows, channels))
  return rows // channels, None


def _follow(g, layer, channels):
  """Walks from `layer` through per-channel ops to the next layer.

  Returns:
    (_Chain, None), or (None, (node name, op, reason)) where it stops.
  """
  steps, rank, name, flatten = [], 4 if layer.kind == 'conv' else 2, \
      layer.node.name, None
  while True:
    if name in g.outputs:
      return None, (name, g.nodes[name].op, 'it is a graph output')
    users = g.consumers(name)
    if users is None or len(users) != 1:
      count = 'an output other than 0' if users is None else '%d ops' % len(
          users)
      return None, (name, g.nodes[name].op, 'it feeds %s: the channels are '
                    'used elsewhere' % count)
    node, index = users[0]
    op = node.op

    def stop(reason):
      return None, (node.name, op, reason)

    if op in ('BiasAdd', 'BiasAddV1', 'Add', 'AddV2', 'Mul'):
      if op.startswith('BiasAdd') and attr_str(node, 'data_format',
                                                'NHWC') != 'NHWC':
        return stop('only NHWC BiasAdd is shrunk')
      const, kind = _channel_const(g, node, 1 - index, channels, rank)
      if const is None or (kind == 'map' and op == 'Mul'):
        return stop('its other input is not a per-channel constant')
      kind = 'scale' if op == 'Mul' else ('map' if kind == 'map' else 'bias')
      steps.append(_Step(kind, node, const, None))
    elif op in _ELEMENTWISE:
      steps.append(_Step('act', node, None, None))
    elif op in _POOLS:
      if rank != 4 or attr_str(node, 'data_format', 'NHWC') != 'NHWC':
        return stop('only NHWC pooling of conv outputs is shrunk')
      steps.append(_Step('pool', node, None, None))
    elif op == 'Reshape' and index == 0 and rank == 4:
      step, why = _reshape_step(g, node)
      if step is None:
        return stop(why)
      steps.append(step)
      flatten, rank = step, 2
    elif op in ('Conv2D', 'MatMul') and index == 0:
      consumer, why = _as_layer(g, node)
      if consumer is None:
        return stop(why)
      if (consumer.kind == 'conv') != (rank == 4):
        return stop('a %s layer after a rank-%d tensor' % (consumer.kind, rank))
      per = 1
      if flatten is not None:
        per, why = _rows_per_channel(g, flatten, consumer, channels)
        if per is None:
          return None, (flatten.node.name, 'Reshape', why)
      return _Chain(steps, consumer, per), None
    else:
      return stop(_MIXING.get(op, '%s is not among the per-channel ops the '
                              'shrink passes' % op))
    name = node.name


def _own_bias(g, layer, channels):
  """The const bias right after `layer` (BiasAdd/Add), or None."""
  if layer.node.name in g.outputs:
    return None
  users = g.consumers(layer.node.name)
  if not users or len(users) != 1:
    return None
  node, index = users[0]
  if node.op not in ('BiasAdd', 'BiasAddV1', 'Add', 'AddV2'):
    return None
  const = _channel_const(g, node, 1 - index, channels, 4)[0]
  if const is None or g.value(const).shape != (channels,):
    return None
  return const


def _pads(g, conv):
  """Zero padding of Conv2D `conv`, [(top, bottom), (left, right)].

  None if it pads (or may pad) an input of unknown size.
  """
  node = conv.node
  padding = attr_str(node, 'padding', 'VALID')
  shape = g.shapes.get(split_input(node.input[0])[0])
  known = bool(shape) and None not in shape[1:3]
  if padding == 'SAME' and not known:
    return None
  pads = conv_pads(shape[1:3] if known else None,
                   g.value(conv.weight).shape[:2],
                   attr_ints(node, 'strides', [1] * 4)[1:3],
                   attr_ints(node, 'dilations', [1] * 4)[1:3], padding,
                   attr_ints(node, 'explicit_paddings', [0] * 8))
  return pads if known or not np.any(pads) else None


def _constants(g, chain, channels):
  """Value of every channel after the chain's ops, for an all-zero input."""
  values = np.zeros(channels, np.float64)
  for step in chain.steps:
    if step.kind == 'bias':
      values = values + g.value(step.const).astype(np.float64).reshape(-1)
    elif step.kind == 'scale':
      values = values * g.value(step.const).astype(np.float64).reshape(-1)
    elif step.kind == 'map':   # constant only where the map is uniform
      value = g.value(step.const).astype(np.float64).reshape(-1, channels)
      values = values + np.where((value == value[:1]).all(axis=0), value[0],
                                 np.nan)
    elif step.kind == 'act':
      values = _ELEMENTWISE[step.node.op](values, step.node)
  return values


def _input_rows(chain, channel, channels):
  """Rows (axis -2) of the next layer's weight that read `channel`."""
  return np.arange(chain.rows) * channels + channel


def _insert_add(g, after, value):
  """Adds constant `value` to node `after`'s output with a new Add node.

  The Add takes over every consumer of `after`; if `after` is a graph output,
  the Add takes its name and `after` becomes `<after>/shrink_unfolded`.
  Returns the new const's name.
  """
  base = after + ('/shrink_unfolded' if after in g.outputs else '/shrink_fold')
  name, i = base, 1
  while name in g.nodes or name + '/value' in g.nodes:
    name, i = '%s_%d' % (base, i), i + 1
  dtype = tf.as_dtype(value.dtype).as_datatype_enum
  const = g.graph_def.node.add(name=name + '/value', op='Const')
  const.attr['dtype'].type = dtype
  add = g.graph_def.node.add(name=name, op='Add', input=[after, const.name])
  add.attr['T'].type = dtype
  if after in g.outputs:        # swap names: the output keeps its name
    original = g.nodes[after]
    original.name, add.name = name, after
    add.input[0] = name
    g.nodes[name], g.nodes[after] = original, add
    g.users[name] = [(add, 0, 0)]
    g.shapes[name] = g.shapes.get(after)
  else:
    for node, index, _ in g.users.get(after, []):
      node.input[index] = name
    g.users[name] = g.users.pop(after, [])
    g.users[after] = [(add, 0, 0)]
    g.nodes[name] = add
    g.shapes[name] = g.shapes.get(after)
  g.nodes[const.name] = const
  g.users[const.name] = [(add, 1, 0)]
  g.set_value(const.name, value)
  return const.name


def _fold(g, chain, rows, values, pads, bias, after):
  """Adds what the removed inputs `rows` (constant `values`) gave the next
  layer: the uniform part to its `bias`, the rest with a new Add."""
  consumer = chain.consumer
  weight = g.value(consumer.weight)
  repeated = np.repeat(values, rows.size // values.size)
  per_row = (weight.sum(axis=(0, 1), dtype=np.float64)
             if consumer.kind == 'conv' else weight.astype(np.float64))
  uniform = (repeated[:, None] * per_row[rows]).sum(axis=0)
  rest = None
  if consumer.kind == 'conv' and np.any(pads):
    node = consumer.node
    rest = constant_response(
        repeated, weight[:, :, rows, :],
        g.shapes[split_input(node.input[0])[0]][1:3], pads,
        attr_ints(node, 'strides', [1] * 4)[1:3],
        attr_ints(node, 'dilations', [1] * 4)[1:3])[None]
  if bias is not None:
    old = g.value(bias)
    g.set_value(bias, (old.astype(np.float64) + uniform).astype(old.dtype))
    rest = None if rest is None else rest - uniform
  elif rest is None:
    rest = uniform
  if rest is not None and np.any(rest):
    const = _insert_add(g, after, rest.astype(weight.dtype))
    g.folded.setdefault(consumer.node.name, []).append(const)


def _shrink_layer(g, layer, fold_borders):
  """Removes `layer`'s empty outputs where exact; returns a ShrinkStop or None."""
  weight = g.value(layer.weight)
  channels = weight.shape[-1]
  dead = np.flatnonzero(~weight.reshape(-1, channels).any(axis=0))
  if not dead.size:
    return None
  name = layer.node.name
  chain, where = _follow(g, layer, channels)
  if chain is None:
    return ShrinkStop(name, where[0], where[1], where[2], int(dead.size))
  consumer = chain.consumer
  values = _constants(g, chain, channels)[dead]
  bias = _own_bias(g, consumer, g.value(consumer.weight).shape[-1])
  after = (g.consumers(consumer.node.name)[0][0].name if bias is not None
           else consumer.node.name)
  pads = _pads(g, consumer) if consumer.kind == 'conv' else [(0, 0)]
  ok, why = np.isfinite(values), None
  if not ok.all():
    why = ('the empty filter is not constant: a border map added after it '
           'varies')
  limit = None
  if pads is None:
    limit = 'the input size of %s is unknown' % consumer.node.name
  elif np.any(pads) and not fold_borders:
    limit = '%s zero-pads its input (fold_borders=False)' % consumer.node.name
  if limit:
    ok &= values == 0
    why = limit + ': only channels whose constant is 0 are removed'
  if ok.all() and dead.size == channels:
    ok[0] = False   # keep one channel: no zero-sized tensors
    why = 'every output channel is empty; one is kept'
  stop = None
  if not ok.all():
    stop = ShrinkStop(name, consumer.node.name, consumer.node.op, why,
                      int((~ok).sum()))
  remove, values = dead[ok], values[ok]
  if not remove.size:
    return stop
  rows = np.concatenate([_input_rows(chain, c, channels) for c in remove])
  if np.any(values):
    _fold(g, chain, rows, values, pads, bias, after)
  keep = np.setdiff1d(np.arange(channels), remove)
  g.set_value(consumer.weight, np.delete(g.value(consumer.weight), rows,
                                         axis=-2))
  g.set_value(layer.weight, weight[..., keep])
  for step in chain.steps:
    if step.kind in ('bias', 'scale', 'map') and g.value(step.const).size > 1:
      g.set_value(step.const, g.value(step.const)[..., keep])
    elif step.kind == 'reshape' and g.value(step.const)[-1] != -1:
      target = g.value(step.const).copy()
      target[-1] = chain.rows * keep.size
      g.set_value(step.const, target)
  return stop


def _stats(g, layer):
  """(inputs, outputs, params, flops) of `layer` with the current values."""
  shape = g.value(layer.weight).shape
  bias = _own_bias(g, layer, shape[-1])
  params = int(np.prod(shape)) + (g.value(bias).size if bias else 0) + sum(
      g.value(c).size for c in g.folded.get(layer.node.name, ()) if c != bias)
  flops = 2 * int(np.prod(shape))
  if layer.kind == 'conv':
    out = g.shapes.get(layer.node.name)
    flops = flops * out[1] * out[2] if out and None not in out[1:3] else None
  return shape[-2], shape[-1], params, flops


def shrink_graph_def(graph_def, output_node_names, fold_borders=True):
  """Returns a smaller copy of frozen `graph_def` and a `ShrinkReport`.

  Args:
    graph_def: a frozen `tf.GraphDef` (weights are Const nodes, e.g. from
      `strip_pruning_vars_fn`); it is not modified.
    output_node_names: list of output node names (or a comma-separated str);
      their shapes and values do not change.
    fold_borders: when a removed channel's constant is not 0 and the next
      conv zero-pads, add what it gave the border outputs back as a constant
      `[1, H, W, C]` map (a new Add node after the next layer's bias). False:
      such channels stay.

  Returns:
    (graph_def, report): the shrunk GraphDef (same node names, smaller
    weight, bias and reshape constants, maybe new `.../shrink_fold` Add nodes;
    no `_output_shapes` attributes) and a
    `ShrinkReport` with per-layer parameters and FLOPs before and after, and
    where and why empty channels had to stay.

  Raises:
    ValueError: an output name is not in the graph, or the graph does not
      import.
  """
  if isinstance(output_node_names, str):
    output_node_names = output_node_names.split(',')
  outputs = [split_input(n.strip())[0] for n in output_node_names if n.strip()]
  if not outputs:
    raise ValueError('output_node_names is empty; name the inference outputs')
  copy = tf.GraphDef()
  copy.CopyFrom(graph_def)
  g = FrozenGraph(copy, outputs)
  g.folded = {}   # layer name -> consts added after it by _fold
  layers, skipped = [], []
  for name in g.order():
    layer, why = _as_layer(g, g.nodes[name])
    if layer is not None:
      layers.append(layer)
    elif why:
      skipped.append((name, g.nodes[name].op, why))
  before = [_stats(g, layer) for layer in layers]
  stops = []
  for layer in layers:
    stop = _shrink_layer(g, layer, fold_borders)
    if stop is not None:
      stops.append(stop)
  for const in g.changed:
    node = g.nodes[const]
    value = g.values[const]
    node.attr['value'].tensor.CopyFrom(
        tf.make_tensor_proto(value, dtype=node.attr['dtype'].type,
                             shape=value.shape))
  for node in copy.node:
    if '_output_shapes' in node.attr:
      del node.attr['_output_shapes']
  g.shapes = static_shapes(copy)
  after = [_stats(g, layer) for layer in layers]
  rows = [LayerShrink(layer.node.name, layer.node.op, b[0], a[0], b[1], a[1],
                      b[2], a[2], b[3], a[3])
          for layer, b, a in zip(layers, before, after)]
  return copy, ShrinkReport(rows, stops, outputs, skipped)


def shrink_pb(path, output_node_names, output_path=None):
  """Shrinks the binary frozen GraphDef file `path`; returns the report.

  Args:
    path: a `.pb` file, e.g. written by `strip_checkpoint`.
    output_node_names: list (or comma-separated str) of output node names.
    output_path: where to write the shrunk graph; default `path` itself. The
      file is replaced in one rename. Attributes at their op's default value
      are left out, so TF 1.15 loads what TF 2.x writes.

  Returns:
    The `ShrinkReport`, with `file_bytes_before` and `file_bytes_after` set.

  Raises:
    ValueError: `path` is not a GraphDef, or as `shrink_graph_def`.
  """
  graph_def = tf.GraphDef()
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  try:
    graph_def.ParseFromString(data)
  except Exception as e:  # protobuf's DecodeError differs by version.
    raise ValueError('%s is not a binary GraphDef: %s' % (path, e))
  small, report = shrink_graph_def(graph_def, output_node_names)
  graph_io.strip_default_attrs(small, graph_io.op_defs(small))
  out = small.SerializeToString()
  with graph_io.write_atomically(output_path or path) as f:
    f.write(out)
  report.file_bytes_before, report.file_bytes_after = len(data), len(out)
  return report
