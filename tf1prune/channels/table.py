"""The op table: what each TF op type does with channels (NHWC, last axis).

    >>> from tf1prune.channels.table import RULES, rule_of
    >>> RULES['Relu6'].kind, RULES['Relu6'].value(None, [-1.0, 9.0]).tolist()
    ('elementwise', [0.0, 6.0])
    >>> rule_of('Softmax').why
    'softmax mixes all channels'

A `Rule` per op type says two things:

- how channels go through it (`kind`): `elementwise` (output channel c reads
  channel c of each input; two inputs that both carry channels tie them: a
  residual add, an SE gate, `x * sigmoid(x)`), `concat` (at offsets),
  `depthwise` (input channel c feeds outputs `c * m .. c * m + m - 1`),
  `reshape` (flattens NHWC into rows `[N, K]`, or keeps the last axis:
  `[N, C] <-> [N, 1, 1, C]`, `[N, H, W, C] <-> [N * H * W, C]`),
  `lrn` (channel c of the output is channel c of the input divided by a sum
  over a band of channels around it),
  `reduce` (over height and width), `pool`, `pad`, `slice` (a
  `StridedSlice` or `Slice` of the positions or the batch that takes the
  channel axis whole: NASNet's `pad(x)[:, 1:, 1:, :]`), `spatial` (ops that
  move positions, not channels: `SpaceToBatchND`, `BatchToSpaceND`,
  `ResizeBilinear`, `ResizeNearestNeighbor`), `split` (`Split` or
  `SplitV`: output k takes the channels at its offset, the inverse of a
  concat; split on another axis, each output takes every channel whole),
  `identity_n`, `layer` (a Conv2D, MatMul, transposed conv or Conv3D:
  where channels start and end), or `stop` (`why`);
- how a channel that is constant per example goes through it (`value`): a
  NumPy function `value(attr, *inputs)` of the float64 constants (for
  `reduce`: `value(x, positions)` of the `[H, W, C]` or `[1, 1, C]` value
  and the number of positions reduced, None if unknown)
  (`attr(name, default)` reads the node's attributes), `POSITIONAL` (zero
  padding makes it depend on the position: the shrink's `padding` module
  computes it), or None: it does not pass (`why` says why), though the
  channels still go together for training.

`additive` marks the element-wise ops where an operand that carries no
removable channel (an identity shortcut from the input) keeps the channels
(for training: the group is blocked); a `Mul` by such a tensor (dropout)
does not. `product` marks `Mul`: a factor that is 0 makes the result 0,
whatever the other factors are.

An element-wise op may also read a tensor of one channel that it broadcasts
over all of them, as spatial attention does (`x * sigmoid(conv(x) -> 1
channel)`): output channel c is `x_c * a`. `classify` lists such an input
apart (`ChannelOp.loose`): it ties no channels.

Where the shrink follows what a removed channel is, NaN stands for a value
it does not know (one that varies per example, or a map of unknown size):
`constant_through(rule, attr, *inputs)` applies an element-wise row to
such values, NaN wherever an input is NaN, except where a `product` has a
factor that is 0.
"""

import collections
import math

import numpy as np

POSITIONAL = 'positional'


class Rule(collections.namedtuple('Rule', ['kind', 'value', 'why',
                                           'additive', 'product'])):
  """One row of the op table (see the module docstring)."""


def _row(kind, value=None, why=None, additive=False, product=False):
  return Rule(kind, value, why, additive, product)


def _unary(f):
  return _row('elementwise', lambda attr, x: f(np.asarray(x, np.float64)))


def _sigmoid(x):
  return 0.5 * (1.0 + np.tanh(0.5 * x))


def _elu(x):
  return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


_SELU = (1.0507009873554804934193349852946, 1.6732632423543772848170429916717)
_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _leaky(attr, x):
  x = np.asarray(x, np.float64)
  return np.where(x > 0, x, x * attr('alpha', 0.2))


def _cast(attr, x):
  dtype = np.dtype(attr('DstT', np.float32))
  if dtype.kind == 'f':
    return np.asarray(x, np.float64)
  if dtype.kind == 'b':
    return (np.asarray(x) != 0).astype(np.float64)
  return np.trunc(x)


def _binary(f, additive=False, product=False):
  return _row('elementwise', lambda attr, a, b: f(np.asarray(a, np.float64),
                                                   np.asarray(b, np.float64)),
              additive=additive, product=product)


def _div_no_nan(a, b):
  return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


def _lrn(attr, x):
  """What an LRN makes of a constant channel: 0 stays 0; any other value is
  divided by a sum over its neighbours, which varies (NaN: not a constant)."""
  x = np.asarray(x, np.float64)
  return np.where(x == 0, 0.0, np.nan)


