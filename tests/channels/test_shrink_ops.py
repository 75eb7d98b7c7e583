"""The shrink goes through each element-wise op of the channel table, exactly.

Each graph: a 3x3 conv `a` with some empty filters (and biases, so that the
removed channels are constants other than 0), one op (or a modern block
built from several), a 1x1 conv `y`. The shrunk graph gives the same `y`
(1e-5 of max|y|), `a` loses its empty filters, and the report's FLOPs are
the NumPy count of the two convs at their new widths.
"""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.channels import RULES
from tf1prune.export.shrink.rounds import shrink_graph_def
from tests.support.graphs import const, run_graph_def

_TF1 = tf.__version__.startswith('1.')
_C, _EMPTY, _SIZE = 6, [1, 4], 5


def _pos(h):
  return tf.abs(h) + 1.0


def _swish(h):
  return tf.nn.swish(h) if _TF1 else tf.nn.silu(h)


def _hard_sigmoid(h):
  return tf.nn.relu6(h + 3.0) / 6.0


OPS = {
    'Identity': tf.identity,
    'Snapshot': None,
    'StopGradient': tf.stop_gradient,
    'CheckNumerics': lambda h: tf.debugging.check_numerics(h, 'bad'),
    'Cast': lambda h: tf.cast(tf.cast(h, tf.float64), tf.float32),
    'IdentityN': _swish,
    'Relu': tf.nn.relu,
    'Relu6': tf.nn.relu6,
    'Elu': tf.nn.elu,
    'Selu': tf.nn.selu,
    'LeakyRelu': lambda h: tf.nn.leaky_relu(h, 0.3),
    'Sigmoid': tf.sigmoid,
    'Tanh': tf.tanh,
    'Softplus': tf.nn.softplus,
    'Softsign': tf.nn.softsign,
    'Erf': tf.math.erf,
    'Neg': tf.negative,
    'Abs': tf.abs,
    'Sign': tf.sign,
    'Exp': lambda h: tf.exp(0.1 * h),
    'Expm1': lambda h: tf.math.expm1(0.1 * h),
    'Log': lambda h: tf.math.log(_pos(h)),
    'Log1p': lambda h: tf.math.log1p(tf.abs(h)),
    'Sqrt': lambda h: tf.sqrt(_pos(h)),
    'Rsqrt': lambda h: tf.math.rsqrt(_pos(h)),
    'Square': tf.square,
    'Reciprocal': lambda h: tf.math.reciprocal(_pos(h)),
    'Floor': tf.floor,
    'Ceil': tf.math.ceil,
    'Round': tf.round,
    'BiasAdd': lambda h: tf.nn.bias_add(h, const(np.arange(_C))),
    'Add': lambda h: tf.add(h, tf.sigmoid(h)),
    'AddV2': lambda h: h + tf.tanh(h),
    'Sub': lambda h: h - tf.sigmoid(h),
    'Maximum': lambda h: tf.maximum(h, 0.5 * h),
    'Minimum': lambda h: tf.minimum(h, tf.nn.relu6(h)),
    'SquaredDifference': lambda h: tf.squared_difference(h, tf.tanh(h)),
    'Mul': lambda h: h * tf.sigmoid(h),
    'RealDiv': lambda h: h / _pos(h),
    'DivNoNan': lambda h: tf.math.divide_no_nan(h, tf.nn.relu(h)),
    'Pow': lambda h: tf.pow(_pos(h), 1.5),
    'AddN': lambda h: tf.add_n([h, tf.nn.relu(h), tf.tanh(h)]),
    'MaxPool': lambda h: tf.nn.max_pool(h, [1, 2, 2, 1], [1, 1, 1, 1], 'SAME'),
    'AvgPool': lambda h: tf.nn.avg_pool(h, [1, 2, 2, 1], [1, 1, 1, 1], 'SAME'),
    'MirrorPad': lambda h: tf.pad(h, [[0, 0], [1, 1], [1, 1], [0, 0]],
                                  'REFLECT'),
    'Mean': lambda h: h * tf.reduce_mean(h, [1, 2], keepdims=True),
    'Max': lambda h: h - tf.reduce_max(h, [1, 2], keepdims=True),
    'Min': lambda h: h - tf.reduce_min(h, [1, 2], keepdims=True),
    'Sum': lambda h: h + tf.reduce_sum(h, [1, 2], keepdims=True),
    'ConcatV2': lambda h: tf.concat([h, tf.nn.relu(h)], 3),
    'Reshape': lambda h: h * tf.reshape(tf.reduce_mean(h, [1, 2]),
                                        [-1, 1, 1, _C]),
    'Squeeze': lambda h: h * tf.expand_dims(tf.expand_dims(tf.squeeze(
        tf.reduce_mean(h, [1, 2], keepdims=True), [1, 2]), 1), 1),
    'StridedSlice': lambda h: h[:, 1:, :-1, :],
    'Slice': lambda h: tf.slice(h, [0, 1, 0, 0], [-1, 3, -1, _C]),
    'SpaceToBatchND': lambda h: tf.batch_to_space_nd(tf.nn.relu(
        tf.space_to_batch_nd(h, [_SIZE, 1], [[0, 0], [0, 0]])), [_SIZE, 1],
                                                     [[0, 0], [0, 0]]),
    'ResizeBilinear': lambda h: tf.image.resize_bilinear(h, [7, 7]),
    'ResizeNearestNeighbor': lambda h: tf.image.resize_nearest_neighbor(
        h, [7, 7]),
    # The halves (then 2 + 1 and 3 channels) put back in the other order.
    'Split': lambda h: tf.concat(tf.split(h, 2, axis=3)[::-1], 3),
    'SplitV': lambda h: tf.concat(tf.split(h, [2, -1], axis=3)[::-1], 3),
}
OPS['BatchToSpaceND'] = OPS['SpaceToBatchND']
OPS['ExpandDims'] = OPS['Squeeze']
# Blocks of modern nets, built as TF builds them.
BLOCKS = {
    'hard_sigmoid_times_sixth': lambda h: tf.nn.relu6(h + 3.0) * (1.0 / 6.0),
    'hard_swish': lambda h: h * _hard_sigmoid(h),
    'mish': lambda h: h * tf.tanh(tf.nn.softplus(h)),
    'swish_manual': lambda h: h * tf.sigmoid(h),
    'reshape_to_rows_and_back': lambda h: h * tf.reshape(tf.reshape(
        tf.reduce_mean(h, [1, 2], keepdims=True), [-1, _C]), [-1, 1, 1, _C]),
}
# Table rows that pass a constant channel and that this file cannot build as
# a single op: why.
NOT_BUILT = {
    'Snapshot': 'made by grappler, not by a TF API',
    'PreventGradient': 'made by gradient code, not by a model',
    'EnsureShape': 'built the same as Identity; no API in TF 1.15',
    'Swish': 'a fused op of some TF builds; tf.nn.swish builds Mul and Sigmoid',
    'BiasAddV1': 'the old BiasAdd; no API builds it',
    'Div': 'tf.div of floats builds RealDiv on TF 2.x',
    'Inv': 'an alias of Reciprocal that no API builds',
    'DepthwiseConv2dNative': 'a layer: tests/export/shrink/test_through_ops.py',
    'Pad': 'zero padding makes a constant vary over the positions: '
           'tests/export/shrink/test_shrink_graph_def.py and '
           'tests/export/shrink/test_through_ops.py',
    'PadV2': 'as Pad',
    'LRN': 'only a channel that is 0 passes, and the LRN runs over the kept '
           'channels put back in their places: '
           'tests/export/shrink/test_shrink_graph_def.py',
}


