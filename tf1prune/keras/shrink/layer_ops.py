"""What TF ops of the channel table each Keras layer call computes.

    >>> from tf1prune.keras.shrink.layer_ops import ACTIVATIONS, evaluate
    >>> steps = ACTIVATIONS['hard_sigmoid'][0]      # Keras 3's relu6(x + 3) / 6
    >>> [s[0] for s in steps], evaluate(steps, [-4.0, 0.0, 4.0]).tolist()
    (['AddV2', 'Relu6', 'Mul'], [0.0, 0.5, 1.0])

`expand(view, expansion)` gives one call of a Keras model the nodes of the
ops it computes (`Expansion.op`), each an op type of the table of
`tf1prune.channels` with its constants (a bias, a batch norm's scale and
shift, a pad's widths) as constant tensors:

| Keras | nodes (op types of the table) |
|---|---|
| `InputLayer` | `Placeholder` |
| `Dense` (any rank) | `MatMul`, `BiasAdd`, the activation |
| `Conv2D`, `Conv1D`, `Conv2DTranspose` | `Conv2D` (for the transposed conv, its kernel's `[kh, kw, out, in]`), `BiasAdd`, the activation |
| `Conv2D` with `groups` = its input channels | `DepthwiseConv2dNative`, `BiasAdd`, the activation |
| `DepthwiseConv2D` | `DepthwiseConv2dNative`, `BiasAdd`, the activation |
| `SeparableConv2D` | `DepthwiseConv2dNative`, `Conv2D` (pointwise), `BiasAdd`, the activation |
| `BatchNormalization` (last axis) | `Mul` (`gamma / sqrt(var + eps)`), `AddV2` (`beta - mean * scale`) |
| `LayerNormalization` (last axis) | what `tf.nn.moments` and `tf.nn.batch_normalization` compute: a `Mean` over the channels, `Sub`, `Square`, `Mean`, `AddV2`, `Rsqrt`, `Mul`s and the `AddV2` of beta |
| `Rescaling`, `Normalization`, ConvNeXt's `LayerScale`, InceptionResNet's `CustomScaleLayer` | `Mul`, `AddV2`, `Sub`, `RealDiv` of constants |
| `Activation`, `ReLU`, `LeakyReLU`, `ELU`, `Softmax`, dropouts | their op (`ACTIVATION_OPS`), or a composition of ops (`hard_sigmoid`, `hard_silu`, `gelu`, `mish`) checked against the Keras function |
| pools, global pools (2-D and 1-D), `ZeroPadding2D` / `1D` | `MaxPool`, `AvgPool`, `Mean` / `Max` over height and width, `Pad` |
| `Cropping2D` / `1D`, `UpSampling2D` / `1D` | `Identity` for the channels (a constant stays that constant); `crop` / `upsample` attributes say what they do to the positions |
| `Add`, `Subtract`, `Multiply`, `Average`, `Maximum`, `Minimum`, `Concatenate` | `AddV2` / `AddN`, `Sub`, `Mul`, `AddN` and `Mul`, ..., `ConcatV2` |
| `Flatten`, `Reshape` | `Reshape` |
| a Keras 3 operation or a Keras 2 `TFOpLambda` (`x + 3.0`, `x * gate`) | its op (`KERAS_OPS`) with its numbers as constants, checked against the operation |
| anything else | a stop node: its channels end there, with why (`why`) |

A tensor of rank 3 (`[N, L, C]`, a 1-D layer's) is seen as `[N, 1, L, C]`,
as TF computes 1-D convs and pools. An activation or a Keras operation made
of several rows is checked against the Keras function on a probe
(`composition`, `_checked`): where no candidate computes the same, the call
is a stop.
"""

import collections
import math

import numpy as np

from tf1prune.channels.table import rule_of
from tf1prune.keras.shrink import layer_calls
from tf1prune.keras.shrink.layer_calls import (ACTIVATION_OPS, KERAS_OPS,
                                               OP_TYPES, activation_name,
                                               is_operation, op_name,
                                               operands, structure)

__all__ = ['ACTIVATIONS', 'Expansion', 'Member', 'Node', 'composition',
           'evaluate', 'expand']

