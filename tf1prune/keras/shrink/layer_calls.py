"""The layer calls of a Keras model, nested models followed, in order.

    >>> import keras
    >>> from tf1prune.keras.shrink.layer_calls import trace
    >>> x = keras.Input((4, 4, 3), name='x')
    >>> block = keras.Sequential([keras.layers.Conv2D(8, 1, name='a'),
    ...                           keras.layers.ReLU(name='r')], name='block')
    >>> y = keras.layers.Conv2D(2, 1, name='b')(block(x))
    >>> [c.layer.name for c in trace(keras.Model(x, y)).calls]
    ['x', 'a', 'r', 'b']

`trace(model)` lists the calls of a Sequential or functional model in
topological order, each a `Call`: the layer (or Keras 3 operation), the ids
of its input tensors and of its output tensor, its static output shape and
its Keras node. A nested Sequential or functional model is followed: its
layers are called in its place, on the outer tensors (its own inputs and
outputs are aliases of them, `Trace.resolve`), so the shrunk model is flat.

Keras 3 turns an operator on a symbolic tensor (`x + 3.0`, `x * gate`) and a
`keras.ops` call into an operation node that is not a layer (MobileNetV3's
hard sigmoid is `relu6(x + 3) * (1 / 6)`); Keras 2 and tf_keras make it a
`TFOpLambda` layer, named for `KERAS_OPS` by its TF symbol (`TF_SYMBOLS`).
`call_arguments` gives a call's arguments as they were (numbers, `axis=`,
`mha(q, v)`) with new tensors in the place of its symbolic ones, on every
Keras; `run_call` runs a call again so, a layer or an operation alike.

Which TF op of the channel table (`tf1prune.channels.table`) each layer
class, activation and operation stands for is here too (`OP_TYPES`,
`ACTIVATION_OPS`, `KERAS_OPS`): `tf1prune.keras.shrink.layer_view` turns
each call into those op nodes.
"""

import collections

import tensorflow as tf

__all__ = ['ACTIVATION_OPS', 'Call', 'KERAS_OPS', 'OP_TYPES', 'TF_SYMBOLS',
           'Trace', 'activation_name', 'call_arguments', 'is_conv', 'is_op',
           'is_operation', 'is_tf_op', 'node_inputs', 'op_name', 'operands',
           'run_call', 'trace']

# A Keras layer class whose call is one op of the channel table -> that op.
# (Layers made of several ops, convolutions, batch norm, ..., are expanded
# by `tf1prune.keras.shrink.layer_view`.)
OP_TYPES = {
    'ReLU': 'Relu',
    'LeakyReLU': 'LeakyRelu',
    'ELU': 'Elu',
    'Dropout': 'Identity',
    'SpatialDropout1D': 'Identity',
    'SpatialDropout2D': 'Identity',
    'GaussianNoise': 'Identity',
    'GaussianDropout': 'Identity',
    'AlphaDropout': 'Identity',
    'ActivityRegularization': 'Identity',
    'Identity': 'Identity',
    'MaxPooling2D': 'MaxPool',
    'AveragePooling2D': 'AvgPool',
    'MaxPooling1D': 'MaxPool',
    'AveragePooling1D': 'AvgPool',
    'GlobalAveragePooling2D': 'Mean',
    'GlobalMaxPooling2D': 'Max',
    'GlobalAveragePooling1D': 'Mean',
    'GlobalMaxPooling1D': 'Max',
    'ZeroPadding2D': 'Pad',
    'ZeroPadding1D': 'Pad',
    'Add': 'AddV2',
    'Subtract': 'Sub',
    'Multiply': 'Mul',
    'Average': 'AddN',
    'Maximum': 'Maximum',
    'Minimum': 'Minimum',
    'Concatenate': 'ConcatV2',
    'Flatten': 'Reshape',
    'Reshape': 'Reshape',
    'Softmax': 'Softmax',
}
# A Keras activation that is one op of the table -> that op. The others
# (hard_sigmoid, hard_swish, gelu, mish, ...) are compositions of rows: the
# view expands them (`tf1prune.keras.shrink.layer_view.ACTIVATIONS`).
ACTIVATION_OPS = {
    'linear': 'Identity', 'relu': 'Relu', 'relu6': 'Relu6', 'elu': 'Elu',
    'selu': 'Selu', 'sigmoid': 'Sigmoid', 'tanh': 'Tanh',
    'softplus': 'Softplus', 'softsign': 'Softsign', 'swish': 'Swish',
    'silu': 'Swish', 'exponential': 'Exp', 'leaky_relu': 'LeakyRelu',
    'softmax': 'Softmax', 'log_softmax': 'LogSoftmax'}
