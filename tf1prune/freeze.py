"""Freezing a checkpoint's meta graph: variables become constants, lazily.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune import freeze
    >>> with tf.Graph().as_default() as g:
    ...   a = tf.constant([1.0, 2.0], name='a')
    ...   b = tf.identity(a, name='b')
    ...   unused = tf.constant(3.0, name='unused')
    >>> lazy = freeze.prune(freeze.lazy_from_graph_def(g.as_graph_def()), ['b'])
    >>> [n.name for n in lazy.graph_def.node], sorted(lazy.values)
    (['a', 'b'], ['a'])
    >>> tf.make_ndarray(freeze.materialize(lazy).node[0].attr['value'].tensor)
    array([1., 2.], dtype=float32)

A `LazyGraph` is a GraphDef whose large constants are not filled in yet: each
has a thunk that reads it (from the checkpoint, or from another GraphDef) when
it is written. Freezing works on the structure only, so it costs no weight
memory; `materialize` fills everything in, `strip._write` one node at a time.

What is rewritten, for the nodes the outputs need: `VariableV2`/`VarHandleOp`
become `Const`; `ReadVariableOp` becomes `Identity`; `Ref*` ops lose the ref;
resource handles passed through `Identity`/`Enter`/`Switch`/... or into
functional control flow (`While`, `If`, `Case`, `PartitionedCall` and direct
function calls, as TF 2.x builds them) become values, the functions'
signatures included. Which checkpoint entry holds a variable is read from the
meta graph's saver (custom `var_list` names and partitioned slices work).
A node that writes a variable cannot be frozen: that raises `ValueError`.
"""

import collections
import re

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune import graph_io

__all__ = ['LazyGraph', 'check_outputs', 'const_node', 'freeze',
           'lazy_from_graph_def', 'materialize', 'prune', 'split_input',
           'tensor_proto']

_VARIABLE_OPS = ('VariableV2', 'Variable', 'VarHandleOp')
_REF_OPS = {'RefIdentity': 'Identity', 'RefEnter': 'Enter',
            'RefSwitch': 'Switch', 'RefMerge': 'Merge', 'RefExit': 'Exit',
            'RefNextIteration': 'NextIteration', 'RefSelect': 'Select'}
# Ops passing their input through unchanged (type attr T): output names.
_PASS_THROUGH = {'Identity': ('output',), 'Snapshot': ('output',),
                 'Enter': ('output',), 'Exit': ('output',),
                 'NextIteration': ('output',), 'Merge': ('output',),
                 'Switch': ('output_false', 'output_true')}
# Functional ops: (input type-list attr, first function input, function
# attrs, output type-list attr or None when outputs are the loop variables).
_CALLS = {
    'While': ('T', 0, ('cond', 'body'), None),
    'StatelessWhile': ('T', 0, ('cond', 'body'), None),
    'If': ('Tin', 1, ('then_branch', 'else_branch'), 'Tout'),
    'StatelessIf': ('Tin', 1, ('then_branch', 'else_branch'), 'Tout'),
    'Case': ('Tin', 1, ('branches',), 'Tout'),
    'StatelessCase': ('Tin', 1, ('branches',), 'Tout'),
    'PartitionedCall': ('Tin', 0, ('f',), 'Tout'),
    'StatefulPartitionedCall': ('Tin', 0, ('f',), 'Tout'),
}
_WRITES = re.compile(r'^(Resource)?(Assign|Scatter|Apply|SparseApply|Count|'
                     r'IsVariableInitialized|VarIsInitialized|Destroy)')
_RESOURCE = tf.resource.as_datatype_enum


def split_input(name):
  """'^a' -> ('a', -1); 'a:2' -> ('a', 2); 'a' -> ('a', 0)."""
  if name.startswith('^'):
    return name[1:], -1
  node, sep, port = name.rpartition(':')
  if sep and port.isdigit():
    return node, int(port)
  return name, 0


def const_node(name, dtype_enum):
  """A `Const` NodeDef without its value."""
  node = tf.NodeDef(name=name, op='Const')
  node.attr['dtype'].type = dtype_enum
  return node


