"""The channel classes of a Keras model: `Forward` seeded at every layer.

    >>> import keras
    >>> from tf1prune.keras.shrink.channel_walk import ChannelWalk
    >>> from tf1prune.keras.shrink.layer_view import LayerView
    >>> x = keras.Input((4, 4, 3), name='x')
    >>> a = keras.layers.Conv2D(8, 1, name='a')(x)
    >>> b = keras.layers.Conv2D(8, 1, name='b')(x)
    >>> y = keras.layers.Softmax(name='s')(keras.layers.Add(name='add')([a, b]))
    >>> walk = ChannelWalk(LayerView(keras.Model(x, y)))
    >>> walk.classes('a') == walk.classes('b'), walk.pins['add']
    (True, 'read by s: softmax mixes all channels')

The shrink's side of `tf1prune.channels`, over the model's `LayerView`, as
`RegionWalk` is over a frozen graph: the same `Forward`, seeded at every
node where channels start (the kernels of `Dense`, convolution and
separable layers), every input that is not a constant carrying channels.
An input that no layer's channels reach (a model input, the output of a
layer the shrink does not know) gets channels of its own, which its
producer pins ('it is a model input', 'made by <layer>: <why>'); a node
whose channels end there (a softmax, a `Mean` over the channels, a layer
the view cannot express) pins the channels it reads ('read by <layer>:
<why>', or 'the activation of <layer>: <why>' for a layer's own
activation), and so do the model's outputs. The union-find of the walk
gives the classes: one class is one channel that can only go everywhere at
once.
"""

from tf1prune.channels.classify import classify
from tf1prune.channels.forward import Forward
from tf1prune.keras.shrink.layer_view import STARTS

__all__ = ['ChannelWalk']


class ChannelWalk(Forward):
  """`Forward` over a `LayerView`, seeded at every layer (module doc).

  Attributes (besides `Forward`'s):
    ops: {node name: its `ChannelOp`}, the nodes it passed.
    pins: {tensor key: why its channels stay}, the first reason of each.
    readers: {tensor key: [node]}: the nodes where channels start that read
      it (the layers a removed channel must be folded into).
  """

  def __init__(self, view):
    super(ChannelWalk, self).__init__(view)
    self.ops = {}
    self.pins = {}
    self.readers = {}
    for name in view.layers:
      node = view.node(name)
      shape = view.shape(node.output)
      self.seed(node.output, shape[-1])
    self.run()
    for node in view.walk_order():
      for tensor in node.inputs:
        if node.op in STARTS and self.carries(tensor) and \
            tensor == node.inputs[0]:
          self.readers.setdefault(tensor, []).append(node)
    for tensor in view.outputs:
      self.pin(tensor, 'it is a model output')

  def pin(self, tensor, why):
    """Keeps every channel of `tensor`, `why` (the first reason stays)."""
    self.pins.setdefault(tensor, why)

  def classes(self, tensor):
    """The class of each channel of `tensor` (a list of ints)."""
    return [self.sets.find(i) for i in self.ids[tensor]]

  def takes(self, tensor):
    return not self.view.is_constant(tensor)

  def classify(self, node):
    why = self.view.why(node)
    if why is not None:
      return None, why
    return classify(self.view, node, self.takes)

  def input_ids(self, node, tensor):
    if not self.carries(tensor):
      shape = self.view.shape(tensor)
      if not shape or shape[-1] is None:
        return None
      self.seed(tensor, shape[-1])
      producer = self.view.producer(tensor)
      if producer is None or producer.op == 'Placeholder':
        self.pin(tensor, 'it is a model input')
      else:
        self.pin(tensor, 'made by %s: %s' % (
            producer.call.name, self._why(producer)))
    return self.ids[tensor]

  def _why(self, node):
    why = self.view.why(node)
    if why is None:
      why = classify(self.view, node, self.takes)[1]
    return why

  def ended(self, node, why):
    if node.op in STARTS:
      return     # a layer reads them: the shrink folds what they carry
    where = ('the activation of %s' if node.part == 'activation' else
             'read by %s') % node.call.name
    for tensor in node.inputs:
      if self.takes(tensor):
        self.input_ids(node, tensor)
        self.pin(tensor, '%s: %s' % (where, why))

  def fits(self, node, found, out):
    shape = self.view.shape(node.output)
    if out is None or not shape or shape[-1] != len(out):
      self.ended(node, 'its channels do not line up with its inputs')
      return False
    return True

  def visited(self, node, found):
    self.ops[node.name] = found