def _reduce(f):
  return _row('reduce', f)


def _sum(x, count):
  """A Sum over the positions: the mean times their number; where that
  number is unknown, only a channel that is 0 everywhere is known."""
  if count is None:
    zero = np.all(x == 0, axis=(0, 1), keepdims=True)
    return np.where(zero, 0.0, np.nan)
  return x.sum(axis=(0, 1), keepdims=True) * (
      count / float(x.shape[0] * x.shape[1]))


_BATCH_NORM = _row('elementwise', None, 'batch norm in training form (or '
                   'with statistics that are not constants) is not folded')

RULES = {
    # Copies and casts.
    'Identity': _unary(lambda x: x),
    'Snapshot': _unary(lambda x: x),
    'StopGradient': _unary(lambda x: x),
    'PreventGradient': _unary(lambda x: x),
    'CheckNumerics': _unary(lambda x: x),
    'EnsureShape': _unary(lambda x: x),
    'Cast': _row('elementwise', _cast),
    'IdentityN': _row('identity_n'),
    # Activations.
    'Relu': _unary(lambda x: np.maximum(x, 0.0)),
    'Relu6': _unary(lambda x: np.clip(x, 0.0, 6.0)),
    'Elu': _unary(_elu),
    'Selu': _unary(lambda x: _SELU[0] * np.where(x > 0, x, _SELU[1] * np.expm1(
        np.minimum(x, 0.0)))),
    'LeakyRelu': _row('elementwise', _leaky),
    'Sigmoid': _unary(_sigmoid),
    'Tanh': _unary(np.tanh),
    'Softplus': _unary(lambda x: np.logaddexp(0.0, x)),
    'Softsign': _unary(lambda x: x / (1.0 + np.abs(x))),
    'Swish': _unary(lambda x: x * _sigmoid(x)),
    'Erf': _unary(_ERF),
    # Arithmetic of one tensor.
    'Neg': _unary(np.negative),
    'Abs': _unary(np.abs),
    'Sign': _unary(np.sign),
    'Exp': _unary(np.exp),
    'Expm1': _unary(np.expm1),
    'Log': _unary(np.log),
    'Log1p': _unary(np.log1p),
    'Sqrt': _unary(np.sqrt),
    'Rsqrt': _unary(lambda x: 1.0 / np.sqrt(x)),
    'Square': _unary(np.square),
    'Reciprocal': _unary(lambda x: 1.0 / x),
    'Inv': _unary(lambda x: 1.0 / x),
    'Floor': _unary(np.floor),
    'Ceil': _unary(np.ceil),
    'Round': _unary(np.round),
    # Element-wise of two (or n) tensors, or a tensor and a per-channel one.
    'BiasAdd': _binary(np.add, True),
    'BiasAddV1': _binary(np.add, True),
    'Add': _binary(np.add, True),
    'AddV2': _binary(np.add, True),
    'Sub': _binary(np.subtract, True),
    'Maximum': _binary(np.maximum, True),
    'Minimum': _binary(np.minimum, True),
    'SquaredDifference': _binary(lambda a, b: np.square(a - b), True),
    'Mul': _binary(np.multiply, product=True),
    'RealDiv': _binary(np.divide),
    'Div': _binary(np.divide),
    'DivNoNan': _binary(_div_no_nan),
    'Pow': _binary(np.power),
    'AddN': _row('elementwise', lambda attr, *xs: np.sum(np.broadcast_arrays(
        *[np.asarray(x, np.float64) for x in xs]), axis=0), additive=True),
    # Batch norm: per channel; the shrink folds the inference form first.
    'FusedBatchNorm': _BATCH_NORM,
    'FusedBatchNormV2': _BATCH_NORM,
    'FusedBatchNormV3': _BATCH_NORM,
    # Spatial ops.
    'MaxPool': _row('pool', POSITIONAL),
    'AvgPool': _row('pool', POSITIONAL),
    'Pad': _row('pad', POSITIONAL),
    'PadV2': _row('pad', POSITIONAL),
    'MirrorPad': _row('pad', POSITIONAL),
    'Mean': _reduce(lambda x, count: x.mean(axis=(0, 1), keepdims=True)),
    'Max': _reduce(lambda x, count: x.max(axis=(0, 1), keepdims=True)),
    'Min': _reduce(lambda x, count: x.min(axis=(0, 1), keepdims=True)),
    'Sum': _reduce(_sum),
    # Slices and moves of positions that take every channel whole: a
    # constant channel stays that constant (0 stays 0); a map over the
    # positions moves with them (`spatial`: the shrink follows what it can).
    'StridedSlice': _row('slice', POSITIONAL),
    'Slice': _row('slice', POSITIONAL),
    'SpaceToBatchND': _row('spatial', POSITIONAL),
    'BatchToSpaceND': _row('spatial', POSITIONAL),
    'ResizeBilinear': _row('spatial', POSITIONAL),
    'ResizeNearestNeighbor': _row('spatial', POSITIONAL),
    'ConcatV2': _row('concat', lambda attr, *xs: xs),
    # The inverse of a concat: output k takes the channels at its offset
    # (or, split on another axis, every channel whole, as a slice does).
    'Split': _row('split', POSITIONAL),
    'SplitV': _row('split', POSITIONAL),
    'DepthwiseConv2dNative': _row('depthwise', POSITIONAL),
    'Reshape': _row('reshape', lambda attr, x: x),
    'Squeeze': _row('reshape', lambda attr, x: x),
    'ExpandDims': _row('reshape', lambda attr, x: x),
    # Where channels start and end.
    'Conv2D': _row('layer'),
    'MatMul': _row('layer'),
    'Conv2DBackpropInput': _row('layer'),   # a transposed conv
    'Conv3D': _row('layer'),
    # Ops that mix channels.
    # Normalization over a band of channels: a channel that is 0 there adds
    # nothing to its neighbours' sums, so it can go if the LRN is rewritten
    # over the kept channels (the shrink's `lrn` module).
    'LRN': _row('lrn', _lrn, 'LRN divides a removed channel that is not 0 '
                'by a sum over its kept neighbours, which varies: only '
                'channels that are 0 there are removed'),
    'Softmax': _row('stop', None, 'softmax mixes all channels'),
    'LogSoftmax': _row('stop', None, 'softmax mixes all channels'),
    'Concat': _row('stop', None, 'concat with the axis first (Concat v1) is '
                   'not shrunk'),
    'Shape': _row('stop', None, 'it reads the shape, which the shrink '
                  'changes'),
}

