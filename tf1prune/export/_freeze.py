"""Freezing a checkpoint's meta graph: variables become constants, lazily.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export import _freeze as freeze
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

For the nodes the outputs need, `VariableV2`/`VarHandleOp` become `Const`
and `resources.values_for_variables` rewrites what read them (functional
control flow included). Which checkpoint entry holds a variable is read from
the meta graph's saver (custom `var_list` names and partitioned slices work).
A node that writes a variable cannot be frozen: that raises `ValueError`.
"""

import difflib
import re

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export import _graph_io as graph_io
from tf1prune.export import _resources as resources

__all__ = ['LazyGraph', 'check_outputs', 'freeze', 'lazy_from_graph_def',
           'materialize', 'missing_outputs_message', 'nodes_by_name', 'prune',
           'tensor_proto']

_VARIABLE_OPS = ('VariableV2', 'Variable', 'VarHandleOp')


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


def missing_outputs_message(missing, names, where):
  """The error text for output nodes `missing` from the node `names`.

  It ends with the graph's nearest node names to each missing one (difflib),
  e.g. `softmax_linear/softmax_linear_2` -> `softmax_linear/softmax_linear_1`.
  """
  hints = []
  for name in missing:
    close = difflib.get_close_matches(name.split(':')[0], names, n=3,
                                      cutoff=0.6)
    if close:
      hints.append('%s for %r' % (', '.join(close), name))
  return ('output node%s %s not found in %s; check output_node_names (the '
          'graph has %d nodes)%s' % (
              's' if len(missing) > 1 else '',
              ', '.join(repr(n) for n in missing), where, len(names),
              '; nearest existing names: ' + '; '.join(hints) if hints else ''))


def check_outputs(graph_def, outputs, where):
  """Raises ValueError naming the `outputs` that are not nodes of the graph."""
  names = nodes_by_name(graph_def)
  missing = [n for n in outputs if n not in names]
  if missing:
    raise ValueError(missing_outputs_message(missing, sorted(names), where))


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
    stack.extend(graph_io.split_input(i)[0] for i in nodes[name].input)
  return seen



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
    stack.extend(graph_io.attr_functions(node.attr))
    stack.append(node.op)
  while stack:
    name = stack.pop()
    if name in used or name not in functions:
      continue
    used.add(name)
    for node in functions[name].node_def:
      stack.extend(graph_io.attr_functions(node.attr))
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
    node, port = graph_io.split_input(name)
    while node in nodes and nodes[node].op == 'Identity':
      node, port = graph_io.split_input(nodes[node].input[0])
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
    # The reader gives scalars as NumPy scalars: keep every value an ndarray.
    value = np.asarray(reader.get_tensor(key))
    if index is not None:
      value = np.ascontiguousarray(value[index])
    return value
  return read


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
    const = graph_io.const_node(node.name, dtype)
    if '_class' in node.attr:
      const.attr['_class'].CopyFrom(node.attr['_class'])
    shape = type(node.attr['shape'].shape)()
    shape.CopyFrom(node.attr['shape'].shape)
    variables.append(resources.Variable(node.name, dtype, shape))
    node.CopyFrom(const)
  resources.values_for_variables(graph_def, variables)
  for function in graph_def.library.function:
    for node in function.node_def:
      node.device = ''
  return prune(lazy, outputs)