def test_every_row_that_passes_a_constant_is_built_here_or_says_why():
  passing = set(op for op, rule in RULES.items()
                if rule.kind not in ('stop', 'layer') and rule.value is not None)
  passing.add('IdentityN')
  assert sorted(passing - set(OPS) - set(NOT_BUILT)) == []
  assert sorted(set(OPS) - passing) == []


def _graph(build, seed):
  rs = np.random.RandomState(seed)
  w = rs.randn(3, 3, 3, _C).astype(np.float32)
  w[..., _EMPTY] = 0.0
  x = tf.placeholder(tf.float32, [None, _SIZE, _SIZE, 3], name='x')
  h = tf.nn.bias_add(tf.nn.conv2d(x, const(w), [1] * 4, 'SAME', name='a'),
                     const(rs.randn(_C)))
  h = build(h)
  width = h.shape.as_list()[-1]
  out = tf.nn.conv2d(h, const(rs.randn(1, 1, width, 2)), [1] * 4, 'VALID')
  tf.nn.bias_add(out, const(rs.randn(2)), name='y')
  return rs.randn(3, _SIZE, _SIZE, 3).astype(np.float32)


def _check(build, seed=0):
  with tf.Graph().as_default() as graph:
    feed = _graph(build, seed)
  graph_def = graph.as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'])
  before, after = run_graph_def(graph_def, feed), run_graph_def(small, feed)
  np.testing.assert_allclose(after, before, rtol=0,
                             atol=1e-5 * np.abs(before).max())
  a, y = report.layers
  kept = _C - len(_EMPTY)
  assert (a.outputs_before, a.outputs_after) == (_C, kept), report.stops
  out = run_graph_def(small, feed, 'y:0').shape
  widths = y.inputs_after
  flops = 2 * 9 * 3 * kept * _SIZE * _SIZE + 2 * widths * 2 * out[1] * out[2]
  assert report.flops_after == flops
  return report