# What a model's output reaches: a layer whose channels end here (or that
# nothing reads, see NOT_READING) gives the model's outputs, one per channel.
OUTPUT_OPS = frozenset([
    'Softmax', 'LogSoftmax', 'SoftmaxCrossEntropyWithLogits',
    'SparseSoftmaxCrossEntropyWithLogits', 'ArgMax', 'ArgMin', 'TopKV2',
    'InTopK', 'InTopKV2'])


# Ops that take a tensor without using its values for the model: summaries,
# tf.print's formatting, asserts' data and reads of the shape. A tensor that
# only these (or nothing) read is unread: its channels, if nothing else reads
# them, are the model's outputs.
NOT_READING = frozenset([
    'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummary',
    'AudioSummaryV2', 'TensorSummary', 'TensorSummaryV2', 'WriteSummary',
    'WriteScalarSummary', 'WriteHistogramSummary', 'WriteImageSummary',
    'WriteAudioSummary', 'StringFormat', 'PrintV2', 'Assert', 'Shape',
    'ShapeN', 'Size', 'Rank'])


# Rows whose channels training follows but whose constant the shrink cannot
# pass, with why: the one list where the two sides differ.
TRAINING_ONLY = dict((op, rule.why) for op, rule in RULES.items()
                     if rule.kind not in ('stop', 'layer', 'identity_n') and
                     rule.value is None)


def constant_through(rule, attr, *inputs):
  """`rule.value(attr, *inputs)` of an element-wise row, where NaN in the
  float64 `inputs` is a value not known: NaN wherever an input is NaN,
  except that a `product` with a factor exactly 0 is 0 (every factor
  finite: a value not known is a finite one)."""
  inputs = [np.asarray(x, np.float64) for x in inputs]
  with np.errstate(all='ignore'):
    out = np.asarray(rule.value(attr, *inputs), np.float64)
    unknown = np.zeros(out.shape, bool)
    for x in inputs:
      unknown = unknown | np.isnan(x)
    out = np.where(unknown, np.nan, out)
    if rule.product:
      zero = np.zeros(out.shape, bool)
      finite = np.ones(out.shape, bool)
      for x in inputs:
        zero = zero | (x == 0)
        finite = finite & ~np.isinf(x)
      out = np.where(zero & finite, 0.0, out)
  return out


def rule_of(op_type):
  """The `Rule` of `op_type`; an op the table does not know stops."""
  rule = RULES.get(op_type)
  if rule is None:
    return _row('stop', None, '%s is not among the ops the shrink passes' %
                op_type)
  return rule


def passes_value(op_type):
  """True if a channel constant per example goes through `op_type` (by a
  NumPy function or, after zero padding, as a map over positions)."""
  rule = RULES.get(op_type)
  return rule is not None and rule.kind not in ('stop', 'layer') and (
      rule.value is not None or rule.kind == 'identity_n')