# Element-wise activations that are no single op of the table: candidate
# compositions of its rows, `[(op, first, second)]` where an operand is
# 'x' (the activation's input), '.' (the previous op's output) or a number.
# The view takes the first that computes what the Keras function computes.
_HARD_SIGMOID = [
    [('AddV2', '.', 3.0), ('Relu6', '.'), ('Mul', '.', 1.0 / 6.0)],
    [('Mul', '.', 0.2), ('AddV2', '.', 0.5), ('Minimum', '.', 1.0),
     ('Maximum', '.', 0.0)]]
_GELU_EXACT = [('Mul', '.', 1.0 / math.sqrt(2.0)), ('Erf', '.'),
               ('AddV2', '.', 1.0), ('Mul', 'x', '.'), ('Mul', '.', 0.5)]
_GELU_TANH = [('Pow', '.', 3.0), ('Mul', '.', 0.044715), ('AddV2', 'x', '.'),
              ('Mul', '.', math.sqrt(2.0 / math.pi)), ('Tanh', '.'),
              ('AddV2', '.', 1.0), ('Mul', 'x', '.'), ('Mul', '.', 0.5)]
ACTIVATIONS = {
    'hard_sigmoid': _HARD_SIGMOID,
    'hard_silu': [c + [('Mul', 'x', '.')] for c in _HARD_SIGMOID],
    'hard_swish': [c + [('Mul', 'x', '.')] for c in _HARD_SIGMOID],
    'gelu': [_GELU_EXACT, _GELU_TANH],
    'gelu_tanh': [_GELU_TANH],
    'mish': [[('Softplus', '.'), ('Tanh', '.'), ('Mul', 'x', '.')]],
}
_PROBE = np.linspace(-7.5, 7.5, 61)

_CONVS = ('Conv1D', 'Conv2D', 'Conv2DTranspose')
_OTHER_CONVS = ('Conv3D', 'Conv1DTranspose', 'Conv3DTranspose',
                'SeparableConv1D', 'DepthwiseConv1D')


class Node(collections.namedtuple('Node', ['name', 'op', 'inputs', 'output',
                                           'attrs', 'call', 'part'])):
  """One op of a layer call: `inputs` and `output` are tensor keys, `attrs`
  a dict, `call` the `layer_calls.Call`, `part` what it is of the layer
  ('kernel', 'bias', 'activation', 'depthwise', 'pointwise', ...)."""


class Member(collections.namedtuple('Member', ['node', 'axis',
                                               'multiplier'])):
  """Where a kernel's channels are: the output of `node` (`axis` -1, or -2
  for a transposed conv's kernel), or for a depthwise kernel (`node` a
  depthwise conv) the channels of its input (`axis` 2), spread over its
  `multiplier` outputs each (`axis` -1: a grouped Conv2D's kernel, whose
  last axis holds them)."""


def _frame(shape):
  """A Keras static shape in the view's frame: rank 3 as `[N, 1, L, C]`."""
  shape = [None if d is None else int(d) for d in shape]
  if len(shape) == 3:
    return [shape[0], 1] + shape[1:]
  return shape


def _short(variable):
  return variable.name.split('/')[-1].split(':')[0]


def _weights(layer):
  """{short name: variable} of a layer's weights."""
  return dict((_short(v), v) for v in getattr(layer, 'weights', []))


def _value(variable):
  return np.asarray(variable.numpy(), np.float64)


def _pair(value, count=2):
  if isinstance(value, (list, tuple)):
    return tuple(int(v) for v in value)
  return (int(value),) * count


def evaluate(steps, x):
  """What the composition `steps` computes of `x` (and `y`), float64, by the
  table's value functions."""
  x = np.asarray(x, np.float64)
  previous = x
  for step in steps:
    args = []
    for operand in step[1:]:
      if isinstance(operand, str):
        args.append(x if operand == 'x' else previous)
      else:
        args.append(np.float64(operand))
    rule = rule_of(step[0])
    previous = rule.value(lambda key, default: default, *args)
  return previous


