"""Frozen inference graphs from pruning checkpoints: masks folded into weights.

    >>> import tf1prune
    >>> report = tf1prune.strip_checkpoint(            # doctest: +SKIP
    ...     '/tmp/train', ['logits/BiasAdd'], '/tmp/out/pruning_stripped.pb')
    >>> print(report.format_table())                   # doctest: +SKIP

`graph_def_from_checkpoint` freezes the latest checkpoint of a directory
(variables become constants read straight from the checkpoint);
`strip_pruning_vars_fn` replaces each `.../masked_weight` multiply of a frozen
graph by a constant `weight * mask` and drops what the outputs no longer need
(masks, thresholds, raw weights). `strip_checkpoint` does both, writes the
result atomically and returns a `StripReport`, holding about one layer's
weights at a time: values are read from the checkpoint only while their node
is written.

The written GraphDef loads in TF 1.15 and TF 2.x: attributes at their op's
default value are not written, devices are cleared.
"""

import collections
import re

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune import graph_io
from tf1prune.report import LayerStats, StripReport

__all__ = ['graph_def_from_checkpoint', 'strip_checkpoint',
           'strip_pruning_vars_fn', 'StripReport']

_VARIABLE_OPS = ('VariableV2', 'Variable', 'VarHandleOp')
_REF_OPS = {'RefIdentity': 'Identity', 'RefEnter': 'Enter',
            'RefSwitch': 'Switch', 'RefMerge': 'Merge', 'RefExit': 'Exit',
            'RefNextIteration': 'NextIteration', 'RefSelect': 'Select'}
# Ops that pass a value (or a resource handle) through unchanged, with attr T.
_PASS_THROUGH = ('Identity', 'Snapshot', 'Enter', 'Switch', 'Merge', 'Exit',
                 'NextIteration')
_MASKED_WEIGHT = re.compile(r'(^|/)masked_weight(_\d+)?$')
_MASK = re.compile(r'(^|/)mask(_\d+)?$')
_RESOURCE = tf.resource.as_datatype_enum


def _split_input(name):
  """'^a' -> ('a', -1); 'a:2' -> ('a', 2); 'a' -> ('a', 0)."""
  if name.startswith('^'):
    return name[1:], -1
  node, sep, port = name.rpartition(':')
  if sep and port.isdigit():
    return node, int(port)
  return name, 0


def _output_names(output_node_names):
  """Normalizes a list or comma-separated str of node (or tensor) names."""
  if isinstance(output_node_names, str):
    output_node_names = output_node_names.split(',')
  names = [_split_input(n.strip())[0] for n in output_node_names or ()
           if n.strip()]
  if not names:
    raise ValueError('output_node_names is empty; name the inference '
                     "outputs, e.g. ['logits/BiasAdd']")
  return names


class _LazyGraph(object):
  """A GraphDef whose big constants are produced on demand.

  Attributes:
    graph_def: the structure; a node in `values` is a Const without `value`.
    values: {node name: () -> ndarray or TensorProto}.
  """

  def __init__(self, graph_def, values):
    self.graph_def = graph_def
    self.values = values

  def source(self, name):
    """Returns a thunk giving the value of Const `name` as an ndarray.

    The thunk keeps working after `name` is pruned from the graph.
    """
    if name in self.values:
      thunk = self.values[name]
    else:
      proto = self.node(name).attr['value'].tensor
      thunk = lambda: proto
    def read():
      value = thunk()
      return value if isinstance(value, np.ndarray) else tf.make_ndarray(value)
    return read

  def node(self, name):
    for node in self.graph_def.node:
      if node.name == name:
        return node
    raise KeyError(name)


def _nodes_by_name(graph_def):
  return {node.name: node for node in graph_def.node}


def _check_outputs(graph_def, outputs, where):
  names = _nodes_by_name(graph_def)
  missing = [n for n in outputs if n not in names]
  if missing:
    raise ValueError('output node%s %s not found in %s; check '
                     'output_node_names (the graph has %d nodes)' % (
                         's' if len(missing) > 1 else '', ', '.join(repr(n) for n in missing), where,
                         len(names)))