def tensor_proto(value, dtype_enum):
  """`value` (ndarray or TensorProto) as a TensorProto of `dtype_enum`."""
  if isinstance(value, np.ndarray):
    return tf.make_tensor_proto(value, dtype=tf.as_dtype(dtype_enum))
  return value


class LazyGraph(object):
  """A GraphDef whose big constants are produced on demand.

  Attributes:
    graph_def: the structure; a node named in `values` is a Const whose
      `value` attribute is not set.
    values: {node name: thunk returning an ndarray or a TensorProto}.
  """

  def __init__(self, graph_def, values):
    self.graph_def = graph_def
    self.values = values

  def source(self, name):
    """Returns a thunk giving Const `name`'s value as an ndarray.

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


def nodes_by_name(graph_def):
  return {node.name: node for node in graph_def.node}


def check_outputs(graph_def, outputs, where):
  """Raises ValueError naming the `outputs` that are not nodes of the graph."""
  names = nodes_by_name(graph_def)
  missing = [n for n in outputs if n not in names]
  if missing:
    raise ValueError('output node%s %s not found in %s; check '
                     'output_node_names (the graph has %d nodes)' % (
                         's' if len(missing) > 1 else '',
                         ', '.join(repr(n) for n in missing), where,
                         len(names)))


def _reachable(graph_def, outputs):
  """Names of the nodes `outputs` depend on (data and control inputs)."""
  nodes = nodes_by_name(graph_def)
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
    stack.extend(split_input(i)[0] for i in nodes[name].input)
  return seen


def _attr_functions(attr_map):
  for value in attr_map.values():
    if value.HasField('func'):
      yield value.func.name
    for func in value.list.func:
      yield func.name


_LOC = re.compile(r'^loc:@(.*)$')


def _drop_dangling_colocation(graph_def):
  """Removes `_class: loc:@name` entries naming nodes not in `graph_def`.

  TF refuses to import a node colocated with a node that does not exist.
  """
  names = set(node.name for node in graph_def.node)
  for node in graph_def.node:
    if '_class' not in node.attr:
      continue
    kept = []
    for entry in node.attr['_class'].list.s:
      match = _LOC.match(entry.decode('utf-8', 'replace'))
      if not match or match.group(1) in names:
        kept.append(entry)
    if kept:
      del node.attr['_class'].list.s[:]
      node.attr['_class'].list.s.extend(kept)
    else:
      del node.attr['_class']


def prune(lazy, outputs):
  """Returns a new LazyGraph of what `outputs` need (nodes and functions)."""
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
  _drop_dangling_colocation(pruned)
  values = {k: v for k, v in lazy.values.items() if k in keep}
  return LazyGraph(pruned, values)


def lazy_from_graph_def(graph_def):
  """Wraps a GraphDef: its constants are read from it on demand.

  Only the structure is copied; `graph_def` itself is not changed.
  """
  structure = tf.GraphDef()
  structure.versions.CopyFrom(graph_def.versions)
  if graph_def.HasField('library'):
    structure.library.CopyFrom(graph_def.library)
  values = {}
  for node in graph_def.node:
    copy = structure.node.add()
    if node.op != 'Const' or 'value' not in node.attr:
      copy.CopyFrom(node)
      continue
    for field, value in node.ListFields():  # all but the value, uncopied.
      if field.name == 'attr':
        continue
      target = getattr(copy, field.name)
      if hasattr(target, 'extend'):
        target.extend(value)
      elif hasattr(target, 'CopyFrom'):
        target.CopyFrom(value)
      else:
        setattr(copy, field.name, value)
    for key in node.attr:
      if key != 'value':
        copy.attr[key].CopyFrom(node.attr[key])
    values[node.name] = (lambda n=node: n.attr['value'].tensor)
  return LazyGraph(structure, values)


def materialize(lazy):
  """Fills in every lazy constant; returns the (now plain) GraphDef."""
  for node in lazy.graph_def.node:
    if node.name in lazy.values:
      value = lazy.values[node.name]()
      node.attr['value'].tensor.CopyFrom(
          tensor_proto(value, node.attr['dtype'].type))
  return lazy.graph_def


# --------------------------------------------------- checkpoint variables


def _parse_slice(spec):
  """Tuple of slices from a saver 'd0 d1 a,b:-' spec; None for ''."""
  if not spec:
    return None
  slices = []
  for dim in spec.split(' ')[-1].split(':'):
    if dim == '-':
      slices.append(slice(None))
    else:
      start, length = (int(x) for x in dim.split(','))
      slices.append(slice(start, start + length))
  return tuple(slices)


def _checkpoint_keys(meta_graph):
  """{variable node: (checkpoint key, slice spec)} from the savers' graph.

  Reads which `RestoreV2` output each `Assign`/`AssignVariableOp` writes, so
  savers built with a custom `var_list` and partitioned variables map right.
  The meta graph's own saver (`saver_def`) wins over other savers.
  """
  graph_def = meta_graph.graph_def
  nodes = nodes_by_name(graph_def)

  def producer(name):
    node, port = split_input(name)
    while node in nodes and nodes[node].op == 'Identity':
      node, port = split_input(nodes[node].input[0])
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
  """Returns a thunk reading `node`'s value from the checkpoint, checked now."""
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
  index = _parse_slice(spec)
  shape = list(shapes[key])
  if index is not None:
    shape = [len(range(*s.indices(d))) for s, d in zip(index, shape)]
  want = tf.TensorShape(node.attr['shape'].shape)
  if want.ndims is not None and not want.is_compatible_with(shape):
    raise ValueError('variable %r has shape %s in the graph but %s in the '
                     'checkpoint' % (node.name, want, shape))

  def read():
    value = reader.get_tensor(key)
    if index is not None:
      value = np.ascontiguousarray(value[index])
    return value
  return read


