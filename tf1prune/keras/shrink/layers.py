"""Which channels of a Keras model go together: a Keras-layer view.

    >>> import keras
    >>> from tf1prune.keras.shrink.layers import trace
    >>> x = keras.Input((4, 4, 3), name='x')
    >>> a = keras.layers.Conv2D(8, 1, name='a')(x)
    >>> b = keras.layers.Conv2D(8, 1, name='b')(x)
    >>> y = keras.layers.ReLU(name='r')(keras.layers.Add(name='add')([a, b]))
    >>> [(c.layer.name, c.kind) for c in trace(keras.Model(x, y))]
    [('x', 'input'), ('a', 'conv'), ('b', 'conv'), ('add', 'merge'), ('r', 'elementwise')]

`trace(model)` lists the layer calls of a Sequential or functional model in
topological order, each as a `Call`: the layer, its channel behaviour (its
*kind*), the ids of its input tensors and of its output tensor, and for a
layer the shrink does not go through, the reason. The kinds (the last axis
is the channel axis, channels_last only):

| kind | layers | channel `c` of the output |
|---|---|---|
| `input` | `InputLayer` | a channel of the data: never removed |
| `dense`, `conv` | `Dense`, `Conv2D` (groups 1) | a filter of the layer (new channels) |
| `separable` | `SeparableConv2D` | a filter of its pointwise kernel |
| `depthwise` | `DepthwiseConv2D` | input channel `c // multiplier` |
| `elementwise` | activations, `ReLU`, `BatchNormalization`, dropouts | input channel `c` |
| `pool` | max / average pooling (2D, 1D, global) | input channel `c` (constant stays constant) |
| `pad` | `ZeroPadding2D` | input channel `c` (a constant is no longer one) |
| `merge` | `Add`, `Subtract`, `Multiply`, `Average`, `Maximum`, `Minimum` | channel `c` of every input: ties them |
| `concat` | `Concatenate` on the last axis | channel `c - offset` of input `i` |
| `flatten` | `Flatten`, `Reshape` to `(H*W*C,)` | row `r` reads input channel `r % C` |
| `reshape` | `Reshape` keeping the last axis (SE: `[N, C]` -> `[N, 1, 1, C]`) | input channel `c` |
| `stop` | anything else | its inputs keep all channels (`Call.reason`) |

Keras 3 turns an operator on a symbolic tensor (`x + 3.0`, `x * gate`) and a
`keras.ops` call into an operation node that is not a layer (MobileNetV3's hard
sigmoid is `relu6(x + 3) * (1 / 6)`); Keras 2 and tf_keras make it a
`TFOpLambda` layer, named for `KERAS_OPS` by its TF symbol (`TF_SYMBOLS`). One
of `KERAS_OPS` whose other operands are numbers is classified by its row, as a
layer is (`elementwise`, or `merge` on two tensors); any other stops.
`call_arguments` gives a call's arguments as they were (numbers, `axis=`,
`mha(q, v)`) with new tensors in the place of its symbolic ones, on every
Keras; `run_call` runs a call again so, a layer or an operation alike.

The kinds come from the one channel table of `tf1prune.channels` (the rows the
graph shrink and `find_channel_groups` use): each layer class, and each
activation, stands for the TF op type it computes (`OP_TYPES`,
`ACTIVATION_OPS`), whose row says how channels go through it; the ties are made
by `tf1prune.channels`' union-find and `tie`. The rebuild
(`tf1prune.keras.shrink.rebuild`) and the channel classes
(`tf1prune.keras.shrink.plan`) work from it.
"""

import collections

import numpy as np
import tensorflow as tf

from tf1prune.channels import rule_of

__all__ = ['ACTIVATION_OPS', 'Call', 'KERAS_OPS', 'KINDS', 'OP_TYPES',
           'OTHER_CONVS', 'TF_SYMBOLS', 'activation_stops', 'call_arguments',
           'classify', 'is_conv', 'is_op', 'is_tf_op', 'op_name', 'op_type',
           'run_call', 'trace']

KINDS = ('input', 'dense', 'conv', 'separable', 'depthwise', 'elementwise',
         'pool', 'pad', 'merge', 'concat', 'flatten', 'reshape', 'stop')

