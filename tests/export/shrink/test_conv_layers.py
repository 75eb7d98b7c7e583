"""shrink_graph_def with transposed convs (U-Net decoders), Conv3D and 1-D
convs as layers: their filters lose the removed channels, and the report
counts them as the shapes say."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tests.support.graphs import const
from tests.support.shrunk_graphs import (biases, glorot, is_documented,
                                         shrink_same)


def _relu_bias(h, seed, negative=()):
  count = h.shape.as_list()[-1]
  return tf.nn.relu(tf.nn.bias_add(h, const(biases(seed, count, negative))))


def _feed(shape, seed=0):
  return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def _layers(report):
  return dict((l.name, l) for l in report.layers)


def _consts(graph_def):
  return dict((n.name, tf.make_ndarray(n.attr['value'].tensor))
              for n in graph_def.node if n.op == 'Const')


def _decoder(batch, sizes):
  """conv1 (3x3, 3 -> 8, 4x4) -> relu -> up (3x3 stride 2 transposed conv,
  8 -> 6, 8x8) -> relu -> y (3x3, 6 -> 4): conv1's empty filters 1 (0
  after the relu) and 4 (a constant that is not 0), up's 2 (0 after the
  relu) and 5 (not 0)."""
  w1, wu, wy = glorot(1, [3, 3, 3, 8], [3, 3, 6, 8], [3, 3, 6, 4])
  w1[..., [1, 4]] = 0.0
  wu[:, :, [2, 5], :] = 0.0
  x = tf.placeholder(tf.float32, [batch, 4, 4, 3], name='x')
  h = _relu_bias(tf.nn.conv2d(x, const(w1), [1] * 4, 'SAME', name='conv1'),
                 2, negative=[1])
  shape = sizes(h)
  up = tf.nn.conv2d_transpose(h, const(wu), shape, [1, 2, 2, 1], 'SAME',
                              name='up')
  up = _relu_bias(up, 3, negative=[2])
  tf.nn.conv2d(up, const(wy), [1] * 4, 'SAME', name='y')


_SIZES = {
    # A static output shape: input_sizes is a constant [N, H, W, C].
    'const': (2, lambda h: [2, 8, 8, 6]),
    # tf.stack([tf.shape(x)[0], H, W, C]): a Pack whose last entry is one.
    'stack': (None, lambda h: tf.stack([tf.shape(h)[0], 8, 8, 6])),
}


@pytest.mark.parametrize('how', sorted(_SIZES))
def test_a_transposed_conv_loses_output_channels_and_zero_input_channels(how):
  batch, sizes = _SIZES[how]
  _decoder(batch, sizes)
  small, report = shrink_same(_feed([2, 4, 4, 3]))
  layers = _layers(report)
  up = layers['up']
  assert (up.op, up.inputs_before, up.inputs_after, up.outputs_before,
          up.outputs_after) == ('Conv2DBackpropInput', 8, 7, 6, 4)
  assert layers['conv1'].outputs_after == 7
  assert layers['y'].inputs_after == 4
  why = ('up is a Conv2DBackpropInput: only channels whose constant is 0 '
         'are removed before it')
  assert [(s.layer, s.node, s.reason, s.channels) for s in report.stops] == [
      ('conv1', 'up', why, 1)]
  assert is_documented(why)
  # Its FLOPs: the whole filter at each of its input's 4 x 4 positions.
  assert (up.params_after, up.flops_after) == (3 * 3 * 4 * 7 + 4,
                                               2 * 4 * 4 * 3 * 3 * 4 * 7)
  assert (up.params_before, up.flops_before) == (3 * 3 * 6 * 8 + 6,
                                                 2 * 4 * 4 * 3 * 3 * 6 * 8)
  (node,) = [n for n in small.node if n.name == 'up']
  sizes = _consts(small)
  if how == 'const':
    assert sizes[node.input[0]].tolist() == [2, 8, 8, 4]
  else:
    pack = [n for n in small.node if n.name == node.input[0].split(':')[0]]
    assert sizes[pack[0].input[3]].tolist() == 4


def test_a_transposed_conv_whose_output_shape_is_computed_is_not_a_layer():
  w1, wu = glorot(4, [3, 3, 3, 8], [3, 3, 6, 8])
  w1[..., [1]] = 0.0
  x = tf.placeholder(tf.float32, [None, 4, 4, 3], name='x')
  h = tf.nn.relu(tf.nn.conv2d(x, const(w1), [1] * 4, 'SAME', name='conv1'))
  shape = tf.shape(x) * tf.constant([1, 2, 2, 2])   # [N, 8, 8, 6]
  tf.nn.conv2d_transpose(h, const(wu), shape, [1, 2, 2, 1], 'SAME',
                         name='y')
  _, report = shrink_same(_feed([2, 4, 4, 3]))
  why = ('its output shape (input_sizes) is not a constant of its own: the '
         'shrink cannot write its kept channel count')
  assert report.skipped == [('y', 'Conv2DBackpropInput', why)]
  assert _layers(report)['conv1'].outputs_after == 8


def test_conv3d_layers_lose_empty_filters_and_keep_what_they_cannot_fold():
  wa, wb, wy = glorot(5, [3, 3, 3, 3, 8], [1, 3, 3, 8, 6], [1, 1, 1, 6, 4])
  wa[..., [1, 4]] = 0.0   # relu(b) is 0 for 1, not for 4
  wb[..., [0, 3]] = 0.0   # both 0 after the relu
  x = tf.placeholder(tf.float32, [None, 4, 6, 6, 3], name='x')
  a = _relu_bias(tf.nn.conv3d(x, const(wa), [1] * 5, 'SAME', name='a'), 6,
                 negative=[1])
  b = _relu_bias(tf.nn.conv3d(a, const(wb), [1] * 5, 'SAME', name='b'), 7,
                 negative=[0, 3])
  tf.nn.conv3d(b, const(wy), [1] * 5, 'SAME', name='y')
  _, report = shrink_same(_feed([2, 4, 6, 6, 3]))
  layers = _layers(report)
  assert [(layers[n].inputs_after, layers[n].outputs_after)
          for n in ('a', 'b', 'y')] == [(3, 7), (7, 4), (4, 4)]
  why = 'b is a Conv3D: only channels whose constant is 0 are removed before it'
  assert [(s.layer, s.node, s.reason, s.channels) for s in report.stops] == [
      ('a', 'b', why, 1)]
  positions = 4 * 6 * 6
  assert report.flops_after == 2 * positions * (27 * 3 * 7 + 9 * 7 * 4 +
                                                4 * 4)
  assert report.params_after == (27 * 3 * 7 + 7) + (9 * 7 * 4 + 4) + 4 * 4


def test_1d_convs_shrink_through_their_expand_dims_and_squeeze():
  wa, wb, wy = glorot(8, [5, 3, 8], [3, 8, 6], [1, 6, 4])
  wa[..., [1, 4]] = 0.0
  wb[..., [2]] = 0.0
  x = tf.placeholder(tf.float32, [None, 16, 3], name='x')
  a = _relu_bias(tf.nn.conv1d(x, const(wa), 1, 'SAME', name='a'), 9,
                 negative=[1, 4])
  b = _relu_bias(tf.nn.conv1d(a, const(wb), 1, 'SAME', name='b'), 10,
                 negative=[2])
  tf.identity(tf.nn.conv1d(b, const(wy), 1, 'SAME', name='c'), name='y')
  small, report = shrink_same(_feed([2, 16, 3]))
  layers = _layers(report)
  assert [(layers[n].inputs_after, layers[n].outputs_after) for n in (
      'a', 'b', 'c')] == [(3, 6), (6, 5), (5, 4)]
  assert report.stops == []
  assert report.flops_after == 2 * 16 * (5 * 3 * 6 + 3 * 6 * 5 + 5 * 4)
  # Weights only: the bias comes after the Squeeze, not right after the
  # Conv2D, and the report (as the budget) counts a bias right after it.
  assert report.params_after == 5 * 3 * 6 + 3 * 6 * 5 + 5 * 4
  assert sorted(n.op for n in small.node if n.op in (
      'ExpandDims', 'Squeeze')) == ['ExpandDims'] * 3 + ['Squeeze'] * 3


def test_an_expand_dims_of_the_channel_axis_is_a_stop_that_says_so():
  wa, wy = glorot(11, [3, 3, 6], [1, 1, 1, 2])
  wa[..., [0, 5]] = 0.0
  x = tf.placeholder(tf.float32, [None, 8, 3], name='x')
  a = tf.nn.relu(tf.nn.conv1d(x, const(wa), 1, 'SAME', name='a'))
  tf.nn.conv2d(tf.expand_dims(a, -1), const(wy), [1] * 4, 'SAME', name='y')
  _, report = shrink_same(_feed([2, 8, 3]))
  why = ('the ExpandDims to [None, 8, 6, 1] does not keep whole channels '
         '(only NHWC to rows [N, K], or a reshape that keeps the last axis: '
         '[N, C] <-> [N, 1, 1, C], [N, H, W, C] <-> [N * H * W, C])')
  assert [(s.layer, s.op, s.reason, s.channels) for s in report.stops] == [
      ('a', 'ExpandDims', why, 2)]
  assert is_documented(why)
