"""A GraphDef whose big constants are read only when they are written.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export._lazy_graph import LazyGraph
    >>> with tf.Graph().as_default() as g:
    ...   a = tf.constant([1.0, 2.0], name='a')
    ...   b = tf.identity(a, name='b')
    ...   unused = tf.constant(3.0, name='unused')
    >>> lazy = LazyGraph.from_graph_def(g.as_graph_def()).pruned(['b'])
    >>> [n.name for n in lazy.graph_def.node], lazy.deferred()
    (['a', 'b'], ['a'])
    >>> tf.make_ndarray(lazy.materialize().node[0].attr['value'].tensor)
    array([1., 2.], dtype=float32)

`LazyGraph` owns the thunks of its deferred constants: each such node is a
`Const` whose `value` is not set, and a thunk (reading a checkpoint, another
GraphDef, or computing `weight * mask`) gives the value when asked. Graph
surgery (freezing, folding masks, pruning) works on the structure only and
costs no weight memory; `materialize` fills every value in, and a writer
reads one node's value at a time (`items`).
"""

import re

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export import stream as _stream
from tf1prune.export.attrs import called_functions
from tf1prune.export.graph_index import GraphIndex

_LOC = re.compile(r'^loc:@(.*)$')


def tensor_proto(value, dtype_enum):
  """`value` (ndarray or TensorProto) as a TensorProto of `dtype_enum`."""
  if isinstance(value, np.ndarray):
    return tf.make_tensor_proto(value, dtype=tf.as_dtype(dtype_enum))
  return value


def _as_array(value):
  return value if isinstance(value, np.ndarray) else tf.make_ndarray(value)


class LazyGraph(object):
  """A GraphDef whose big constants are produced on demand.

  Args:
    graph_def: the structure, edited in place by freezing and folding.
    values: {node name: thunk returning an ndarray or a TensorProto} for
      the Const nodes whose `value` attribute is not set.

  Attributes:
    graph_def: the structure.
  """

  def __init__(self, graph_def, values=None):
    self.graph_def = graph_def
    self._values = dict(values or {})

  @classmethod
  def from_graph_def(cls, graph_def):
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
    return cls(structure, values)

  # ------------------------------------------------------------ constants

  def is_deferred(self, name):
    """Whether node `name` is a Const whose value a thunk gives."""
    return name in self._values

  def deferred(self):
    """Sorted names of the deferred constants."""
    return sorted(self._values)

  def make_const(self, node, dtype_enum, read, keep_colocation=False):
    """Turns `node` (of `graph_def`) into a Const whose value `read()` gives.

    Args:
      node: a `NodeDef` of `graph_def`, replaced in place (its name stays).
      dtype_enum: the constant's dtype.
      read: thunk returning an ndarray or TensorProto of that dtype.
      keep_colocation: keep the node's `_class` (colocation) attribute.
    """
    const = _stream.const_node(node.name, dtype_enum)
    if keep_colocation and '_class' in node.attr:
      const.attr['_class'].CopyFrom(node.attr['_class'])
    node.CopyFrom(const)
    self._values[node.name] = read

  def add_const(self, name, dtype_enum, read):
    """Appends a Const node `name` whose value `read()` gives."""
    self.graph_def.node.add().CopyFrom(_stream.const_node(name, dtype_enum))
    self._values[name] = read

  def source(self, name):
    """Returns a thunk giving Const `name`'s value as an ndarray.

    The thunk keeps working after `name` is pruned from the graph.
    """
    if name in self._values:
      thunk = self._values[name]
    else:
      proto = self.node(name).attr['value'].tensor
      thunk = lambda: proto
    return lambda: _as_array(thunk())

  def node(self, name):
    for node in self.graph_def.node:
      if node.name == name:
        return node
    raise KeyError(name)

  def items(self):
    """Yields (node, read) in graph order; `read` is None unless deferred."""
    for node in self.graph_def.node:
      thunk = self._values.get(node.name)
      yield node, (None if thunk is None else
                   (lambda t=thunk: _as_array(t())))

  def tail(self):
    """A GraphDef of what follows the nodes: versions and library."""
    tail = tf.GraphDef()
    tail.versions.CopyFrom(self.graph_def.versions)
    if self.graph_def.HasField('library'):
      tail.library.CopyFrom(self.graph_def.library)
    return tail

  def materialize(self):
    """Fills in every deferred constant; returns the (now plain) GraphDef."""
    for node in self.graph_def.node:
      if node.name in self._values:
        node.attr['value'].tensor.CopyFrom(tensor_proto(
            self._values[node.name](), node.attr['dtype'].type))
    return self.graph_def

  # -------------------------------------------------------------- pruning

  def pruned(self, outputs):
    """Returns a new LazyGraph of what `outputs` need (nodes and functions).

    Raises:
      ValueError: an input names a node that does not exist.
    """
    graph_def = self.graph_def
    keep = GraphIndex(graph_def.node).reachable(outputs)
    kept = [node for node in graph_def.node if node.name in keep]
    used = called_functions(graph_def, kept)
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
    return LazyGraph(pruned, {k: v for k, v in self._values.items()
                              if k in keep})


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