# ------------------------------------------------ resource -> value rewrite


_Var = collections.namedtuple('_Var', ['name', 'dtype', 'shape'])


def _set_shapes(attrs, key, index, shape):
  """Sets entry `index` (None: every entry) of list-of-shapes attr `key`."""
  if key not in attrs:
    return
  shapes = attrs[key].list.shape
  for i in range(len(shapes)) if index is None else [index]:
    if i < len(shapes):
      shapes[i].CopyFrom(shape)


class _Converter(object):
  """Turns uses of frozen variables into uses of values, functions included.

  A scope is None (the graph) or a function name; a tensor reference is
  'node:port' in the graph and 'arg' or 'node:output_arg:index' in a function.
  """

  def __init__(self, graph_def):
    self._graph_def = graph_def
    self._functions = {f.signature.name: f for f in graph_def.library.function}
    self._consumers = {}
    self._done = collections.defaultdict(set)
    self._uses = collections.Counter()
    bodies = [graph_def.node] + [f.node_def for f in graph_def.library.function]
    for nodes in bodies:
      for node in nodes:
        self._uses.update(_attr_functions(node.attr))
        if node.op in self._functions:
          self._uses[node.op] += 1

  def _nodes(self, scope):
    if scope is None:
      return self._graph_def.node
    return self._functions[scope].node_def

  def _consumers_of(self, scope):
    """{tensor ref: [(node, data input position)]} of a scope (cached)."""
    if scope not in self._consumers:
      table = collections.defaultdict(list)
      for node in self._nodes(scope):
        position = 0
        for ref in node.input:
          if ref.startswith('^'):
            continue
          if scope is None:
            ref = '%s:%d' % split_input(ref)
          table[ref].append((node, position))
          position += 1
      self._consumers[scope] = table
    return self._consumers[scope]

  def _ref(self, scope, node, output_name, index):
    if scope is None:
      return '%s:%d' % (node.name, index)
    if node.op in _CALLS and output_name == 'output':
      return '%s:output:%d' % (node.name, index)
    return '%s:%s:0' % (node.name, output_name)

  def convert(self, scope, ref, var):
    """Rewrites every consumer of `ref`, a handle or ref of variable `var`."""
    if ref in self._done[scope]:
      return
    self._done[scope].add(ref)
    for node, position in list(self._consumers_of(scope).get(ref, ())):
      self._convert_node(scope, node, position, var)

  def _convert_node(self, scope, node, position, var):
    dtype = var.dtype
    if node.op in _REF_OPS:
      node.op = _REF_OPS[node.op]
    if node.op == 'ReadVariableOp':
      node.op = 'Identity'
      del node.attr['dtype']
      node.attr['T'].type = dtype
      if scope is not None:
        self._rename_output(scope, node.name, 'value', 'output')
    elif node.op == 'VariableShape':
      node.op = 'Shape'
      node.attr['T'].type = dtype
    elif node.op in ('ResourceGather', 'ResourceGatherNd') and position == 0:
      self._gather(scope, node, dtype)
    elif node.op in _PASS_THROUGH and 'T' in node.attr:
      was_resource = node.attr['T'].type == _RESOURCE
      node.attr['T'].type = dtype
      if was_resource:  # its shapes were the handle's (scalar).
        _set_shapes(node.attr, '_output_shapes', None, var.shape)
      if was_resource or node.op not in ('Identity', 'Snapshot'):
        for port, name in enumerate(_PASS_THROUGH[node.op]):
          self.convert(scope, self._ref(scope, node, name, port), var)
    elif node.op in _CALLS or node.op in self._functions:
      self._convert_call(scope, node, position, var)
    elif _WRITES.match(node.op) or _RESOURCE in [
        v.type for v in node.attr.values() if v.HasField('type')]:
      raise ValueError(
          'cannot freeze: node %r (op %s)%s uses variable %r as a variable, '
          'not as a value; leave it out of what the output nodes depend on'
          % (node.name, node.op,
             ' in function %r' % scope if scope else '', var.name))

  def _gather(self, scope, node, dtype):
    """ResourceGather(Nd) of a variable -> GatherV2 (GatherNd) of its value."""
    del node.attr['dtype']
    if 'validate_indices' in node.attr:
      del node.attr['validate_indices']
    node.attr['Tparams'].type = dtype
    if node.op == 'ResourceGatherNd':
      node.op = 'GatherNd'
      return
    node.op = 'GatherV2'
    batch_dims = node.attr['batch_dims'].i if 'batch_dims' in node.attr else 0
    axis = const_node(node.name + '/axis', tf.int32.as_datatype_enum)
    axis.attr['value'].tensor.CopyFrom(
        tf.make_tensor_proto(batch_dims, dtype=tf.int32))
    node.attr['Taxis'].type = tf.int32.as_datatype_enum
    if scope is None:
      self._graph_def.node.add().CopyFrom(axis)
      ref = axis.name
    else:
      self._functions[scope].node_def.add().CopyFrom(axis)
      ref = axis.name + ':output:0'
    data = [i for i in node.input if not i.startswith('^')]
    control = [i for i in node.input if i.startswith('^')]
    del node.input[:]
    node.input.extend(data[:2] + [ref] + control)
    self._consumers.pop(scope, None)

  def _rename_output(self, scope, node_name, old, new):
    """In function `scope`, refers to `node:old:i` as `node:new:i`."""
    prefix, replacement = '%s:%s:' % (node_name, old), '%s:%s:' % (node_name,
                                                                     new)
    function = self._functions[scope]
    for node in function.node_def:
      for i, ref in enumerate(node.input):
        if ref.startswith(prefix):
          node.input[i] = replacement + ref[len(prefix):]
    for key, ref in list(function.ret.items()):
      if ref.startswith(prefix):
        function.ret[key] = replacement + ref[len(prefix):]
    self._consumers.pop(scope, None)

  def _own(self, name):
    """Returns `name`, or a private copy of it when others call it too."""
    if self._uses[name] <= 1:
      return name
    self._uses[name] -= 1
    copy_name = name + '_frozen'
    while copy_name in self._functions:
      copy_name += '_'
    copy = self._graph_def.library.function.add()
    copy.CopyFrom(self._functions[name])
    copy.signature.name = copy_name
    self._functions[copy_name] = copy
    self._uses[copy_name] = 1
    return copy_name

  def _convert_call(self, scope, node, position, var):
    if node.op in _CALLS:
      types, first, func_attrs, out_types = _CALLS[node.op]
    else:
      types, first, func_attrs, out_types = None, 0, (), None
    arg = position - first
    if arg < 0:
      raise ValueError('cannot freeze: node %r (op %s) takes variable %r as '
                       'its condition' % (node.name, node.op, var.name))
    if types:
      node.attr[types].list.type[arg] = var.dtype
    if '_read_only_resource_inputs' in node.attr:
      ints = [i for i in node.attr['_read_only_resource_inputs'].list.i
              if i != position]
      del node.attr['_read_only_resource_inputs'].list.i[:]
      node.attr['_read_only_resource_inputs'].list.i.extend(ints)
    outputs = set()
    if node.op in self._functions:
      node.op = self._own(node.op)
      outputs |= self._convert_arg(node.op, arg, var)
    for attr in func_attrs:
      value = node.attr[attr]
      funcs = [value.func] if value.HasField('func') else list(value.list.func)
      for func in funcs:
        func.name = self._own(func.name)
        outputs |= self._convert_arg(func.name, arg, var)
    if out_types is None and node.op in _CALLS:
      outputs = {arg}  # While: output i is loop variable i.
    for index in sorted(outputs):
      if out_types and out_types in node.attr:
        node.attr[out_types].list.type[index] = var.dtype
      for shapes in ('output_shapes', '_output_shapes'):
        _set_shapes(node.attr, shapes, index, var.shape)
      self.convert(scope, self._ref(scope, node, self._output_name(node, index),
                                    index), var)

  def _output_name(self, node, index):
    if node.op in self._functions:
      return self._functions[node.op].signature.output_arg[index].name
    return 'output'

  def _convert_arg(self, name, arg, var):
    """Makes argument `arg` of function `name` a value; returns outputs made."""
    function = self._functions[name]
    if arg >= len(function.signature.input_arg):
      raise ValueError('cannot freeze: function %r has no argument %d'
                       % (name, arg))
    arg_def = function.signature.input_arg[arg]
    if arg_def.type != _RESOURCE:
      return set()
    arg_def.type = var.dtype
    if arg in function.arg_attr:
      attrs = function.arg_attr[arg].attr
      for key in ('_handle_dtypes', '_handle_shapes'):
        if key in attrs:
          del attrs[key]
      _set_shapes(attrs, '_output_shapes', None, var.shape)
    if ('resource_arg_unique_id' in function.DESCRIPTOR.fields_by_name and
        arg in function.resource_arg_unique_id):
      del function.resource_arg_unique_id[arg]
    self.convert(name, arg_def.name, var)
    outputs = set()
    for index, out in enumerate(function.signature.output_arg):
      if out.type == _RESOURCE and function.ret[out.name] in self._done[name]:
        out.type = var.dtype
        outputs.add(index)
    return outputs