# Keras layer class -> the TF op type whose row of the channel table
# (tf1prune.channels.table) says how channels go through the layer.
OP_TYPES = {
    'InputLayer': 'Placeholder',
    'Dense': 'MatMul',
    'Conv2D': 'Conv2D',
    'SeparableConv2D': 'Conv2D',
    'DepthwiseConv2D': 'DepthwiseConv2dNative',
    'BatchNormalization': 'FusedBatchNormV3',
    'ReLU': 'Relu',
    'LeakyReLU': 'LeakyRelu',
    'ELU': 'Elu',
    'Dropout': 'Identity',
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
    'Add': 'AddV2',
    'Subtract': 'Sub',
    'Multiply': 'Mul',
    'Average': 'AddN',
    'Maximum': 'Maximum',
    'Minimum': 'Minimum',
    'Concatenate': 'ConcatV2',
    'Flatten': 'Reshape',
    'Reshape': 'Reshape',
}
# A Keras activation -> its op type. hard_sigmoid, hard_swish, gelu and mish
# are element-wise compositions of rows of the table (Relu6, Mul, Add, Erf,
# Softplus, Tanh): 'Identity' stands for "element-wise".
ACTIVATION_OPS = {
    'linear': 'Identity', 'relu': 'Relu', 'relu6': 'Relu6', 'elu': 'Elu',
    'selu': 'Selu', 'sigmoid': 'Sigmoid', 'tanh': 'Tanh',
    'softplus': 'Softplus', 'softsign': 'Softsign', 'swish': 'Swish',
    'silu': 'Swish', 'exponential': 'Exp', 'leaky_relu': 'LeakyRelu',
    'hard_sigmoid': 'Identity', 'hard_swish': 'Identity',
    'hard_silu': 'Identity', 'gelu': 'Identity', 'mish': 'Identity',
    'softmax': 'Softmax', 'log_softmax': 'LogSoftmax'}
_LAYERS = {'Dense': 'dense', 'Conv2D': 'conv', 'SeparableConv2D': 'separable'}
# Convolutions the shrink does not go through (stops that say so; their
# FLOPs are counted: `report`).
OTHER_CONVS = ('Conv1D', 'Conv3D', 'Conv1DTranspose', 'Conv2DTranspose',
               'Conv3DTranspose', 'SeparableConv1D', 'DepthwiseConv1D')