# A Keras 3 operation (keras.ops, an operator on a symbolic tensor) by class
# name -> its op type, or the name of an activation that `ACTIVATION_OPS` or
# the view's compositions give ('hard_sigmoid', ...).
KERAS_OPS = {
    'Add': 'AddV2', 'Subtract': 'Sub', 'Multiply': 'Mul', 'Divide': 'RealDiv',
    'TrueDivide': 'RealDiv', 'Maximum': 'Maximum', 'Minimum': 'Minimum',
    'Power': 'Pow', 'Negative': 'Neg', 'Absolute': 'Abs', 'Square': 'Square',
    'Sqrt': 'Sqrt', 'Exp': 'Exp', 'Log': 'Log', 'Tanh': 'Tanh',
    'Clip': 'clip', 'Sign': 'Sign', 'Erf': 'Erf', 'Cast': 'Cast',
    'Relu': 'Relu', 'Relu6': 'Relu6', 'Sigmoid': 'Sigmoid',
    'HardSigmoid': 'hard_sigmoid', 'HardSilu': 'hard_silu', 'Silu': 'Swish',
    'Gelu': 'gelu', 'Softplus': 'Softplus', 'Softsign': 'Softsign',
    'LeakyRelu': 'LeakyRelu', 'Elu': 'Elu', 'Selu': 'Selu'}
# Keras 2 and tf_keras make a TF function called on a symbolic tensor
# (`x + 3.0`, `tf.nn.relu6(x)`) a `TFOpLambda` layer: its `symbol` -> the
# `KERAS_OPS` name of the Keras 3 operation that computes the same.
TF_SYMBOLS = {
    '__operators__.add': 'Add', 'math.add': 'Add', 'math.subtract': 'Subtract',
    'math.multiply': 'Multiply', 'math.truediv': 'TrueDivide',
    'math.divide': 'Divide', 'math.maximum': 'Maximum',
    'math.minimum': 'Minimum', 'math.pow': 'Power', 'math.negative': 'Negative',
    'math.abs': 'Absolute', 'math.square': 'Square', 'math.sqrt': 'Sqrt',
    'math.exp': 'Exp', 'math.log': 'Log', 'math.tanh': 'Tanh',
    'clip_by_value': 'Clip', 'math.sign': 'Sign', 'math.erf': 'Erf',
    'cast': 'Cast', 'nn.relu': 'Relu', 'nn.relu6': 'Relu6',
    'math.sigmoid': 'Sigmoid', 'nn.silu': 'Silu', 'nn.gelu': 'Gelu',
    'math.softplus': 'Softplus', 'nn.softsign': 'Softsign',
    'nn.leaky_relu': 'LeakyRelu', 'nn.elu': 'Elu', 'nn.selu': 'Selu'}


class Call(collections.namedtuple('Call', ['layer', 'inputs', 'output',
                                           'shape', 'node'])):
  """One layer call: `inputs` and `output` are tensor ids (`Trace.resolve`),
  `shape` the output's static shape (a tuple, None for the batch), `node`
  the Keras node of the call."""

  @property
  def name(self):
    return self.layer.name


class Trace(collections.namedtuple('Trace', ['calls', 'aliases'])):
  """The calls of a model, and {tensor id: the id it stands for} (a nested
  model's inputs and outputs)."""

  def resolve(self, tensor):
    """The traced id of a symbolic tensor of the model (or of an id)."""
    key = tensor if isinstance(tensor, int) else id(tensor)
    while key in self.aliases:
      key = self.aliases[key]
    return key


def is_op(layer):
  """Whether `layer` is a Keras 3 operation (no weights), not a layer."""
  return not hasattr(layer, 'weights')


def is_tf_op(layer):
  """Whether `layer` is a Keras 2 / tf_keras `TFOpLambda` (a TF function
  called on a symbolic tensor)."""
  return type(layer).__name__ in ('TFOpLambda', 'SlicingOpLambda')


def is_operation(layer):
  """A Keras 3 operation or a Keras 2 TF op: a call with no layer config."""
  return is_op(layer) or is_tf_op(layer)


def is_conv(layer):
  """Whether `layer` is a convolution of any kind (1D/2D/3D, transposed,
  depthwise, separable); a ConvLSTM2D is recurrent, not one."""
  name = type(layer).__name__
  return 'Conv' in name and 'LSTM' not in name and \
      'kernel_size' in layer.get_config()


def op_name(layer):
  """The `KERAS_OPS` name of a Keras 3 operation or a Keras 2 TF op (None
  for a TF op not in `TF_SYMBOLS`), else the layer's class name."""
  if is_tf_op(layer):
    return TF_SYMBOLS.get(getattr(layer, 'symbol', None))
  return type(layer).__name__


def activation_name(layer):
  """The name of a layer's `activation` config entry ('linear' if none)."""
  value = layer.get_config().get('activation', 'linear')
  if isinstance(value, dict):   # Keras 3 may serialize it as a dict.
    value = value.get('config', value.get('class_name', ''))
    value = value if isinstance(value, str) else str(value)
  return value or 'linear'


def structure(node):
  """(args, kwargs) that the layer or operation of `node` was called with,
  symbolic tensors included."""
  arguments = getattr(node, 'arguments', None)     # Keras 3
  if arguments is not None:
    return arguments.args, arguments.kwargs
  return node.call_args, node.call_kwargs          # Keras 2 / tf_keras