class Expansion(object):
  """The nodes of one call, built in order; the last one outputs the call's
  tensor."""

  def __init__(self, view, call, key, inputs):
    self.view, self.call, self.key = view, call, key
    self.inputs = inputs       # the input tensors' keys
    self.nodes = []
    self.shape = _frame(call.shape)

  def const(self, suffix, value):
    """A constant tensor (an ndarray, or a callable giving one)."""
    key = '%s/%s' % (self.key, suffix)
    key = self.view._unique_key(key)
    self.view._consts[key] = value
    if callable(value):
      self.view._lazy_shapes[key] = value
    else:
      self.view._shapes[key] = list(np.shape(value))
    return key

  def op(self, op, inputs, part, shape=None, attrs=None):
    """Adds a node; returns its output key."""
    name = self.view._unique_key('%s/%s' % (self.key, op))
    self.nodes.append([name, op, list(inputs), name, dict(attrs or {}),
                       part, shape or self.shape])
    return name

  def stop(self, why, op=None):
    """The call as one node where its channels end, `why`."""
    self.nodes = []
    self.op(op or '%s (Keras)' % type(self.call.layer).__name__,
            self.inputs, 'stop', attrs={'why': why})

  def activation(self, x, name, part='activation'):
    """The nodes of the Keras activation `name` on `x` (`part`
    'activation': a layer's own activation, 'op': an `Activation`
    layer)."""
    if name == 'linear':
      return x
    op = ACTIVATION_OPS.get(name)
    if op is not None:
      return self.op(op, [x], part)
    steps = composition(self.view.keras, name, self.view.compositions)
    if steps is None:
      return self.op('%s (activation)' % name, [x], part, attrs={
          'why': 'the activation %s is not one the shrink knows' % name})
    return self.steps(x, steps, part)

  def steps(self, x, steps, part, attrs=None):
    """The nodes of a composition (see `ACTIVATIONS`)."""
    previous = x
    for index, step in enumerate(steps):
      args = []
      for k, operand in enumerate(step[1:]):
        if isinstance(operand, str):
          args.append(x if operand == 'x' else previous)
        else:
          args.append(self.const('%s_%d_%d' % (part, index, k),
                                 np.float64(operand)))
      previous = self.op(step[0], args, part, attrs=attrs)
    return previous

  def finish(self):
    """The nodes, the last one renamed to the call's key."""
    if not self.nodes:
      self.op('Identity', self.inputs[:1], 'identity')
    last = self.nodes[-1]
    self.renamed = (last[3], self.key)
    last[0] = last[3] = self.key
    nodes = []
    for name, op, inputs, output, attrs, part, shape in self.nodes:
      self.view._shapes[output] = list(shape)
      nodes.append(Node(name, op, inputs, output, attrs, self.call, part))
    return nodes


def composition(keras, name, cache):
  """The first candidate of `ACTIVATIONS[name]` that computes what the
  activation `name` of `keras` computes (None if none does); `cache`: a
  dict kept between calls."""
  if name not in cache:
    found = None
    function = getattr(keras.activations, name, None)
    if function is not None and name in ACTIVATIONS:
      import tensorflow as tf
      expected = np.asarray(function(tf.constant(_PROBE, tf.float32)),
                            np.float64)
      for steps in ACTIVATIONS[name]:
        got = evaluate(steps, _PROBE)
        if np.allclose(got, expected, rtol=1e-5, atol=1e-6):
          found = steps
          break
    cache[name] = found
  return cache[name]


def expand(view, e):
  """Adds the nodes of the call of expansion `e` (see the module doc)."""
  layer = e.call.layer
  if is_operation(layer):
    return _operation(view, e)
  name = type(layer).__name__
  if name == 'InputLayer':
    e.op('Placeholder', [], 'input')
    return None
  config = layer.get_config()
  if config.get('data_format', 'channels_last') != 'channels_last':
    return e.stop('a channels_first %s is not shrunk (only channels_last '
                  'layers are)' % name)
  if getattr(layer, 'lora_enabled', False):
    return e.stop('LoRA is enabled on it (its kernel is the kernel plus '
                  'lora_kernel_a @ lora_kernel_b)')
  if name in _OTHER_CONVS:
    return e.stop('a %s is not shrunk (of the convolutions only Conv1D, '
                  'Conv2D, Conv2DTranspose, DepthwiseConv2D and '
                  'SeparableConv2D are)' % name)
  handler = _LAYERS.get(name)
  if handler is None and name in OP_TYPES:
    handler = _one_op
  if handler is None:
    return e.stop('%s is not a layer the shrink knows (it keeps the '
                  'channels of its inputs)' % name)
  return handler(view, e, layer, config)


