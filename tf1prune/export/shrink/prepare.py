"""Before a shrink: fold constant sub-graphs and batch norms into the layers.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.prepare import prepare_graph_def
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4, 4, 2], name='x')
    ...   h = tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), [1, 1, 1, 1], 'SAME')
    ...   y, _, _ = tf.nn.fused_batch_norm(
    ...       h, tf.constant([1., 2., 3.]), tf.zeros([3]), tf.zeros([3]),
    ...       tf.ones([3]), epsilon=0.0, is_training=False, name='y')
    >>> small = prepare_graph_def(g.as_graph_def(), ['y'])
    >>> sorted(n.op for n in small.node)
    ['BiasAdd', 'Const', 'Const', 'Conv2D', 'Placeholder']

`prepare_graph_def` returns a copy of a frozen GraphDef in which

- every node computed from constants only (a batch-norm scale
  `gamma * rsqrt(variance + epsilon)` built by `tf.nn.batch_normalization`
  from variables that are now frozen, a `tf.ones` gamma, ...) is a Const,
  evaluated once in a tiny session of the running TensorFlow;
- every FusedBatchNorm / V2 / V3 in inference form (`is_training=False`,
  NHWC, constant statistics, only its first output used) is a `Mul` by
  `gamma / sqrt(variance + epsilon)` and a `BiasAdd` of
  `beta - mean * gamma / sqrt(variance + epsilon)`; the BiasAdd keeps the
  batch norm's name;
- a `Mul` by a per-channel constant right after a Conv2D, MatMul or
  DepthwiseConv2dNative (maybe behind its BiasAdd), whose weight is a constant
  of its own, is folded into that weight (and bias) and leaves the graph;
- an `Add` / `AddV2` of a layer's output and a `[C]` constant is a
  `BiasAdd` (TF 2.x's grappler remapper fails on a conv, an `AddV2` and a
  hard-swish).

- readers of an `IdentityN` (`tf.custom_gradient`'s wrapper of swish and
  silu) read its inputs directly.

Constants nothing reads any more leave the graph too.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.attrs import op_defs
from tf1prune.export.shrink.frozen_graph import FrozenGraph, attr_str, split_input
from tf1prune.export.stream import const_node

_BATCH_NORMS = ('FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3')
_LAYERS = ('Conv2D', 'MatMul', 'DepthwiseConv2dNative')
# Never evaluated ahead: they read feeds, state or randomness.
_NOT_FOLDED = ('Placeholder', 'PlaceholderWithDefault', 'PlaceholderV2',
               'Const', 'Identity', 'Snapshot')


def _references(graph_def):
  """{node name: number of inputs (data or control) naming it}."""
  count = {}
  for node in graph_def.node:
    for name in node.input:
      source = split_input(name)[0]
      count[source] = count.get(source, 0) + 1
  return count


def _remove_orphans(graph_def, outputs, candidates):
  """Deletes the `candidates` nothing reads (and what only they read)."""
  nodes = {n.name: n for n in graph_def.node}
  count = _references(graph_def)
  pending, dead = list(candidates), set()
  while pending:
    name = pending.pop()
    if name in dead or name in outputs or count.get(name, 0) or \
        name not in nodes:
      continue
    dead.add(name)
    for source in nodes[name].input:
      source = split_input(source)[0]
      count[source] -= 1
      pending.append(source)
  if dead:
    kept = [n for n in graph_def.node if n.name not in dead]
    del graph_def.node[:]
    graph_def.node.extend(kept)


def _set_const(node, value, dtype):
  """Turns `node` into a Const holding `value`, keeping its name."""
  node.op = 'Const'
  del node.input[:]
  node.ClearField('attr')
  node.attr['dtype'].type = tf.as_dtype(dtype).as_datatype_enum
  node.attr['value'].tensor.CopyFrom(
      tf.make_tensor_proto(value, dtype=dtype, shape=value.shape))


def _ancestors(graph_def, nodes, names):
  """The sub-graph of `names` and every node they read, in graph order."""
  keep, pending = set(), list(names)
  while pending:
    name = pending.pop()
    if name not in keep:
      keep.add(name)
      pending.extend(split_input(i)[0] for i in nodes[name].input)
  sub = tf.GraphDef()
  sub.versions.CopyFrom(graph_def.versions)
  sub.library.CopyFrom(graph_def.library)
  sub.node.extend([n for n in graph_def.node if n.name in keep])
  return sub


def fold_constants(graph_def, outputs):
  """Replaces, in place, each node computed from constants only by a Const.

  Only the nodes read by a non-constant node are evaluated (all in one
  `Session.run`); what they read and nothing else reads is deleted.

  Args:
    graph_def: a frozen `GraphDef`, edited in place.
    outputs: names of the graph outputs; they are left as they are.

  Returns:
    The number of nodes replaced by constants.
  """
  nodes = {n.name: n for n in graph_def.node}
  defs = op_defs(graph_def)
  constant = {}

  def is_constant(name):
    stack = [name]
    while stack:
      current = stack[-1]
      if current in constant:
        stack.pop()
        continue
      node = nodes.get(current)
      if node is None:
        constant[current] = False
        stack.pop()
        continue
      if node.op == 'Const':
        constant[current] = True
        stack.pop()
        continue
      op_def = defs.get(node.op)
      inputs = [split_input(i) for i in node.input]
      if (node.op in _NOT_FOLDED[:3] or op_def is None or op_def.is_stateful
          or not inputs or any(port < 0 for _, port in inputs)):
        constant[current] = False
        stack.pop()
        continue
      todo = [s for s, _ in inputs if s not in constant]
      if todo:
        stack.extend(todo)
        continue
      constant[current] = all(constant[s] for s, _ in inputs)
      stack.pop()
    return constant[name]

  targets = []
  for node in graph_def.node:
    if is_constant(node.name):
      continue
    for source, port in (split_input(i) for i in node.input):
      if port != 0 or source in outputs or source in targets or \
          not is_constant(source):
        continue
      op = nodes[source].op
      if op == 'Const' or (op in _NOT_FOLDED and nodes[split_input(
          nodes[source].input[0])[0]].op == 'Const'):
        continue
      targets.append(source)
  # A node whose other outputs are read stays: only output 0 is folded.
  multi = set(split_input(i)[0] for n in graph_def.node for i in n.input
              if split_input(i)[1] > 0)
  targets = [t for t in targets if t not in multi]
  if not targets:
    return 0
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(_ancestors(graph_def, nodes, targets), name='')
    tensors = [graph.get_tensor_by_name(t + ':0') for t in targets]
    with tf.Session(graph=graph) as sess:
      values = sess.run(tensors)
  inputs = set()
  for name, tensor, value in zip(targets, tensors, values):
    inputs.update(split_input(i)[0] for i in nodes[name].input)
    _set_const(nodes[name], np.asarray(value), tensor.dtype)
  _remove_orphans(graph_def, set(outputs), inputs)
  return len(targets)



def _new_const(graph_def, name, value):
  node = const_node(name, tf.as_dtype(value.dtype).as_datatype_enum)
  node.attr['value'].tensor.CopyFrom(
      tf.make_tensor_proto(value, dtype=value.dtype, shape=value.shape))
  graph_def.node.extend([node])
  return name


def _unique(g, name):
  base, i = name, 1
  while name in g.nodes or name in g.reserved:
    name, i = '%s_%d' % (base, i), i + 1
  g.reserved.add(name)
  return name


def _batch_norms_to_scale_and_offset(g):
  """Rewrites inference batch norms; returns the names of inputs let go."""
  let_go = []
  g.reserved = set()
  for node in list(g.graph_def.node):
    if node.op not in _BATCH_NORMS:
      continue
    training = node.attr['is_training'].b if 'is_training' in node.attr \
        else True
    users = g.users.get(node.name, [])
    if training or attr_str(node, 'data_format', 'NHWC') != 'NHWC' or \
        any(port != 0 for _, _, port in users):
      continue
    stats = [g.const_behind(node.input[i]) for i in range(1, 5)]
    if any(s is None for s in stats):
      continue
    epsilon = node.attr['epsilon'].f if 'epsilon' in node.attr else 1e-4
    gamma, beta, mean, variance = [np.asarray(s, np.float64) for s in stats]
    scale = gamma / np.sqrt(variance + epsilon)
    offset = beta - mean * scale
    dtype = tf.as_dtype(node.attr['T'].type).as_numpy_dtype
    inputs = list(node.input)
    scale_name = _new_const(g.graph_def, _unique(g, node.name + '/shrink_scale'),
                            scale.astype(dtype))
    mul = g.graph_def.node.add(name=_unique(g, node.name + '/shrink_mul'),
                               op='Mul', input=[inputs[0], scale_name])
    mul.attr['T'].type = node.attr['T'].type
    offset_name = _new_const(g.graph_def,
                             _unique(g, node.name + '/shrink_offset'),
                             offset.astype(dtype))
    t = node.attr['T'].type
    node.op = 'BiasAdd'
    node.ClearField('attr')
    node.attr['T'].type = t
    del node.input[:]
    node.input.extend([mul.name, offset_name] +
                      [i for i in inputs if i.startswith('^')])
    let_go.extend(split_input(i)[0] for i in inputs[1:])
  return let_go


def _scaled_layer(g, name):
  """(layer node, weight const, bias const or None) if `name` is a layer
  output, maybe behind its BiasAdd, that only the next op reads."""
  def only_user(n):
    users = g.consumers(n)
    return n not in g.outputs and users is not None and len(users) == 1

  node, bias = g.nodes.get(name), None
  if node is None or not only_user(name):
    return None
  if node.op in ('BiasAdd', 'Add', 'AddV2'):
    for index in (0, 1):
      const = g.exclusive_const(node, 1 - index)
      source, port = split_input(node.input[index])
      if const is not None and g.value(const).ndim == 1 and port == 0:
        bias, name = const, source
        break
    if bias is None:
      return None
    node = g.nodes.get(name)
    if node is None or not only_user(name):
      return None
  if node.op not in _LAYERS or attr_str(node, 'data_format', 'NHWC') != \
      'NHWC' or any(node.attr[k].b for k in ('transpose_a', 'transpose_b')
                    if k in node.attr):
    return None
  weight = g.exclusive_const(node, 1)
  if weight is None:
    return None
  return node, weight, bias


def _fold_scales(g):
  """Folds per-channel Muls into the layer before them; returns let go."""
  let_go = []
  for mul in list(g.graph_def.node):
    if mul.op != 'Mul':
      continue
    for index in (0, 1):
      const = g.exclusive_const(mul, 1 - index)
      source, port = split_input(mul.input[index])
      if const is None or port != 0:
        continue
      found = _scaled_layer(g, source)
      if found is None:
        continue
      layer, weight, bias = found
      w, s = g.value(weight), g.value(const)
      outputs = w.shape[-1]
      if layer.op == 'DepthwiseConv2dNative':
        outputs = w.shape[-2] * w.shape[-1]
      if s.size not in (1, outputs) or (s.size > 1 and s.shape[-1] != outputs) \
          or any(d != 1 for d in s.shape[:-1]):
        continue
      s64 = s.astype(np.float64).reshape(-1)
      if layer.op == 'DepthwiseConv2dNative' and s64.size > 1:
        s64 = s64.reshape(w.shape[-2:])
      g.set_value(weight, (w.astype(np.float64) * s64).astype(w.dtype))
      if bias is not None:
        b = g.value(bias)
        g.set_value(bias, (b.astype(np.float64) * s64.reshape(-1)).astype(
            b.dtype))
      if mul.name in g.outputs:     # keeps its name as an Identity
        t = mul.attr['T'].type
        mul.op = 'Identity'
        mul.ClearField('attr')
        mul.attr['T'].type = t
        del mul.input[:]
        mul.input.append(source)
      else:
        for user, i, _ in g.users.get(mul.name, []):
          user.input[i] = source
        g.users[source] = g.users.pop(mul.name, [])
        let_go.append(mul.name)
      let_go.append(const)
      break
  return let_go


def _output_channels(layer, nodes):
  """The size of the last dim of an NHWC `layer`'s output, read from its
  constant weight; None when the weight is not a constant or the layout
  is not NHWC (there a `[C]` add may broadcast, which `BiasAdd` does not)."""
  weight = nodes.get(split_input(layer.input[1])[0])
  if weight is None or weight.op != 'Const' or \
      attr_str(layer, 'data_format', 'NHWC') != 'NHWC':
    return None
  dims = [d.size for d in weight.attr['value'].tensor.tensor_shape.dim]
  if layer.op == 'DepthwiseConv2dNative':
    return dims[-2] * dims[-1]
  if layer.op == 'MatMul' and layer.attr['transpose_b'].b:
    return dims[0]
  return dims[-1]


def _adds_to_bias_adds(graph_def):
  """An `Add` / `AddV2` of a layer's output and a `[C]` constant (an
  unfused batch norm's offset, once its scale is folded) becomes the
  `BiasAdd` it is: TF 2.x's grappler remapper fails on a conv, an `AddV2`
  and a hard-swish (`x * relu6(x + 3) / 6`), logs `remapper failed` and
  then fuses nothing in the graph."""
  nodes = dict((n.name, n) for n in graph_def.node)
  for node in graph_def.node:
    if node.op not in ('Add', 'AddV2') or len(node.input) != 2:
      continue
    for index in (0, 1):
      source, port = split_input(node.input[index])
      const = nodes.get(split_input(node.input[1 - index])[0])
      layer = nodes.get(source)
      if (port != 0 or layer is None or layer.op not in _LAYERS or
          const is None or const.op != 'Const'):
        continue
      shape = const.attr['value'].tensor.tensor_shape
      if len(shape.dim) != 1 or shape.dim[0].size < 2 or \
          shape.dim[0].size != _output_channels(layer, nodes):
        continue
      inputs = [node.input[index], node.input[1 - index]]
      del node.input[:]
      node.input.extend(inputs)
      node.op = 'BiasAdd'
      break


def _bypass_identity_n(graph_def, outputs):
  """Readers of `IdentityN:k` read its input k instead (the wrapper that
  `tf.custom_gradient` puts around swish / silu); IdentityN nodes that are
  not outputs then leave the graph."""
  nodes = dict((n.name, n) for n in graph_def.node)
  bypassed = set(n.name for n in graph_def.node
                 if n.op == 'IdentityN' and n.name not in outputs)
  if not bypassed:
    return
  for node in graph_def.node:
    for index, ref in enumerate(node.input):
      name, port = split_input(ref)
      if name in bypassed and port >= 0:
        node.input[index] = nodes[name].input[port]
  _remove_orphans(graph_def, outputs, bypassed)


def prepare_graph_def(graph_def, outputs):
  """Returns a copy of `graph_def`, constants and batch norms folded.

  Args:
    graph_def: a frozen `GraphDef`; it is not modified.
    outputs: the output node names; they keep their names and values.

  Returns:
    The rewritten `GraphDef` (see the module docstring).
  """
  copy = tf.GraphDef()
  copy.CopyFrom(graph_def)
  for node in copy.node:
    if '_output_shapes' in node.attr:
      del node.attr['_output_shapes']
  outputs = set(outputs)
  _bypass_identity_n(copy, outputs)
  fold_constants(copy, outputs)
  g = FrozenGraph(copy, outputs)
  let_go = _batch_norms_to_scale_and_offset(g)
  if let_go:
    _remove_orphans(copy, outputs, let_go)
    g = FrozenGraph(copy, outputs)
  let_go = _fold_scales(g)
  for const in g.changed:
    node = g.nodes[const]
    node.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(
        g.values[const], dtype=node.attr['dtype'].type,
        shape=g.values[const].shape))
  _remove_orphans(copy, outputs, let_go)
  _adds_to_bias_adds(copy)
  return copy