def _reachable(graph_def, outputs):
  """Names of the nodes `outputs` depend on (data and control inputs)."""
  nodes = _nodes_by_name(graph_def)
  seen = set()
  stack = list(outputs)
  while stack:
    name = stack.pop()
    if name in seen:
      continue
    if name not in nodes:
      raise ValueError('the graph is broken: node %r is an input but does not '
                       'exist' % name)
    seen.add(name)
    stack.extend(_split_input(i)[0] for i in nodes[name].input)
  return seen


def _attr_functions(attr_map):
  for value in attr_map.values():
    if value.HasField('func'):
      yield value.func.name
    for func in value.list.func:
      yield func.name


def _prune(lazy, outputs):
  """Keeps the nodes and library functions `outputs` need, in order."""
  graph_def = lazy.graph_def
  keep = _reachable(graph_def, outputs)
  kept = [node for node in graph_def.node if node.name in keep]
  functions = {f.signature.name: f for f in graph_def.library.function}
  used = set()
  stack = []
  for node in kept:
    stack.extend(_attr_functions(node.attr))
    stack.append(node.op)
  while stack:
    name = stack.pop()
    if name in used or name not in functions:
      continue
    used.add(name)
    for node in functions[name].node_def:
      stack.extend(_attr_functions(node.attr))
      stack.append(node.op)
  pruned = tf.GraphDef()
  pruned.versions.CopyFrom(graph_def.versions)
  for node in kept:
    pruned.node.add().CopyFrom(node)
  for function in graph_def.library.function:
    if function.signature.name in used:
      pruned.library.function.add().CopyFrom(function)
  for gradient in graph_def.library.gradient:
    if gradient.function_name in used:
      pruned.library.gradient.add().CopyFrom(gradient)
  graph_io.drop_dangling_colocation(pruned)
  values = {k: v for k, v in lazy.values.items() if k in keep}
  return _LazyGraph(pruned, values)


# --------------------------------------------------------------- freezing


def _const_node(name, dtype_enum):
  node = tf.NodeDef(name=name, op='Const')
  node.attr['dtype'].type = dtype_enum
  return node


def _parse_slice(spec, key):
  """Returns a tuple of slices from a 'd0 d1 a,b:-' shape_and_slice spec."""
  if not spec:
    return None
  parts = spec.split(' ')
  slices = []
  for dim in parts[-1].split(':'):
    if dim == '-':
      slices.append(slice(None))
    else:
      start, length = (int(x) for x in dim.split(','))
      slices.append(slice(start, start + length))
  del key
  return tuple(slices)


def _checkpoint_keys(meta_graph):
  """{variable node: (checkpoint key, slice spec)} from the saver's graph.

  Reads which `RestoreV2` output each `Assign`/`AssignVariableOp` writes, so
  savers built with a custom `var_list` and partitioned variables map right.
  The meta graph's own saver (`saver_def`) wins over other savers.
  """
  graph_def = meta_graph.graph_def
  nodes = _nodes_by_name(graph_def)

  def producer(name):
    node, port = _split_input(name)
    while node in nodes and nodes[node].op == 'Identity':
      node, port = _split_input(nodes[node].input[0])
    return nodes.get(node), port

  def strings(name):
    const, _ = producer(name)
    if const is None or const.op != 'Const':
      return None
    return [s.decode('utf-8') for s in
            tf.make_ndarray(const.attr['value'].tensor).ravel()]

  scope = meta_graph.saver_def.restore_op_name.rpartition('/')[0]
  assigns = [n for n in graph_def.node
             if n.op in ('Assign', 'AssignVariableOp') and len(n.input) >= 2]
  assigns.sort(key=lambda n: not (scope and n.name.startswith(scope + '/')))
  keys = {}
  for assign in assigns:
    restore, port = producer(assign.input[1])
    if restore is None or restore.op != 'RestoreV2' or len(restore.input) < 3:
      continue
    names, slices = strings(restore.input[1]), strings(restore.input[2])
    if names is None or slices is None or port >= len(names):
      continue
    variable, _ = producer(assign.input[0])
    if variable is not None:
      keys.setdefault(variable.name, (names[port], slices[port]))
  return keys