# -------------------------------------------------------------- expansions


def _kernel(layer, short, reshape=None):
  """A lazy constant of a layer's weight."""
  variable = _weights(layer)[short]

  def value():
    v = _value(variable)
    return v if reshape is None else reshape(v)
  return value


def _bias_and_activation(view, e, layer, x):
  w = _weights(layer)
  if 'bias' in w:
    x = e.op('BiasAdd', [x, e.const('bias', _kernel(layer, 'bias'))], 'bias')
  return e.activation(x, activation_name(layer))


def _conv_attrs(layer, config, rank):
  return {'strides': _pair(config.get('strides', 1), rank),
          'dilations': _pair(config.get('dilation_rate', 1), rank),
          'padding': config.get('padding', 'valid').upper(),
          'kernel_size': _pair(config['kernel_size'], rank)}


def _as_2d(attrs):
  """Conv1D attributes in the `[N, 1, L, C]` frame."""
  return dict((k, (1,) + v if isinstance(v, tuple) else v)
              for k, v in attrs.items())


def _dense(view, e, layer, config):
  x = e.op('MatMul', [e.inputs[0], e.const('kernel', _kernel(layer, 'kernel'))],
           'kernel')
  view.members[(id(layer), 'kernel')] = Member(x, -1, 1)
  _bias_and_activation(view, e, layer, x)


def _conv(view, e, layer, config):
  name = type(layer).__name__
  rank = 1 if name == 'Conv1D' else 2
  attrs = _conv_attrs(layer, config, rank)
  if rank == 1:
    attrs = _as_2d(attrs)
    reshape = lambda v: v[None]         # [k, in, out] -> [1, k, in, out]
  else:
    reshape = None
  groups = config.get('groups', 1)
  in_channels = (e.view.shape(e.inputs[0]) or [None])[-1]
  if groups != 1:
    if groups != in_channels:
      return e.stop('a grouped %s (groups=%d) is not shrunk' % (name, groups))
    multiplier = layer.filters // groups

    def depthwise(v):       # [kh, kw, 1, C * m] -> [kh, kw, C, m]
      v = v if reshape is None else reshape(v)
      return v.reshape(v.shape[:2] + (groups, multiplier))
    x = e.op('DepthwiseConv2dNative', [
        e.inputs[0], e.const('kernel', _kernel(layer, 'kernel', depthwise))],
             'depthwise', attrs=dict(attrs, grouped=True))
    view.members[(id(layer), 'kernel')] = Member(x, -1, multiplier)
    return _bias_and_activation(view, e, layer, x)
  transposed = name == 'Conv2DTranspose'
  if transposed:
    attrs['transposed'] = True
    attrs['output_padding'] = config.get('output_padding')
  x = e.op('Conv2D', [e.inputs[0], e.const('kernel', _kernel(
      layer, 'kernel', reshape))], 'kernel', attrs=attrs)
  view.members[(id(layer), 'kernel')] = Member(x, -2 if transposed else -1, 1)
  return _bias_and_activation(view, e, layer, x)


def _depthwise(view, e, layer, config):
  w = _weights(layer)
  short = 'depthwise_kernel' if 'depthwise_kernel' in w else 'kernel'
  attrs = _conv_attrs(layer, config, 2)
  x = e.op('DepthwiseConv2dNative', [e.inputs[0], e.const(
      'kernel', _kernel(layer, short))], 'depthwise', attrs=attrs)
  view.members[(id(layer), short)] = Member(x, 2, 1)
  _bias_and_activation(view, e, layer, x)


