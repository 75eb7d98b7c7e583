"""Uses of frozen variables rewritten as uses of values, functions included.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export import resources
    >>> with tf.Graph().as_default() as g:
    ...   v = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[2], name='v')
    ...   y = tf.raw_ops.ReadVariableOp(resource=v, dtype=tf.float32, name='y')
    >>> graph_def = g.as_graph_def()
    >>> graph_def.node[0].op = 'Const'   # freezing made `v` a constant
    >>> resources.values_for_variables(graph_def, [resources.Variable(
    ...     'v', tf.float32.as_datatype_enum, tf.TensorShape([2]).as_proto())])
    >>> [(node.name, node.op) for node in graph_def.node]
    [('v', 'Const'), ('y', 'Identity')]

Once a variable node is a constant, what read it must read a value:
`ReadVariableOp` becomes `Identity`, `VariableShape` `Shape`, `ResourceGather`
`GatherV2`; `Ref*` ops lose the ref; pass-through ops on the handle
(`Identity`, `Enter`, `Switch`, `Merge`, ...) carry the value (with its
shape); a handle passed into functional control flow (`While`, `If`, `Case`,
`PartitionedCall`, direct function calls) becomes a value argument, and the
function (copied first if others call it too) is rewritten the same way.
A node that writes a variable raises `ValueError`.
"""

import collections
import re

import tensorflow.compat.v1 as tf

from tf1prune.export import stream as _stream
from tf1prune.export.attrs import attr_functions
from tf1prune.export.graph_index import GraphIndex

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


class Variable(collections.namedtuple('Variable', ['name', 'dtype', 'shape'])):
  """A frozen variable: its node name, dtype enum and `TensorShapeProto`."""


def _data_position(node, index):
  """Position of input `index` of `node` among its data inputs."""
  return index - sum(1 for ref in node.input[:index] if ref.startswith('^'))


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
    self._indexes = {}
    self._done = collections.defaultdict(set)
    self._uses = collections.Counter()
    bodies = [graph_def.node] + [f.node_def for f in graph_def.library.function]
    for nodes in bodies:
      for node in nodes:
        self._uses.update(attr_functions(node.attr))
        if node.op in self._functions:
          self._uses[node.op] += 1

  def _nodes(self, scope):
    if scope is None:
      return self._graph_def.node
    return self._functions[scope].node_def

  def _consumers_of(self, scope, ref):
    """[(node, data input position)] reading tensor `ref` in a scope."""
    if scope not in self._indexes:
      self._indexes[scope] = GraphIndex(self._nodes(scope),
                                        function=scope is not None)
    return [(node, _data_position(node, index)) for node, index in
            self._indexes[scope].consumers_of(ref)]

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
    for node, position in self._consumers_of(scope, ref):
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
    axis = _stream.const_node(node.name + '/axis', tf.int32.as_datatype_enum)
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
    self._indexes.pop(scope, None)

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
    self._indexes.pop(scope, None)

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


def values_for_variables(graph_def, variables):
  """Rewrites, in place, every use of `variables` as a use of its value.

  Args:
    graph_def: a GraphDef in which each variable node is already a Const.
    variables: list of `Variable`.

  Raises:
    ValueError: a node writes one of the variables or uses it otherwise than
      by reading it.
  """
  converter = _Converter(graph_def)
  for var in variables:
    converter.convert(None, var.name + ':0', var)