def operands(node):
  """The arguments of an operation's call that hold no symbolic tensor
  (numbers, arrays, `axis=`), a dtype (tf.cast's) and names left out."""
  args, kwargs = structure(node)
  return [a for a in list(args) + list(kwargs.values())
          if not isinstance(a, (tf.DType, str)) and
          not any(hasattr(t, '_keras_history') for t in tf.nest.flatten(a))]


def call_arguments(node, tensors):
  """(args, kwargs) of the call of `node` with each symbolic input tensor
  replaced by `tensors[id(tensor)]`, its other arguments (numbers, `axis=`,
  a second tensor's place) as they were."""
  arguments = getattr(node, 'arguments', None)
  if arguments is not None:                        # Keras 3
    return arguments.fill_in(tensors)
  args, kwargs = tf.nest.map_structure(
      lambda a: tensors[id(a)] if hasattr(a, '_keras_history') else a,
      (list(node.call_args), dict(node.call_kwargs)))
  return args, kwargs


def run_call(call, tensors):
  """Runs `call` again: its layer (in inference mode) or its operation on
  `tensors` ({input tensor id: tensor}, the ids of `call.node`'s own
  tensors), with its other arguments as they were."""
  args, kwargs = call_arguments(call.node, tensors)
  if not is_operation(call.layer):
    kwargs = dict(kwargs, training=False)
  return call.layer(*args, **kwargs)


def node_inputs(node):
  """The symbolic input tensors of a Keras node, flattened."""
  inputs = getattr(node, 'keras_inputs', None)    # tf_keras / Keras 2
  if inputs is None:
    inputs = node.input_tensors                   # Keras 3
  return tf.nest.flatten(inputs)


def _history(tensor):
  history = tensor._keras_history   # pylint: disable=protected-access
  return history[0], history[1], history[2]


def _nested(layer):
  """Whether `layer` is a model (Sequential or functional) called as a
  layer."""
  return bool(getattr(layer, 'layers', None)) and hasattr(layer, 'outputs')


def trace(model):
  """The layer calls of `model`, inputs first, in topological order.

  Returns:
    A `Trace`. Tensor ids are `id()` of the model's symbolic tensors (the
    first call's output of a nested model's input, ...: `Trace.resolve`).

  Raises:
    ValueError: `model` has no symbolic inputs and outputs (a subclassed or
      unbuilt model, or a nested one), a layer is called more than once, or
      a layer returns more than one tensor.
  """
  outputs = getattr(model, 'outputs', None)
  if not outputs or not getattr(model, 'inputs', None):
    raise ValueError('shrinking needs a Sequential or functional model with '
                     'known inputs and outputs; %r has none (build it with '
                     'keras.Input, or as keras.Model(inputs, outputs))'
                     % model.name)
  calls, seen, aliases = [], {}, {}

  def visit(tensor):
    layer, node_index, index = _history(tensor)
    if id(layer) in seen:
      if seen[id(layer)] != id(tensor):
        raise ValueError('layer %r is called more than once (shared '
                         'layers are not shrunk); give each call its own '
                         'layer' % layer.name)
      return
    seen[id(layer)] = id(tensor)
    node = layer._inbound_nodes[node_index]   # pylint: disable=protected-access
    inputs = [] if type(layer).__name__ == 'InputLayer' else node_inputs(node)
    for parent in inputs:
      visit(parent)
    if _nested(layer):
      inner_in, inner_out = _model_tensors(layer)
      if len(inner_in) != len(inputs):
        raise ValueError('the nested model %r takes %d inputs but is called '
                         'on %d' % (layer.name, len(inner_in), len(inputs)))
      for inner, outer in zip(inner_in, inputs):
        aliases[id(inner)] = id(outer)
        seen[id(_history(inner)[0])] = id(inner)    # its InputLayer
      visit(inner_out[index])
      aliases[id(tensor)] = id(inner_out[index])
      return
    if len(tf.nest.flatten(node.outputs)) != 1:
      raise ValueError('layer %r returns several tensors; the shrink needs '
                       'one output per layer' % layer.name)
    calls.append(Call(layer, [id(t) for t in inputs], id(tensor),
                      tuple(tensor.shape), node))

  for tensor in list(model.inputs) + list(outputs):
    visit(tensor)
  result = Trace(calls, aliases)
  return Trace([c._replace(inputs=[result.resolve(i) for i in c.inputs])
                for c in calls], aliases)


def _model_tensors(layer):
  """(inputs, outputs) of a nested model's own graph."""
  inputs, outputs = getattr(layer, 'inputs', None), getattr(layer, 'outputs',
                                                            None)
  if not inputs or not outputs:
    raise ValueError('layer %r is a nested model without symbolic inputs and '
                     'outputs (a subclassed model, or a Sequential built '
                     'without an input shape): the shrink cannot follow it; '
                     'build it with keras.Input' % layer.name)
  return list(inputs), list(outputs)
