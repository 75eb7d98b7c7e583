"""A mutable view of a frozen GraphDef, for `tf1prune.shrink`.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.frozen_graph import FrozenGraph
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 2], name='x')
    ...   y = tf.matmul(x, tf.constant([[1.0], [2.0]], name='w'), name='y')
    >>> view = FrozenGraph(g.as_graph_def(), ['y'])
    >>> view.exclusive_const(view.nodes['y'], 1), view.shapes['y']
    ('w', [None, 1])

`FrozenGraph` is the frozen GraphDef's channel view (`tf1prune.channels`:
nodes are `NodeDef`s, tensors input names) and a `GraphIndex` (nodes by
name, each node's data consumers)
that also knows the static shape of each node's first output (from importing
the graph), and holds the values of the constants it was asked for, as NumPy
arrays that `shrink` edits; `changed` names the constants to write back.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.graph_index import GraphIndex
from tf1prune.export.names import check_outputs, split_input


def attr_str(node, key, default):
  if key not in node.attr:
    return default
  value = node.attr[key].s
  return value.decode('utf-8') if isinstance(value, bytes) else value


def attr_int(node, key, default):
  return node.attr[key].i if key in node.attr else default


def attr_ints(node, key, default):
  if key not in node.attr or not node.attr[key].list.i:
    return list(default)
  return list(node.attr[key].list.i)


class FrozenGraph(GraphIndex):
  """A mutable view of a frozen GraphDef: consumers, shapes, const values.

  `nodes` and `users` (name -> [(node, input index, port)]) are the
  `GraphIndex`'s, kept up to date by `shrink` as it edits the graph.
  """

  def __init__(self, graph_def, outputs):
    super(FrozenGraph, self).__init__(graph_def.node)
    self.graph_def = graph_def
    self.outputs = set(outputs)
    check_outputs(outputs, self.nodes, 'graph_def')
    self.shapes = static_shapes(graph_def)
    self.values = {}
    self.changed = set()
    self.folded = {}   # layer name -> float consts the shrink added for it
    self.extra = {}    # conv name -> [(extra input channels, pattern)]
    self.maps = {}     # conv name -> (layer, float64 map added at its output)
    self.lrn = {}      # rewritten LRN -> (its kept indices, channels before)
    self.keep_two = set()   # tensors that keep two channels, not one

  def add(self, node):
    """Adds a copy of NodeDef `node` to the graph and to the index."""
    added = self.graph_def.node.add()
    added.CopyFrom(node)
    self.nodes[added.name] = added
    for index, ref in enumerate(added.input):
      if not ref.startswith('^'):
        name, port = split_input(ref)
        self.users[name].append((added, index, port))
    return added

  def consumers(self, name):
    """Data consumers of `name` as [(node, input index)]; None if a port > 0
    is used."""
    users = self.users.get(name, [])
    if any(port != 0 for _, _, port in users):
      return None
    return [(node, index) for node, index, _ in users]

  def exclusive_const(self, node, index):
    """The Const behind input `index` of `node` if only `node` uses it."""
    name, port = split_input(node.input[index])
    user = node
    while name in self.nodes and port == 0:
      current = self.nodes[name]
      users = self.consumers(name)
      if users is None or [u.name for u, _ in users] != [user.name] or \
          name in self.outputs:
        return None
      if current.op == 'Const':
        return name
      if current.op not in ('Identity', 'Snapshot'):
        return None
      user = current
      name, port = split_input(current.input[0])
    return None

  # The channel view (`tf1prune.channels`): tensors are input names.
  def op_type(self, node):
    return node.op

  def inputs(self, node):
    return [i for i in node.input if not i.startswith('^')]

  def output(self, node):
    return node.name

  def all_outputs(self, node):
    count = len(self.inputs(node)) if node.op == 'IdentityN' else (
        attr_int(node, 'num_split', 1) if node.op in ('Split', 'SplitV')
        else 1)
    return [node.name] + ['%s:%d' % (node.name, k) for k in range(1, count)]

  def key(self, tensor):
    name, port = split_input(tensor)
    return name if port == 0 else '%s:%d' % (name, port)

  def name(self, node):
    return node.name

  def walk_order(self):
    return [self.nodes[name] for name in self.order()]

  def shape(self, tensor):
    name, port = split_input(tensor)
    if port != 0:   # a split's output, or None
      return self.shapes.get(self.key(tensor))
    if self.shapes.get(name) is None and name in self.values:
      return list(self.values[name].shape)   # a const the shrink added
    return self.shapes.get(name)

  def constant(self, tensor):
    return self.const_behind(tensor)

  def attr(self, node, key, default):
    """Attribute `key` of `node` as a Python value, else `default`."""
    if key not in node.attr:
      return default
    value = node.attr[key]
    which = value.WhichOneof('value')
    if which == 's':
      return value.s.decode('utf-8')
    if which == 'type':
      return tf.as_dtype(value.type).as_numpy_dtype
    if which == 'list':
      return list(value.list.i) or list(value.list.f) or default
    if which in ('f', 'i', 'b'):
      return getattr(value, which)
    return default

  def value(self, const):
    if const not in self.values:
      self.values[const] = np.array(
          tf.make_ndarray(self.nodes[const].attr['value'].tensor))
    return self.values[const]

  def const_behind(self, name):
    """The value of the Const that input `name` reads (through Identity and
    Snapshot nodes), or None if it reads anything else."""
    source, port = split_input(name)
    while source in self.nodes and port == 0:
      node = self.nodes[source]
      if node.op == 'Const':
        return self.value(source)
      if node.op not in ('Identity', 'Snapshot'):
        return None
      source, port = split_input(node.input[0])
    return None

  def set_value(self, const, array):
    self.values[const] = array
    self.changed.add(const)

  def order(self):
    """Node names in a topological order (data and control inputs)."""
    pending = {name: set(split_input(i)[0] for i in node.input) & set(
        self.nodes) for name, node in self.nodes.items()}
    waiting = collections.defaultdict(list)
    for name, inputs in pending.items():
      for i in inputs:
        waiting[i].append(name)
    ready = [n.name for n in self.graph_def.node if not pending[n.name]]
    out = []
    while ready:
      name = ready.pop()
      out.append(name)
      for user in waiting[name]:
        pending[user].discard(name)
        if not pending[user]:
          ready.append(user)
    return out


def _without_big_values(graph_def):
  """A copy in which float constants over 1024 entries are placeholders of
  their shape: the same static shapes, a fraction of the bytes to import."""
  light = tf.GraphDef()
  light.versions.CopyFrom(graph_def.versions)
  light.library.CopyFrom(graph_def.library)
  for node in graph_def.node:
    tensor = node.attr['value'].tensor if node.op == 'Const' else None
    if tensor is not None and tf.as_dtype(tensor.dtype).is_floating and \
        np.prod([d.size for d in tensor.tensor_shape.dim]) > 1024:
      placeholder = light.node.add(name=node.name, op='Placeholder')
      placeholder.attr['dtype'].type = tensor.dtype
      placeholder.attr['shape'].shape.CopyFrom(tensor.tensor_shape)
      placeholder.input.extend(node.input)   # control inputs, if any
    else:
      light.node.extend([node])
  return light


def static_shapes(graph_def):
  """{node name: static shape of output 0 as a list (None dims), or None},
  and `name:k` for the other outputs of a Split or SplitV."""
  with tf.Graph().as_default() as graph:
    try:
      tf.import_graph_def(_without_big_values(graph_def), name='')
    except (ValueError, TypeError) as e:
      raise ValueError('shrink_graph_def needs a GraphDef that imports: %s' % e)
  shapes = {}
  for op in graph.get_operations():
    if op.outputs and op.outputs[0].shape.ndims is not None:
      shapes[op.name] = op.outputs[0].shape.as_list()
      if op.type == 'Reshape' and shapes[op.name][-1] is None:
        shapes[op.name][-1] = _width_read(op.outputs[0])
    else:
      shapes[op.name] = None
    if op.type in ('Split', 'SplitV'):   # the other outputs, as name:k
      for port, out in enumerate(op.outputs[1:], 1):
        shapes['%s:%d' % (op.name, port)] = (
            out.shape.as_list() if out.shape.ndims is not None else None)
  return shapes


def _width_read(tensor):
  """The width of a matrix that one MatMul reads as its data input (TF 1.15
  does not infer `[2, -1]` reshapes): the rows of its weight, or None."""
  users = tensor.consumers()
  if len(users) != 1 or users[0].type != 'MatMul' or \
      users[0].inputs[0] is not tensor or users[0].get_attr('transpose_a') or \
      users[0].get_attr('transpose_b'):
    return None
  return users[0].inputs[1].shape.as_list()[0] if \
      users[0].inputs[1].shape.ndims == 2 else None
