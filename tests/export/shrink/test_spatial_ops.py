"""shrink_graph_def through ops that move positions and keep every channel:
spatial slices (NASNet's factorized reduction), SpaceToBatchND and
BatchToSpaceND (atrous convs), resizes."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tests.support.graphs import const
from tests.support.shrunk_graphs import (biases, glorot, is_documented,
                                         shrink_same)


def _conv(x, w, name, padding='SAME', stride=1):
  return tf.nn.conv2d(x, const(w), [1, stride, stride, 1], padding,
                      name=name)


def _flops(h, w, k, cin, cout):
  """2 x the multiply-adds of a k x k conv with an [h, w] output."""
  return 2 * h * w * k * k * cin * cout


def _layers(report):
  return dict((l.name, l) for l in report.layers)


def _feed(shape, seed=0):
  return np.random.RandomState(seed).randn(*shape).astype(np.float32)


_SLICES = {
    # NASNet's pad(x)[:, 1:, 1:, :]: the channel axis masked
    'getitem': lambda p, c: p[:, 1:, 1:, :],
    'strided_end': lambda p, c: tf.strided_slice(
        p, [0, 1, 1, 0], [0, 10, 10, c], begin_mask=1, end_mask=1),
    'slice_size': lambda p, c: tf.slice(p, [0, 1, 1, 0], [-1, 9, 9, c]),
    'slice_all': lambda p, c: tf.slice(p, [0, 1, 1, 0], [-1, -1, -1, -1]),
}


@pytest.mark.parametrize('how', sorted(_SLICES))
def test_factorized_reduction_slice_passes_channels_and_keeps_its_bounds(how):
  w1, wa, wb, wy = glorot(1, [3, 3, 3, 8], [1, 1, 8, 4], [1, 1, 8, 4],
                          [3, 3, 8, 5])
  empty = [1, 4, 6]
  w1[..., empty] = 0.0
  x = tf.placeholder(tf.float32, [None, 9, 9, 3], name='x')
  h = tf.nn.relu(tf.nn.bias_add(_conv(x, w1, 'conv1'),
                                const(biases(2, 8, negative=[4]))))
  path1 = tf.nn.avg_pool(h, [1, 1, 1, 1], [1, 2, 2, 1], 'VALID')
  padded = tf.pad(h, [[0, 0], [0, 1], [0, 1], [0, 0]])
  cut = _SLICES[how](padded, 8)
  path2 = tf.nn.avg_pool(cut, [1, 1, 1, 1], [1, 2, 2, 1], 'VALID')
  net = tf.concat([_conv(path1, wa, 'conv_a', 'VALID'),
                   _conv(path2, wb, 'conv_b', 'VALID')], 3)
  _conv(tf.nn.relu(net), wy, 'y')
  small, report = shrink_same(_feed([2, 9, 9, 3]))
  layers = _layers(report)
  assert (layers['conv1'].outputs_before, layers['conv1'].outputs_after) == (
      8, 5)
  assert layers['conv_b'].inputs_after == 5
  assert report.stops == []
  assert report.flops_after == (_flops(9, 9, 3, 3, 5) +
                                2 * _flops(5, 5, 1, 5, 4) +
                                _flops(5, 5, 3, 8, 5))
  node = [n for n in small.node if n.op in ('StridedSlice', 'Slice')]
  assert len(node) == 1
  bounds = dict((n.name, tf.make_ndarray(n.attr['value'].tensor))
                for n in small.node if n.op == 'Const')
  last = bounds[node[0].input[2]][-1]
  assert last == {'getitem': 0, 'strided_end': 5, 'slice_size': 5,
                  'slice_all': -1}[how]


def test_a_slice_of_a_channel_range_is_a_stop_that_says_so():
  w1, wy = glorot(3, [1, 1, 3, 8], [1, 1, 4, 2])
  w1[..., [0, 5]] = 0.0
  x = tf.placeholder(tf.float32, [None, 4, 4, 3], name='x')
  h = tf.nn.relu(_conv(x, w1, 'conv1'))
  _conv(h[:, :, :, 2:6], wy, 'y')
  _, report = shrink_same(_feed([2, 4, 4, 3]))
  why = ('a StridedSlice of a channel range: only slices that take the '
         'channel axis whole are passed')
  assert [(s.layer, s.op, s.reason, s.channels) for s in report.stops] == [
      ('conv1', 'StridedSlice', why, 2)]
  assert is_documented(why)


def _atrous(h, w, rate, name):
  """A SAME atrous conv as TF 1.15's `tf.nn.atrous_conv2d` builds it:
  SpaceToBatchND, a VALID Conv2D, BatchToSpaceND."""
  pad = (w.shape[0] - 1) * rate // 2
  blocks = tf.space_to_batch_nd(h, [rate, rate], [[pad, pad], [pad, pad]])
  conv = _conv(blocks, w, name, 'VALID')
  return tf.batch_to_space_nd(conv, [rate, rate], [[0, 0], [0, 0]])


def test_atrous_conv_by_space_to_batch_passes_zero_channels_and_keeps_others():
  w1, w2, wy = glorot(4, [3, 3, 3, 8], [3, 3, 8, 6], [1, 1, 6, 4])
  w1[..., [1, 3, 6]] = 0.0      # relu(b) is 0 for 1 and 6, not for 3
  w2[..., [0, 4]] = 0.0         # 0 at every position: through the crop
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  h = tf.nn.relu(tf.nn.bias_add(_conv(x, w1, 'conv1'),
                                const(biases(5, 8, negative=[1, 6]))))
  a = _atrous(h, w2, 2, 'atrous')
  a = tf.nn.relu(tf.nn.bias_add(a, const(biases(6, 6))))
  _conv(a, wy, 'y')
  _, report = shrink_same(_feed([2, 8, 8, 3]))
  layers = _layers(report)
  assert layers['conv1'].outputs_after == 6
  assert layers['atrous'].outputs_after == 4
  assert [(s.layer, s.op, s.channels) for s in report.stops] == [
      ('conv1', 'SpaceToBatchND', 1)]
  assert all(is_documented(s.reason) for s in report.stops)
  # The report counts a conv at its output's positions, per row of the
  # batch it reads: a [4N, 4, 4] block batch for SpaceToBatchND.
  assert report.flops_after == (_flops(8, 8, 3, 3, 6) + _flops(4, 4, 3, 6, 4)
                                + _flops(8, 8, 1, 4, 4))


@pytest.mark.parametrize('resize', ['bilinear', 'nearest'])
def test_resize_passes_channels_and_their_constants(resize):
  w1, wy = glorot(7, [3, 3, 3, 6], [3, 3, 6, 4])
  w1[..., [0, 2, 5]] = 0.0
  x = tf.placeholder(tf.float32, [None, 5, 5, 3], name='x')
  h = tf.nn.relu(tf.nn.bias_add(_conv(x, w1, 'conv1'),
                                const(biases(8, 6, negative=[2]))))
  if resize == 'bilinear':
    up = tf.image.resize_bilinear(h, [10, 10])
  else:
    up = tf.image.resize_nearest_neighbor(h, [10, 10])
  tf.nn.bias_add(_conv(up, wy, 'conv2', 'VALID'), const(biases(9, 4)),
                 name='y')
  _, report = shrink_same(_feed([2, 5, 5, 3]))
  layers = _layers(report)
  assert layers['conv1'].outputs_after == 3
  assert layers['conv2'].inputs_after == 3
  assert report.stops == []
  assert report.flops_after == _flops(5, 5, 3, 3, 3) + _flops(8, 8, 3, 3, 4)