def _separable(view, e, layer, config):
  attrs = _conv_attrs(layer, config, 2)
  in_channels = e.view.shape(e.inputs[0])[-1]
  mid_shape = list(e.shape[:-1]) + [in_channels * config['depth_multiplier']]
  mid = e.op('DepthwiseConv2dNative', [e.inputs[0], e.const(
      'depthwise_kernel', _kernel(layer, 'depthwise_kernel'))], 'depthwise',
             shape=mid_shape, attrs=attrs)
  view.members[(id(layer), 'depthwise_kernel')] = Member(mid, 2, 1)
  x = e.op('Conv2D', [mid, e.const('pointwise_kernel', _kernel(
      layer, 'pointwise_kernel'))], 'pointwise', attrs={
          'strides': (1, 1), 'dilations': (1, 1), 'padding': 'VALID',
          'kernel_size': (1, 1)})
  view.members[(id(layer), 'pointwise_kernel')] = Member(x, -1, 1)
  _bias_and_activation(view, e, layer, x)


def _last_axis(config, rank):
  axis = config.get('axis', -1)
  if isinstance(axis, (list, tuple)):
    if len(axis) != 1:
      return False
    axis = axis[0]
  return axis % rank == rank - 1


def _batch_norm(view, e, layer, config):
  if not _last_axis(config, len(e.call.shape)):
    return e.stop('batch norm over an axis other than the last')
  w = _weights(layer)
  eps = config.get('epsilon', 1e-3)

  def scale():
    s = 1.0 / np.sqrt(_value(w['moving_variance']) + eps)
    return s * _value(w['gamma']) if 'gamma' in w else s

  def shift():
    s = -_value(w['moving_mean']) * scale()
    return s + _value(w['beta']) if 'beta' in w else s
  x = e.op('Mul', [e.inputs[0], e.const('scale', scale)], 'scale')
  e.op('AddV2', [x, e.const('shift', shift)], 'shift')


def _layer_norm(view, e, layer, config):
  if not _last_axis(config, len(e.call.shape)):
    return e.stop('a LayerNormalization over axes other than the channels '
                  'is not shrunk')
  w = _weights(layer)
  rank = len(e.shape)
  axes = e.const('axes', np.array([rank - 1]))
  stat = list(e.shape[:-1]) + [1]
  x = e.inputs[0]
  if not config.get('rms_scaling', False):
    mean = e.op('Mean', [x, axes], 'mean', shape=stat,
                attrs={'keep_dims': True})
    x = e.op('Sub', [x, mean], 'center')
  square = e.op('Square', [x], 'variance')
  var = e.op('Mean', [square, axes], 'variance', shape=stat,
             attrs={'keep_dims': True})
  var = e.op('AddV2', [var, e.const('epsilon', np.float64(
      config.get('epsilon', 1e-3)))], 'variance', shape=stat)
  inv = e.op('Rsqrt', [var], 'variance', shape=stat)
  x = e.op('Mul', [x, inv], 'normalize')
  if 'gamma' in w:
    x = e.op('Mul', [x, e.const('gamma', _kernel(layer, 'gamma'))], 'gamma')
  if 'beta' in w:
    e.op('AddV2', [x, e.const('beta', _kernel(layer, 'beta'))], 'beta')


def _layer_scale(view, e, layer, config):
  """ConvNeXt's `gamma * x` (Keras 3 names its one weight 'variable')."""
  w = list(getattr(layer, 'weights', []))
  if len(w) != 1 or len(w[0].shape) != 1:
    return e.stop('%s is not a layer the shrink knows (it keeps the channels '
                  'of its inputs)' % type(layer).__name__)
  e.op('Mul', [e.inputs[0], e.const('gamma', lambda: _value(w[0]))],
       'gamma')


def _custom_scale(view, e, layer, config):
  """InceptionResNetV2's `x[0] + x[1] * scale`."""
  if len(e.inputs) != 2 or 'scale' not in config:
    return e.stop('%s is not a layer the shrink knows (it keeps the channels '
                  'of its inputs)' % type(layer).__name__)
  x = e.op('Mul', [e.inputs[1], e.const('scale', np.float64(
      config['scale']))], 'scale')
  e.op('AddV2', [e.inputs[0], x], 'add')


def _rescaling(view, e, layer, config):
  x = e.op('Mul', [e.inputs[0], e.const('scale', np.asarray(
      config['scale'], np.float64))], 'scale')
  e.op('AddV2', [x, e.const('offset', np.asarray(config.get('offset', 0.0),
                                                  np.float64))], 'offset')