_MERGES = ('Add', 'Subtract', 'Multiply', 'Average', 'Maximum', 'Minimum')
# A Keras 3 operation (keras.ops, an operator on a symbolic tensor) the
# shrink goes through, by class name -> its op type, as for layers ('Identity'
# for an element-wise composition of rows). Of these, `_MERGES` may take two
# tensors.
KERAS_OPS = {
    'Add': 'AddV2', 'Subtract': 'Sub', 'Multiply': 'Mul', 'Divide': 'RealDiv',
    'TrueDivide': 'RealDiv', 'Maximum': 'Maximum', 'Minimum': 'Minimum',
    'Power': 'Pow', 'Negative': 'Neg', 'Absolute': 'Abs', 'Square': 'Square',
    'Sqrt': 'Sqrt', 'Exp': 'Exp', 'Log': 'Log', 'Tanh': 'Tanh',
    'Clip': 'Identity', 'Sign': 'Sign', 'Erf': 'Erf', 'Cast': 'Cast',
    'Relu': 'Relu', 'Relu6': 'Relu6', 'Sigmoid': 'Sigmoid',
    'HardSigmoid': 'Identity', 'HardSilu': 'Identity', 'Silu': 'Swish',
    'Gelu': 'Identity', 'Softplus': 'Softplus', 'Softsign': 'Softsign',
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


def op_type(layer):
  """The channel table's op type for a Keras layer, Keras 3 operation or
  Keras 2 TF op (None: not in it)."""
  name = type(layer).__name__
  if _operation(layer):
    return KERAS_OPS.get(op_name(layer))
  if name == 'Activation':
    return ACTIVATION_OPS.get(activation_name(layer))
  return OP_TYPES.get(name)


def activation_stops(layer):
  """Why a layer's own activation mixes its channels (None if it does not)."""
  op = ACTIVATION_OPS.get(activation_name(layer))
  if op is None:
    return 'its activation %s is not one the shrink knows' % (
        activation_name(layer))
  rule = rule_of(op)
  return rule.why if rule.kind == 'stop' else None


class Call(collections.namedtuple('Call', ['layer', 'kind', 'inputs',
                                           'output', 'shape', 'reason',
                                           'node'])):
  """One layer call: `inputs` and `output` are tensor ids (see `trace`),
  `shape` the output's static shape (a tuple, None for the batch), `node`
  the Keras node of the call."""


def is_op(layer):
  """Whether `layer` is a Keras 3 operation (no weights), not a layer."""
  return not hasattr(layer, 'weights')


def is_tf_op(layer):
  """Whether `layer` is a Keras 2 / tf_keras `TFOpLambda` (a TF function
  called on a symbolic tensor)."""
  return type(layer).__name__ in ('TFOpLambda', 'SlicingOpLambda')


def _operation(layer):
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


def _structure(node):
  """(args, kwargs) that the layer or operation of `node` was called with,
  symbolic tensors included."""
  arguments = getattr(node, 'arguments', None)     # Keras 3
  if arguments is not None:
    return arguments.args, arguments.kwargs
  return node.call_args, node.call_kwargs          # Keras 2 / tf_keras


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
  `tensors` ({input tensor id: tensor}), with its other arguments as they
  were."""
  args, kwargs = call_arguments(call.node, tensors)
  if not _operation(call.layer):
    kwargs = dict(kwargs, training=False)
  return call.layer(*args, **kwargs)


def _classify_op(op, node, in_shapes, out_shape):
  """(kind, reason) of a Keras 3 operation or Keras 2 TF op call:
  `classify`'s, for an op of `KERAS_OPS` whose other operands are numbers."""
  name = op_name(op)
  if name not in KERAS_OPS:
    if is_tf_op(op):
      return 'stop', ('the TF op tf.%s is not one the shrink goes through'
                      % getattr(op, 'symbol', '?'))
    return 'stop', ('the Keras op %s is not one the shrink goes through' %
                    name)
  args, kwargs = _structure(node)
  # Each argument that holds no tensor (Keras 2 records an array as a list);
  # a dtype (tf.cast's) or a name is no operand.
  others = [a for a in list(args) + list(kwargs.values())
            if not isinstance(a, (tf.DType, str)) and
            not any(hasattr(t, '_keras_history') for t in tf.nest.flatten(a))]
  if any(np.size(a) != 1 for a in others if a is not None):
    return 'stop', ('the Keras op %s takes an array besides the tensor; '
                    'only numbers pass' % name)
  return classify(op, in_shapes, out_shape)


def activation_name(layer):
  """The name of a layer's `activation` config entry ('linear' if none)."""
  value = layer.get_config().get('activation', 'linear')
  if isinstance(value, dict):   # Keras 3 may serialize it as a dict.
    value = value.get('config', value.get('class_name', ''))
    value = value if isinstance(value, str) else str(value)
  return value or 'linear'


def _shape(tensor):
  return tuple(tensor.shape)


def classify(layer, in_shapes, out_shape):
  """(kind, reason): the channel behaviour of one layer call.

  The kind comes from the channel table's row of the layer's op type
  (`op_type`): `layer` rows are Dense / conv layers, `elementwise` rows
  element-wise layers (merges when they take several inputs), `reduce` and
  `pool` rows pools, `reshape` rows flattens or channel-keeping reshapes.

  Args:
    layer: the Keras layer (or a Keras 3 operation of `KERAS_OPS`).
    in_shapes: the static shapes of its inputs (tuples, None unknown).
    out_shape: the static shape of its output.

  Returns:
    (kind, None), or ('stop', why) for a layer the shrink cannot go through.
  """
  name = op_name(layer) or type(layer).__name__
  if name == 'InputLayer':
    return 'input', None
  if name in OTHER_CONVS:
    return 'stop', ('a %s is not shrunk (of the convolutions only Conv2D, '
                    'DepthwiseConv2D and SeparableConv2D are)' % name)
  op = op_type(layer)
  if op is None:
    return 'stop', ('%s is not a layer the shrink knows (it keeps the '
                    'channels of its inputs)' % (
                        name if name != 'Activation' else
                        'the activation ' + activation_name(layer)))
  rule = rule_of(op)
  if rule.kind == 'stop':
    return 'stop', rule.why
  operation = _operation(layer)
  config = {} if operation else layer.get_config()
  if config.get('data_format', 'channels_last') != 'channels_last':
    return 'stop', ('a channels_first %s is not shrunk (only channels_last '
                    'layers are)' % name)
  last = [s[-1] if s else None for s in in_shapes]
  if None in last or not out_shape or out_shape[-1] is None:
    return 'stop', 'its channel count is not known statically'
  if getattr(layer, 'lora_enabled', False):
    return 'stop', ('LoRA is enabled on it (its kernel is the kernel plus '
                    'lora_kernel_a @ lora_kernel_b)')
  if rule.kind == 'layer':
    if name == 'Conv2D' and config.get('groups', 1) != 1:
      return 'stop', ('a grouped Conv2D (groups=%d) is not shrunk' %
                      config['groups'])
    return _LAYERS[name], None
  if name == 'BatchNormalization':
    axis = config.get('axis', -1)
    axis = axis if isinstance(axis, int) else (
        axis[0] if len(axis) == 1 else None)
    if axis is None or axis % len(in_shapes[0]) != len(in_shapes[0]) - 1:
      return 'stop', 'batch norm over an axis other than the last'
  # A merge layer, or an op of one of their names on two tensors (`x + 3.0`
  # is element-wise); an element-wise op on two tensors is no merge.
  merge = name in _MERGES and (len(in_shapes) > 1 or not operation)
  if rule.kind == 'elementwise' and (merge or len(in_shapes) > 1):
    if not merge or len(set(last)) != 1:
      return 'stop', 'its inputs do not line up channel by channel'
    return 'merge', None
  if rule.kind == 'concat' and config.get('axis', -1) % len(out_shape) != (
      len(out_shape) - 1):
    return 'stop', 'a concat on an axis other than the channels'
  if rule.kind == 'reshape':
    return _reshape_kind(in_shapes[0], out_shape)
  return {'reduce': 'pool'}.get(rule.kind, rule.kind), None


def _reshape_kind(in_shape, out_shape):
  inner = in_shape[1:]
  if None in inner or None in out_shape[1:]:
    return 'stop', 'a reshape of a tensor whose shape is not known'
  if len(out_shape) == 2 and out_shape[-1] == int(np.prod(inner)):
    return 'flatten', None
  if out_shape[-1] == in_shape[-1]:
    return 'reshape', None
  return 'stop', 'a reshape that does not keep the channels apart'


def _node_inputs(node):
  inputs = getattr(node, 'keras_inputs', None)    # tf_keras / Keras 2
  if inputs is None:
    inputs = node.input_tensors                   # Keras 3
  return tf.nest.flatten(inputs)


def _history(tensor):
  history = tensor._keras_history   # pylint: disable=protected-access
  return history[0], history[1]


def trace(model):
  """The layer calls of `model`, inputs first, in topological order.

  Returns:
    A list of `Call`. Tensor ids are `id()` of the model's symbolic tensors;
    `Call.output` of the last calls are `model.outputs`.

  Raises:
    ValueError: `model` has no symbolic inputs and outputs (a subclassed or
      unbuilt model), a layer is called more than once, or a layer returns
      more than one tensor.
  """
  outputs = getattr(model, 'outputs', None)
  if not outputs or not getattr(model, 'inputs', None):
    raise ValueError('shrinking needs a Sequential or functional model with '
                     'known inputs and outputs; %r has none (build it with '
                     'keras.Input, or as keras.Model(inputs, outputs))'
                     % model.name)
  calls, seen = [], {}

  def visit(tensor):
    layer, node_index = _history(tensor)
    if id(layer) in seen:
      if seen[id(layer)] != id(tensor):
        raise ValueError('layer %r is called more than once (shared '
                         'layers are not shrunk); give each call its own '
                         'layer' % layer.name)
      return
    seen[id(layer)] = id(tensor)
    if getattr(layer, 'layers', None):
      raise ValueError('layer %r is a nested model; shrink a model whose '
                       'layers are plain layers (flatten the nesting first)'
                       % layer.name)
    node = layer._inbound_nodes[node_index]   # pylint: disable=protected-access
    if len(tf.nest.flatten(node.outputs)) != 1:
      raise ValueError('layer %r returns several tensors; the shrink needs '
                       'one output per layer' % layer.name)
    inputs = [] if type(layer).__name__ == 'InputLayer' else _node_inputs(node)
    for parent in inputs:
      visit(parent)
    shapes = [_shape(t) for t in inputs]
    kind, reason = (
        _classify_op(layer, node, shapes, _shape(tensor))
        if _operation(layer) else
        classify(layer, shapes, _shape(tensor)))
    calls.append(Call(layer, kind, [id(t) for t in inputs], id(tensor),
                      _shape(tensor), reason, node))

  for tensor in list(model.inputs) + list(outputs):
    visit(tensor)
  return calls