def _variable_source(reader, key, spec, node):
  """Returns a thunk reading `node`'s value from the checkpoint, checked."""
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  if key not in shapes:
    raise ValueError('variable %r (checkpoint key %r) is not in the '
                     'checkpoint; was the checkpoint written by this graph?'
                     % (node.name, key))
  dtype = tf.as_dtype(node.attr['dtype'].type).base_dtype
  if dtypes[key].base_dtype != dtype:
    raise ValueError('variable %r is %s in the graph but %s in the checkpoint'
                     % (node.name, dtype.name, dtypes[key].name))
  index = _parse_slice(spec, key)
  shape = list(shapes[key])
  if index is not None:
    shape = [len(range(*s.indices(d))) for s, d in zip(index, shape)]
  want = tf.TensorShape(node.attr['shape'].shape)
  if want.ndims is not None and not want.is_compatible_with(shape):
    raise ValueError('variable %r has shape %s in the graph but %s in the '
                     'checkpoint' % (node.name, want, shape))

  def read():
    value = reader.get_tensor(key)
    return np.ascontiguousarray(value[index]) if index is not None else value
  return read


def _consumers(graph_def):
  """{(node, port): [consuming nodes]} over data inputs."""
  out = collections.defaultdict(list)
  for node in graph_def.node:
    for name in node.input:
      producer, port = _split_input(name)
      if port >= 0:
        out[(producer, port)].append(node)
  return out


def _convert_uses(graph_def, variables):
  """Rewrites the ops that read variables (now constants) to plain ops.

  `ReadVariableOp` becomes `Identity`, `Ref*` ops lose their ref, pass-through
  ops on resource handles (`Identity`, `Enter`, `Switch`, ...) carry the value.

  Raises:
    ValueError: a node the outputs need writes a variable, or uses it as a
      resource in a way that cannot be frozen.
  """
  consumers = _consumers(graph_def)
  stack = [((name, 0), dtype) for name, dtype in variables.items()]
  seen = set()
  while stack:
    tensor, dtype = stack.pop()
    if tensor in seen:
      continue
    seen.add(tensor)
    for node in consumers.get(tensor, ()):
      if node.op in _REF_OPS:
        node.op = _REF_OPS[node.op]
      if node.op == 'ReadVariableOp':
        node.op = 'Identity'
        del node.attr['dtype']
        node.attr['T'].type = dtype
      elif node.op in _PASS_THROUGH and node.attr['T'].type in (
          _RESOURCE, dtype):
        resource = node.attr['T'].type == _RESOURCE
        node.attr['T'].type = dtype
        if resource or node.op in ('Enter', 'Switch', 'Merge', 'Exit',
                                   'NextIteration'):
          ports = (0, 1) if node.op == 'Switch' else (0,)
          stack.extend(((node.name, p), dtype) for p in ports)
      elif _RESOURCE in [node.attr[k].type for k in node.attr
                         if node.attr[k].HasField('type')] or re.match(
                             r'(Resource)?(Assign|Scatter|Apply|SparseApply|'
                             r'Count|IsVariableInitialized|VarIsInitialized)',
                             node.op):
        raise ValueError(
            'cannot freeze: node %r (op %s) uses variable %r as a variable, not '
            'as a value; leave it out of what the output nodes depend on'
            % (node.name, node.op, tensor[0]))