@pytest.mark.parametrize('op', sorted(o for o in OPS if OPS[o] is not None))
def test_the_shrink_goes_through(op):
  report = _check(OPS[op])
  assert report.stops == []


@pytest.mark.parametrize('block', sorted(BLOCKS))
def test_the_shrink_goes_through_modern_activations(block):
  assert _check(BLOCKS[block]).stops == []


def test_squeeze_and_excitation_gate_of_removed_units_goes():
  """net * reshape(sigmoid(fc2(relu(fc1(mean(net))))), [-1, 1, 1, C]): the
  gate's fc2 units and the conv's filters are one channel each."""
  rs = np.random.RandomState(3)
  w = rs.randn(3, 3, 3, _C).astype(np.float32)
  w[..., _EMPTY] = 0.0
  fc2 = rs.randn(4, _C).astype(np.float32)
  fc2[:, _EMPTY] = 0.0
  with tf.Graph().as_default() as graph:
    x = tf.placeholder(tf.float32, [None, _SIZE, _SIZE, 3], name='x')
    net = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(
        x, const(w), [1] * 4, 'SAME', name='a'), const(rs.randn(_C))))
    squeeze = tf.reduce_mean(net, [1, 2])
    hidden = tf.nn.relu(tf.nn.bias_add(tf.matmul(
        squeeze, const(rs.randn(_C, 4))), const(rs.randn(4))))
    gate = tf.sigmoid(tf.nn.bias_add(tf.matmul(hidden, const(fc2)),
                                     const(rs.randn(_C))))
    net = net * tf.reshape(gate, [-1, 1, 1, _C])
    tf.nn.conv2d(net, const(rs.randn(1, 1, _C, 2)), [1] * 4, 'VALID',
                 name='y')
  feed = rs.randn(2, _SIZE, _SIZE, 3).astype(np.float32)
  graph_def = graph.as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'])
  before = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), before, rtol=0,
                             atol=1e-5 * np.abs(before).max())
  assert [(l.outputs_before, l.outputs_after) for l in report.layers] == [
      (_C, _C - 2), (4, 4), (_C, _C - 2), (2, 2)]
  assert [l.inputs_after for l in report.layers] == [3, _C - 2, 4, _C - 2]
  assert report.stops == []


def test_a_stop_names_the_op_where_the_constant_is_lost():
  """Log of a removed channel whose constant is negative: NaN from the Log,
  and the stop names the Log, not the conv after it."""
  with tf.Graph().as_default() as graph:
    x = tf.placeholder(tf.float32, [None, _SIZE, _SIZE, 3], name='x')
    w = np.ones([1, 1, 3, 2], np.float32)
    w[..., 1] = 0.0
    h = tf.nn.bias_add(tf.nn.conv2d(x, const(w), [1] * 4, 'SAME', name='a'),
                       const([1.0, -1.0]))
    h = tf.math.log(h, name='log')
    tf.nn.conv2d(h, const(np.ones([1, 1, 2, 1])), [1] * 4, 'VALID', name='y')
  _, report = shrink_graph_def(graph.as_graph_def(), ['y'])
  (stop,) = report.stops
  assert (stop.node, stop.op, stop.channels) == ('log', 'Log', 1)
  assert 'not finite after this Log' in stop.reason