def _normalization(view, e, layer, config):
  if layer.mean is None or not _last_axis(
      {'axis': config.get('axis', -1)}, len(e.call.shape)):
    return e.stop('a Normalization over axes other than the channels is not '
                  'shrunk')
  from tf1prune.keras import _version
  eps = _version.keras_of(layer).backend.epsilon()

  def mean():
    return np.asarray(layer.mean, np.float64)

  def std():
    return np.maximum(np.sqrt(np.asarray(layer.variance, np.float64)), eps)
  if config.get('invert', False):
    x = e.op('Mul', [e.inputs[0], e.const('std', std)], 'std')
    e.op('AddV2', [x, e.const('mean', mean)], 'mean')
  else:
    x = e.op('Sub', [e.inputs[0], e.const('mean', mean)], 'mean')
    e.op('RealDiv', [x, e.const('std', std)], 'std')


def _relu(view, e, layer, config):
  top = config.get('max_value')
  slope = float(config.get('negative_slope', 0.0) or 0.0)
  threshold = float(config.get('threshold', 0.0) or 0.0)
  if threshold:
    return e.stop('a ReLU with a threshold (%g) is not one the shrink knows'
                  % threshold)
  if slope:
    x = e.op('LeakyRelu', e.inputs, 'op', attrs={'alpha': slope})
  elif top is not None and float(top) == 6.0:
    return e.op('Relu6', e.inputs, 'op')
  else:
    x = e.op('Relu', e.inputs, 'op')
  if top is not None:
    e.op('Minimum', [x, e.const('max_value', np.float64(top))], 'op')


def _leaky_relu(view, e, layer, config):
  alpha = config.get('negative_slope', config.get('alpha', 0.3))
  e.op('LeakyRelu', e.inputs, 'op', attrs={'alpha': float(alpha)})


def _elu(view, e, layer, config):
  if float(config.get('alpha', 1.0)) != 1.0:
    return e.stop('an ELU with alpha %g is not one the shrink knows'
                  % config['alpha'])
  e.op('Elu', e.inputs, 'op')


def _activation(view, e, layer, config):
  e.activation(e.inputs[0], activation_name(layer), 'op')


def _softmax(view, e, layer, config):
  e.op('Softmax', e.inputs, 'op')


def _axis_const(e, axis):
  """A Keras axis of the call's output as a constant in the view's frame."""
  rank = len(e.call.shape)
  axis = int(axis) % rank
  if rank == 3 and axis >= 1:
    axis += 1
  return e.const('axis', np.array(axis))


def _concat(view, e, layer, config):
  e.op('ConcatV2', e.inputs + [_axis_const(e, config.get('axis', -1))],
       'concat')


def _merge(view, e, layer, config):
  name = type(layer).__name__
  op = OP_TYPES[name]
  if name in ('Add', 'Average') and len(e.inputs) > 2 or name == 'Average':
    x = e.op('AddN', e.inputs, 'merge')
    if name == 'Average':
      e.op('Mul', [x, e.const('mean', np.float64(1.0 / len(e.inputs)))],
           'merge')
    return
  x = e.inputs[0]
  for other in e.inputs[1:]:
    x = e.op(op, [x, other], 'merge')


def _pool(view, e, layer, config):
  rank = 1 if type(layer).__name__.endswith('1D') else 2
  size = _pair(config.get('pool_size', 2), rank)
  strides = _pair(config.get('strides') or size, rank)
  if rank == 1:
    size, strides = (1,) + size, (1,) + strides
  e.op(OP_TYPES[type(layer).__name__], e.inputs, 'pool', attrs={
      'ksize': size, 'strides': strides,
      'padding': config.get('padding', 'valid').upper()})


def _global_pool(view, e, layer, config):
  e.op(OP_TYPES[type(layer).__name__], [e.inputs[0], e.const(
      'axes', np.array([1, 2]))], 'pool', attrs={
          'keep_dims': bool(config.get('keepdims', False))})


