"""A Keras model as a channel view: each layer call is the TF ops it computes.

    >>> import keras
    >>> from tf1prune.keras.shrink.layer_view import LayerView
    >>> x = keras.Input((4, 4, 3), name='x')
    >>> h = keras.layers.Conv2D(8, 1, activation='relu', name='conv')(x)
    >>> h = keras.layers.BatchNormalization(name='bn')(h)
    >>> view = LayerView(keras.Model(x, h))
    >>> [(n.name, view.op_type(n)) for n in view.walk_order()]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('x', 'Placeholder'), ('conv/Conv2D', 'Conv2D'),
     ('conv/BiasAdd', 'BiasAdd'), ('conv', 'Relu'), ('bn/Mul', 'Mul'),
     ('bn', 'AddV2')]

`LayerView(model)` implements the view protocol of `tf1prune.channels`
(`walk_order`, `op_type`, `inputs`, `shape`, `constant`, ...), so the one
op table and the one walk (`classify`, `Forward`, `GroupWalk`) serve Keras
models as they serve TF graphs: a `Conv2D` call with a bias and an
activation is a 'Conv2D' node, a 'BiasAdd' node with the bias as a
constant and a 'Relu' node; a `BatchNormalization` is its inference form, a
'Mul' and an 'AddV2' of per-channel constants; an `Add` layer an 'AddV2';
... The node of a call's last op is named after the layer and outputs the
layer's tensor (its key is the layer's name); the others are named
`<layer>/<op>`. How channels go through each node, and what a constant
channel becomes, is the table's row of its op type; the view only says
which ops a layer is (`tf1prune.keras.shrink.layer_ops`, a table there).
Nested models are followed (`layer_calls.trace`). `members` maps each
kernel to the node it feeds (for the `Pruner`'s channel groups), `layers`
lists the nodes where channels start (the shrink's seeds).
"""

import collections

import numpy as np

from tf1prune.keras.shrink import layer_calls
from tf1prune.keras.shrink.layer_ops import Expansion, Member, Node, expand

__all__ = ['LayerView', 'Member', 'Node', 'STARTS']

# Op types of the nodes where channels start: a layer's kernel.
STARTS = ('Conv2D', 'MatMul')


class LayerView(object):
  """The channel view of a Sequential or functional Keras model.

  Args:
    model: the model (nested models are followed).
    trace: its `layer_calls.Trace` (default: traced here).

  Attributes:
    trace: the `layer_calls.Trace`.
    nodes: the `Node`s, in topological order.
    keys: {tensor id: tensor key} of the calls' outputs.
    members: {(id(layer), weight short name): `Member`}.
    layers: the names of the nodes where channels start (`STARTS`).
  """

  def __init__(self, model, trace=None):
    from tf1prune.keras import _version
    self.keras = _version.keras_of(model)
    self.trace = trace or layer_calls.trace(model)
    self.nodes = []
    self.keys = {}
    self.members = {}
    self.layers = []
    self._consts = {}
    self._shapes = {}
    self._lazy_shapes = {}
    self._used = set()
    self.compositions = {}
    self._by_name = {}
    for call in self.trace.calls:
      key = self._unique_key(call.layer.name)
      self.keys[call.output] = key
      expansion = Expansion(self, call, key,
                             [self.keys[i] for i in call.inputs])
      expand(self, expansion)
      nodes = expansion.finish()
      old, new = expansion.renamed
      for k, member in list(self.members.items()):
        if member.node == old:
          self.members[k] = member._replace(node=new)
      for node in nodes:
        self.nodes.append(node)
        self._by_name[node.name] = node
        if node.op in STARTS:
          self.layers.append(node.name)
    self._consumers = collections.defaultdict(list)
    for node in self.nodes:
      for index, tensor in enumerate(node.inputs):
        self._consumers[tensor].append((node, index))
    self.outputs = [self.keys[self.trace.resolve(t)] for t in model.outputs]

  # ---------------------------------------------------------------- protocol

  def walk_order(self):
    return list(self.nodes)

  def name(self, node):
    return node.name

  def op_type(self, node):
    return node.op

  def inputs(self, node):
    return list(node.inputs)

  def output(self, node):
    return node.output

  def all_outputs(self, node):
    return [node.output]

  def key(self, tensor):
    return tensor

  def consumers(self, tensor):
    return list(self._consumers.get(tensor, []))

  def shape(self, tensor):
    if tensor in self._lazy_shapes:
      self._shapes[tensor] = list(np.shape(self.constant(tensor)))
      del self._lazy_shapes[tensor]
    return self._shapes.get(tensor)

  def is_constant(self, tensor):
    """Whether `tensor` is a constant (without computing it)."""
    return tensor in self._consts

  def constant(self, tensor):
    value = self._consts.get(tensor)
    if callable(value):
      return value()
    return value

  def attr(self, node, name, default):
    return node.attrs.get(name, default)

  # ---------------------------------------------------------------- helpers

  def node(self, name):
    return self._by_name[name]

  def producer(self, tensor):
    """The node whose output is `tensor` (None for a constant)."""
    return self._by_name.get(tensor)

  def why(self, node):
    """Why a stop node ends the channels (None for other nodes)."""
    return node.attrs.get('why')

  def _unique_key(self, key):
    base, count = key, 0
    while key in self._used:
      count += 1
      key = '%s_%d' % (base, count)
    self._used.add(key)
    return key