def freeze(meta_graph, reader, outputs):
  """Returns a LazyGraph of what `outputs` need, variables as constants.

  Args:
    meta_graph: a `MetaGraphDef` (graph and saver of a checkpoint).
    reader: the checkpoint's reader (`tf.train.load_checkpoint(prefix)`).
    outputs: list of output node names.

  Returns:
    A `LazyGraph`; each former variable is a Const whose thunk reads the
    checkpoint. Devices are cleared.

  Raises:
    ValueError: an unknown output, a variable missing from the checkpoint or
      of another shape or dtype, or a node that writes a variable.
  """
  check_outputs(meta_graph.graph_def, outputs,
                'the meta graph of the checkpoint')
  keys = _checkpoint_keys(meta_graph)
  lazy = prune(LazyGraph(meta_graph.graph_def, {}), outputs)
  graph_def = lazy.graph_def
  variables = []
  for node in graph_def.node:
    node.device = ''
    if node.op not in _VARIABLE_OPS:
      continue
    key, spec = keys.get(node.name, (node.name, ''))
    lazy.values[node.name] = _variable_source(reader, key, spec, node)
    dtype = tf.as_dtype(node.attr['dtype'].type).base_dtype.as_datatype_enum
    const = const_node(node.name, dtype)
    if '_class' in node.attr:
      const.attr['_class'].CopyFrom(node.attr['_class'])
    shape = type(node.attr['shape'].shape)()
    shape.CopyFrom(node.attr['shape'].shape)
    variables.append(_Var(node.name, dtype, shape))
    node.CopyFrom(const)
  converter = _Converter(graph_def)
  for var in variables:
    converter.convert(None, var.name + ':0', var)
  for function in graph_def.library.function:
    for node in function.node_def:
      node.device = ''
  return prune(lazy, outputs)