def _freeze(meta_graph, reader, outputs):
  """Returns a `_LazyGraph` of `outputs`' subgraph, variables as constants."""
  full = meta_graph.graph_def
  _check_outputs(full, outputs, 'the meta graph of the checkpoint')
  keys = _checkpoint_keys(meta_graph)
  lazy = _prune(_LazyGraph(full, {}), outputs)
  graph_def = lazy.graph_def
  variables = {}
  for i, node in enumerate(graph_def.node):
    node.device = ''
    if node.op not in _VARIABLE_OPS:
      continue
    key, spec = keys.get(node.name, (node.name, ''))
    lazy.values[node.name] = _variable_source(reader, key, spec, node)
    dtype = tf.as_dtype(node.attr['dtype'].type).base_dtype.as_datatype_enum
    const = _const_node(node.name, dtype)
    if '_class' in node.attr:
      const.attr['_class'].CopyFrom(node.attr['_class'])
    graph_def.node[i].CopyFrom(const)
    variables[node.name] = dtype
  _convert_uses(graph_def, variables)
  for function in graph_def.library.function:
    for node in function.node_def:
      node.device = ''
  return lazy


# ------------------------------------------------------------------ folding

_Fold = collections.namedtuple('_Fold', ['node', 'layer', 'weight', 'mask',
                                         'read_weight'])


def _resolve(nodes, name, lazy):
  """Follows Identity/Enter from input `name` to a constant.

  Returns:
    (const node name, [Enter nodes passed, innermost first]) or (None, []).
  """
  enters = []
  node, port = _split_input(name)
  while node in nodes:
    current = nodes[node]
    if current.op == 'Const' and port == 0:
      return current.name, enters
    if current.op in ('Identity', 'Snapshot', 'Enter') and port == 0:
      if current.op == 'Enter':
        enters.append(current)
      node, port = _split_input(current.input[0])
      continue
    break
  return None, []


def _fold_masks(lazy):
  """Replaces each masked-weight Mul of `lazy` by a constant; returns folds."""
  graph_def = lazy.graph_def
  nodes = _nodes_by_name(graph_def)
  folds = []
  new_nodes = []
  for node in graph_def.node:
    if node.op != 'Mul' or not _MASKED_WEIGHT.search(node.name):
      continue
    data = [i for i in node.input if not i.startswith('^')]
    resolved = [_resolve(nodes, i, lazy) for i in data]
    if len(data) != 2 or any(r[0] is None for r in resolved):
      raise ValueError(
          'cannot fold masked weight %r: its inputs %s are not both constants '
          '(frozen variables); freeze the graph first (graph_def_from_'
          'checkpoint)' % (node.name, data))
    (a, a_enters), (b, b_enters) = resolved
    if _MASK.search(b) and not _MASK.search(a):
      (a, a_enters), (b, b_enters) = (b, b_enters), (a, a_enters)
    mask, weight, enters = a, b, b_enters or a_enters
    dtype = node.attr['T'].type
    np_dtype = tf.as_dtype(dtype).as_numpy_dtype

    read_mask, read_weight = lazy.source(mask), lazy.source(weight)

    def product(read_mask=read_mask, read_weight=read_weight,
                np_dtype=np_dtype):
      w = read_weight()
      if w.dtype != np_dtype or not w.flags.writeable:
        w = w.astype(np_dtype)
      np.multiply(w, read_mask().astype(np_dtype, copy=False), out=w)
      return w

    const_name = node.name if not enters else node.name + '/folded'
    lazy.values[const_name] = product
    if enters:
      # Inside a while loop (v1 control flow): the constant lives outside,
      # the Mul becomes the chain of Enters that brought the weight in.
      new_nodes.append(_const_node(const_name, dtype))
      source = const_name
      for depth, enter in enumerate(reversed(enters)):
        hop = tf.NodeDef()
        hop.CopyFrom(enter)
        hop.attr['T'].type = dtype
        hop.attr['is_constant'].b = True
        del hop.input[:]
        hop.input.append(source)
        hop.name = node.name if depth == len(enters) - 1 else (
            '%s/folded/enter_%d' % (node.name, depth))
        if hop.name == node.name:
          node.CopyFrom(hop)
        else:
          new_nodes.append(hop)
        source = hop.name
    else:
      node.CopyFrom(_const_node(node.name, dtype))
    layer = re.sub(r'/mask(_\d+)?$', '', mask)
    folds.append(_Fold(const_name, layer, weight, mask, read_weight))
  for node in new_nodes:
    graph_def.node.add().CopyFrom(node)
  return folds