def _padding(view, e, layer, config):
  value = config['padding']
  if type(layer).__name__.endswith('1D'):
    pads = [(0, 0), (0, 0), _pair(value), (0, 0)]
  else:
    value = _pair(value) if not isinstance(value, (list, tuple)) or \
        not isinstance(value[0], (list, tuple)) else value
    pads = [(0, 0)] + [_pair(v) for v in value] + [(0, 0)]
  e.op('Pad', [e.inputs[0], e.const('paddings', np.array(pads))], 'pad')


def _cropping(view, e, layer, config):
  value = config['cropping']
  if type(layer).__name__.endswith('1D'):
    crop = ((0, 0), _pair(value))
  else:
    crop = tuple(_pair(v) for v in value)
  e.op('Identity', e.inputs, 'crop', attrs={'crop': crop})


def _upsampling(view, e, layer, config):
  if type(layer).__name__.endswith('1D'):
    size = (1, int(config['size']))
  else:
    size = _pair(config['size'])
  e.op('Identity', e.inputs, 'upsample', attrs={
      'upsample': size, 'interpolation': config.get('interpolation',
                                                    'nearest')})


def _reshape(view, e, layer, config):
  e.op('Reshape', [e.inputs[0], e.const('shape', np.array(
      [-1 if d is None else d for d in e.call.shape]))], 'reshape')


def _one_op(view, e, layer, config):
  e.op(OP_TYPES[type(layer).__name__], e.inputs, 'op')


_LAYERS = {
    'Dense': _dense, 'Conv2D': _conv, 'Conv1D': _conv,
    'Conv2DTranspose': _conv, 'DepthwiseConv2D': _depthwise,
    'SeparableConv2D': _separable, 'BatchNormalization': _batch_norm,
    'LayerNormalization': _layer_norm, 'LayerScale': _layer_scale,
    'CustomScaleLayer': _custom_scale, 'Rescaling': _rescaling,
    'Normalization': _normalization, 'ReLU': _relu,
    'LeakyReLU': _leaky_relu, 'ELU': _elu, 'Activation': _activation,
    'Softmax': _softmax, 'Concatenate': _concat,
    'Add': _merge, 'Subtract': _merge, 'Multiply': _merge,
    'Average': _merge, 'Maximum': _merge, 'Minimum': _merge,
    'MaxPooling2D': _pool, 'AveragePooling2D': _pool,
    'MaxPooling1D': _pool, 'AveragePooling1D': _pool,
    'GlobalAveragePooling2D': _global_pool,
    'GlobalMaxPooling2D': _global_pool,
    'GlobalAveragePooling1D': _global_pool,
    'GlobalMaxPooling1D': _global_pool,
    'ZeroPadding2D': _padding, 'ZeroPadding1D': _padding,
    'Cropping2D': _cropping, 'Cropping1D': _cropping,
    'UpSampling2D': _upsampling, 'UpSampling1D': _upsampling,
    'Flatten': _reshape, 'Reshape': _reshape,
}


# -------------------------------------------------------------- operations


_MERGES = ('Add', 'Subtract', 'Multiply', 'Maximum', 'Minimum', 'Divide',
           'TrueDivide', 'Power')


def _operation_steps(layer, node, name):
  """The composition (see `ACTIVATIONS`) of a one-tensor operation with
  its hyperparameters, or None."""
  op = KERAS_OPS[name]
  args, kwargs = structure(node)
  numbers = [a for a in operands(node) if a is not None]
  if name == 'LeakyRelu':
    alpha = getattr(layer, 'negative_slope', None)
    if alpha is None:
      alpha = kwargs.get('alpha', numbers[0] if numbers else 0.2)
    return [('LeakyRelu', '.')], {'alpha': float(alpha)}
  if name == 'Clip':
    low = getattr(layer, 'x_min', None)
    high = getattr(layer, 'x_max', None)
    if low is None:
      low = kwargs.get('clip_value_min', numbers[0] if numbers else None)
      high = kwargs.get('clip_value_max',
                        numbers[1] if len(numbers) > 1 else None)
    if low is None or high is None:
      return None, None
    return [('Minimum', '.', float(high)), ('Maximum', '.', float(low))], {}
  if name == 'Gelu':
    approximate = getattr(layer, 'approximate', None)
    if approximate is None:
      approximate = kwargs.get('approximate', numbers[0] if numbers else False)
    return (_GELU_TANH if approximate else _GELU_EXACT), {}
  if name == 'Cast':
    return [('Cast', '.')], {'DstT': np.float32}
  if op in ACTIVATIONS:
    return list(ACTIVATIONS[op][0]), {}
  return [(op, '.')], {}


