"""Node attributes: the functions they name, and those at their op's default.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export import attrs as _attrs
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [2, 2], name='x')
    ...   y = tf.matmul(x, x, name='y')
    >>> graph_def = g.as_graph_def()
    >>> _attrs.strip_default_attrs(graph_def, _attrs.op_defs(graph_def))
    >>> sorted(graph_def.node[1].attr)   # TF 2.x's grad_a/grad_b are gone
    ['T']

`strip_default_attrs` removes every attribute whose value is its op's
registered default, in the graph and in its function library: a TF 1.15
runtime then loads a GraphDef written under TF 2.x, whose newer attributes
(MatMul's `grad_a`, `grad_b`, ...) it does not know. The op definitions come
from the meta graph of a checkpoint (its `stripped_op_list`) and from the
running TensorFlow (`op_defs`), both through public API.
"""

import tensorflow.compat.v1 as tf


def attr_functions(attr_map):
  """Yields the names of the functions an attribute map refers to."""
  for value in attr_map.values():
    if value.HasField('func'):
      yield value.func.name
    for func in value.list.func:
      yield func.name


def called_functions(graph_def, nodes):
  """Names of the library functions of `graph_def` that `nodes` call,
  directly (as an op or through an attribute) or through other functions."""
  functions = {f.signature.name: f for f in graph_def.library.function}
  called, stack = set(), []
  for node in nodes:
    stack.extend(attr_functions(node.attr))
    stack.append(node.op)
  while stack:
    name = stack.pop()
    if name in called or name not in functions:
      continue
    called.add(name)
    for node in functions[name].node_def:
      stack.extend(attr_functions(node.attr))
      stack.append(node.op)
  return called


def graph_op_types(graph_def):
  """Returns the set of op types used in `graph_def` and its function library.

  Calls of library functions are left out: they are not registered ops.
  """
  functions = set(f.signature.name for f in graph_def.library.function)
  types = set(node.op for node in graph_def.node)
  for function in graph_def.library.function:
    types.update(node.op for node in function.node_def)
  return types - functions


def _registered_op_defs(types):
  """OpDefs of the running TensorFlow for `types` (unknown ones left out)."""
  def query(names):
    graph_def = tf.GraphDef()
    for i, name in enumerate(sorted(names)):
      graph_def.node.add(name='n%d' % i, op=name)
    with tf.Graph().as_default():
      meta_graph = tf.train.export_meta_graph(graph_def=graph_def,
                                              collection_list=[])
    return list(meta_graph.meta_info_def.stripped_op_list.op)

  try:
    return query(types)
  except ValueError:  # TF 1.x refuses unknown ops: ask one at a time.
    found = []
    for name in types:
      try:
        found.extend(query([name]))
      except ValueError:
        pass
    return found


def op_defs(graph_def, op_lists=()):
  """Returns {op type: OpDef} for the ops `graph_def` uses.

  Args:
    graph_def: a `GraphDef`; only its op types are read.
    op_lists: more `OpList`s (e.g. a meta graph's
      `meta_info_def.stripped_op_list`, from the TensorFlow that wrote it);
      their definitions come first, the running TensorFlow's fill the gaps.

  Returns:
    A dict from op type to `OpDef`.
  """
  types = graph_op_types(graph_def)
  found = {}
  for op_list in op_lists:
    for op_def in op_list.op:
      if op_def.name in types:
        found.setdefault(op_def.name, op_def)
  missing = types - set(found)
  if missing:
    for op_def in _registered_op_defs(missing):
      found.setdefault(op_def.name, op_def)
  return found


def _strip_node(node, defs):
  op_def = defs.get(node.op)
  if op_def is None:
    return
  for attr in op_def.attr:
    if (attr.HasField('default_value') and attr.name in node.attr and
        node.attr[attr.name] == attr.default_value):
      del node.attr[attr.name]


def strip_default_attrs(graph_def, defs):
  """Removes, in place, node attributes equal to their op's default value.

  Args:
    graph_def: the `GraphDef` to edit; its function library is edited too.
    defs: {op type: OpDef}, as `op_defs` returns.
  """
  for node in graph_def.node:
    _strip_node(node, defs)
  for function in graph_def.library.function:
    for node in function.node_def:
      _strip_node(node, defs)