# ---------------------------------------------------------------- output


def _tensor_proto(value, dtype_enum):
  if isinstance(value, np.ndarray):
    return tf.make_tensor_proto(value, dtype=tf.as_dtype(dtype_enum))
  return value


def _materialize(lazy):
  """Returns a plain GraphDef: every lazy constant filled in."""
  graph_def = lazy.graph_def
  for node in graph_def.node:
    if node.name in lazy.values:
      value = lazy.values[node.name]()
      node.attr['value'].tensor.CopyFrom(
          _tensor_proto(value, node.attr['dtype'].type))
  return graph_def


def _lazy_from_graph_def(graph_def):
  """Wraps a frozen GraphDef: constants are read from it on demand."""
  structure = tf.GraphDef()
  structure.versions.CopyFrom(graph_def.versions)
  if graph_def.HasField('library'):
    structure.library.CopyFrom(graph_def.library)
  values = {}
  for node in graph_def.node:
    copy = structure.node.add(name=node.name, op=node.op, device=node.device)
    copy.input.extend(node.input)
    for key in node.attr:
      if node.op == 'Const' and key == 'value':
        values[node.name] = (lambda n=node: n.attr['value'].tensor)
      else:
        copy.attr[key].CopyFrom(node.attr[key])
  return _LazyGraph(structure, values)


def _finish(lazy, outputs, op_lists=()):
  """Prunes, and strips default attributes (on the structure only)."""
  lazy = _prune(lazy, outputs)
  graph_io.strip_default_attrs(
      lazy.graph_def, graph_io.op_defs(lazy.graph_def, op_lists))
  return lazy


def graph_def_from_checkpoint(checkpoint_dir, output_node_names):
  """Freezes the latest checkpoint of `checkpoint_dir`.

  Args:
    checkpoint_dir: the training directory (with its `checkpoint` file and
      `model.ckpt-N.{index,data,meta}`), or a checkpoint prefix.
    output_node_names: list (or comma-separated str) of the nodes to keep.

  Returns:
    A `GraphDef` of what `output_node_names` need, every variable replaced by
    a `Const` holding its checkpoint value, devices cleared.

  Raises:
    ValueError: no checkpoint or meta graph, an unknown output node, or a
      node the outputs need that writes a variable.
  """
  outputs = _output_names(output_node_names)
  prefix = graph_io.checkpoint_prefix(checkpoint_dir)
  meta_graph = graph_io.read_meta_graph(prefix)
  lazy = _freeze(meta_graph, tf.train.load_checkpoint(prefix), outputs)
  return _materialize(lazy)


def strip_pruning_vars_fn(input_graph_def, output_node_names):
  """Folds every mask of a frozen graph into its weight.

  Args:
    input_graph_def: a frozen `GraphDef` (e.g. from `graph_def_from_checkpoint`)
      in which the inputs of each `.../masked_weight` Mul are constants.
    output_node_names: list (or comma-separated str) of the nodes to keep.

  Returns:
    A new `GraphDef`: each masked-weight Mul replaced by a `Const` of the same
    name holding `weight * mask`; mask, threshold and raw weight nodes that
    the outputs do not otherwise need removed; default-valued attributes
    dropped. `input_graph_def` is not changed.

  Raises:
    ValueError: an unknown output node, or a masked weight whose inputs are
      not constants.
  """
  outputs = _output_names(output_node_names)
  _check_outputs(input_graph_def, outputs, 'input_graph_def')
  lazy = _prune(_lazy_from_graph_def(input_graph_def), outputs)
  _fold_masks(lazy)
  return _materialize(_finish(lazy, outputs))