def _number(value):
  """Whether `value` is an operand number (Python, NumPy or an eager tensor,
  as Keras 2 records `1.0 - x`)."""
  import tensorflow as tf
  if value is None or isinstance(value, (str, bool, tf.DType)):
    return False
  try:
    return np.size(np.asarray(value, np.float64)) == 1
  except (TypeError, ValueError):
    return False


def _operation(view, e):
  """A Keras 3 operation or a Keras 2 TF op, checked against itself."""
  layer, node = e.call.layer, e.call.node
  name = op_name(layer)
  if name not in KERAS_OPS:
    if getattr(layer, 'symbol', None) is not None:
      return e.stop('the TF op tf.%s is not one the shrink goes through'
                    % layer.symbol)
    return e.stop('the Keras op %s is not one the shrink goes through' %
                  type(layer).__name__)
  numbers = [a for a in operands(node) if a is not None]
  if any(np.size(a) != 1 for a in numbers):
    return e.stop('the Keras op %s takes an array besides the tensor; only '
                  'numbers pass' % name)
  args, kwargs = structure(node)
  ordered = [a for a in list(args) + [kwargs[k] for k in kwargs if k != 'name']
             if hasattr(a, '_keras_history') or _number(a)]
  tensors = [a for a in ordered if hasattr(a, '_keras_history')]
  if name in _MERGES and len(ordered) >= 2:
    inputs = []
    for a in ordered[:2]:
      if hasattr(a, '_keras_history'):
        index = [i for i, t in enumerate(tensors) if t is a][0]
        inputs.append(e.inputs[min(index, len(e.inputs) - 1)])
      else:
        inputs.append(e.const('operand', np.float64(
            np.ravel(np.asarray(a, np.float64))[0])))
    e.op(KERAS_OPS[name], inputs, 'op')
  else:
    steps, attrs = _operation_steps(layer, node, name)
    if steps is None or len(set(id(t) for t in tensors)) != 1:
      return e.stop('the Keras op %s is not one the shrink goes through' %
                    name)
    e.steps(e.inputs[0], steps, 'op', attrs=attrs)
  if not _checked(view, e):
    return e.stop('the Keras op %s is not one the shrink goes through (the '
                  'ops the view gives it compute something else)' % name)
  return None


def _checked(view, e):
  """Whether the nodes of an operation call compute what the call does, on
  a probe (one value per position of the last axis)."""
  import tensorflow as tf
  shapes = [view.shape(k) for k in e.inputs]
  channels = max([s[-1] for s in shapes if s and s[-1]] + [1])
  probe = np.linspace(-7.5, 7.5, channels * len(e.inputs)).reshape(
      len(e.inputs), channels)
  values = dict((k, probe[i]) for i, k in enumerate(e.inputs))
  for name, op, inputs, output, attrs, _, _ in e.nodes:
    args = [values[k] if k in values else view.constant(k) for k in inputs]
    with np.errstate(all='ignore'):
      values[output] = rule_of(op).value(
          lambda key, default, attrs=attrs: attrs.get(key, default), *args)
  got = values[e.nodes[-1][3]]
  raw = layer_calls.node_inputs(e.call.node)
  tensors = {}
  for i, tensor in enumerate(raw):
    shape = [1] * (len(tensor.shape) - 1) + [channels]
    tensors[id(tensor)] = tf.constant(
        np.broadcast_to(probe[i], shape).astype(np.float32))
  try:
    expected = np.asarray(layer_calls.run_call(e.call, tensors), np.float64)
  except Exception:  # pylint: disable=broad-except
    return False
  expected = expected.reshape(-1)[-channels:]
  return np.allclose(np.broadcast_to(got, expected.shape), expected,
                     rtol=1e-5, atol=1e-5, equal_nan=True)