def _write(lazy, folds, path):
  """Streams `lazy` into `path`; returns (file sizes, dense sizes, layers)."""
  fold_by_node = {f.node: f for f in folds}
  out, dense = graph_io.ByteCounter(), graph_io.ByteCounter()
  layers = {}
  with graph_io.write_atomically(path) as f:
    for node in lazy.graph_def.node:
      if node.name not in lazy.values:
        data = graph_io.serialized_node(node)
        f.write(data)
        out.write(data)
        dense.write(data)
        continue
      fold = fold_by_node.get(node.name)
      if fold is not None:
        dense.write(_entry(node, fold.read_weight()))
      value = lazy.values[node.name]()
      if fold is not None:
        layers[fold.node] = LayerStats.from_array(fold.layer, fold.weight,
                                                  fold.node, value)
      data = _entry(node, value)
      del value
      f.write(data)
      out.write(data)
      if fold is None:
        dense.write(data)
      del data
    tail = tf.GraphDef()
    tail.versions.CopyFrom(lazy.graph_def.versions)
    if lazy.graph_def.HasField('library'):
      tail.library.CopyFrom(lazy.graph_def.library)
    data = tail.SerializeToString()
    f.write(data)
    out.write(data)
    dense.write(data)
  return out.close(), dense.close(), [layers[f.node] for f in folds
                                      if f.node in layers]


def _entry(node, value):
  """Serialized GraphDef entry of Const `node` holding `value`."""
  wrapper = tf.GraphDef()
  copy = wrapper.node.add()
  copy.CopyFrom(node)
  copy.attr['value'].tensor.CopyFrom(_tensor_proto(value,
                                                   node.attr['dtype'].type))
  return wrapper.SerializeToString()


def strip_checkpoint(checkpoint_dir, output_node_names, output_path,
                     allow_no_masks=False):
  """Freezes, strips and writes the latest checkpoint of `checkpoint_dir`.

  Equivalent to `strip_pruning_vars_fn(graph_def_from_checkpoint(...))`
  written to `output_path`, but reads each weight from the checkpoint only
  while writing it: memory stays near one layer's weights. The checkpoint is
  only read.

  Args:
    checkpoint_dir: the training directory, or a checkpoint prefix.
    output_node_names: list (or comma-separated str) of the nodes to keep.
    output_path: the `.pb` to write; its directory must exist. Written to a
      temporary file in that directory, then renamed.
    allow_no_masks: strip even if the outputs depend on no masked weight;
      otherwise that raises.

  Returns:
    A `StripReport`.

  Raises:
    ValueError: no checkpoint or meta graph, an unknown output node, no
      masked weight (unless `allow_no_masks`), an unwritable output
      directory, or a graph that cannot be frozen. No file is written then.
  """
  outputs = _output_names(output_node_names)
  prefix = graph_io.checkpoint_prefix(checkpoint_dir)
  meta_graph = graph_io.read_meta_graph(prefix)
  lazy = _freeze(meta_graph, tf.train.load_checkpoint(prefix), outputs)
  folds = _fold_masks(lazy)
  if not folds and not allow_no_masks:
    raise ValueError(
        'checkpoint %r has no masked weights that the outputs %s depend on '
        '(no .../masked_weight multiply of apply_mask); nothing to strip. '
        'Pass allow_no_masks=True (--allow_no_masks) to freeze it anyway'
        % (prefix, ', '.join(outputs)))
  lazy = _finish(lazy, outputs, [meta_graph.meta_info_def.stripped_op_list])
  (raw, gz), (dense_raw, dense_gz), layers = _write(lazy, folds, output_path)
  return StripReport(
      checkpoint=prefix, output_path=output_path, output_nodes=outputs,
      layers=layers, file_bytes=raw, file_bytes_gzip=gz,
      dense_file_bytes=dense_raw, dense_file_bytes_gzip=dense_gz,
      num_nodes=len(lazy.graph_def.node))
