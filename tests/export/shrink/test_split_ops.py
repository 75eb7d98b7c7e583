"""shrink_graph_def through Split and SplitV: on the channel axis output k
holds the channels at its offset (grouped convs, ShuffleNet, Inception
branches); on another axis every output takes every channel whole."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tests.support.graphs import const
from tests.support.shrunk_graphs import (biases, glorot, is_documented,
                                         shrink_same)


def _conv(x, w, name, padding='SAME'):
  return tf.nn.conv2d(x, const(w), [1, 1, 1, 1], padding, name=name)


def _flops(h, w, k, cin, cout):
  """2 x the multiply-adds of a k x k conv with an [h, w] output."""
  return 2 * h * w * k * k * cin * cout


def _params(k, cin, cout, bias=False):
  return k * k * cin * cout + (cout if bias else 0)


def _layers(report):
  return dict((l.name, l) for l in report.layers)


def _feed(shape, seed=0):
  return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def _nodes(graph_def, op):
  return [n for n in graph_def.node if n.op == op]


def _value(graph_def, name):
  node = [n for n in graph_def.node if n.name == name][0]
  return tf.make_ndarray(node.attr['value'].tensor).tolist()


def _grouped(x, w1, wa, wb, wy, parts):
  """conv1 -> relu -> split (`parts`) -> conv_a, conv_b -> concat -> y."""
  h = tf.nn.relu(_conv(x, w1, 'conv1'))
  p0, p1 = tf.split(h, parts, axis=3, name='split')
  net = tf.concat([_conv(p0, wa, 'conv_a'), _conv(p1, wb, 'conv_b')], 3)
  return _conv(tf.nn.relu(net), wy, 'y')


def test_an_equal_split_that_keeps_unequal_counts_becomes_a_split_v():
  w1, wa, wb, wy = glorot(1, [3, 3, 3, 8], [1, 1, 4, 4], [1, 1, 4, 4],
                          [3, 3, 8, 5])
  w1[..., [1, 5, 6]] = 0.0     # one of the first half, two of the second
  x = tf.placeholder(tf.float32, [None, 6, 6, 3], name='x')
  _grouped(x, w1, wa, wb, wy, 2)
  small, report = shrink_same(_feed([2, 6, 6, 3]))
  layers = _layers(report)
  assert (layers['conv1'].outputs_before, layers['conv1'].outputs_after) == (
      8, 5)
  assert (layers['conv_a'].inputs_after, layers['conv_b'].inputs_after) == (
      3, 2)
  assert report.stops == []
  (split,) = [n for n in small.node if n.name == 'split']
  assert split.op == 'SplitV' and split.attr['num_split'].i == 2
  assert _value(small, split.input[1]) == [3, 2]
  assert _value(small, split.input[2]) == 3
  assert report.flops_after == (_flops(6, 6, 3, 3, 5) + _flops(6, 6, 1, 3, 4)
                                + _flops(6, 6, 1, 2, 4)
                                + _flops(6, 6, 3, 8, 5))
  assert report.params_after == (_params(3, 3, 5) + _params(1, 3, 4) +
                                 _params(1, 2, 4) + _params(3, 8, 5))


def test_an_equal_split_that_keeps_equal_counts_stays_a_split():
  w1, wa, wb, wy = glorot(2, [3, 3, 3, 8], [1, 1, 4, 4], [1, 1, 4, 4],
                          [3, 3, 8, 5])
  w1[..., [0, 3, 5, 7]] = 0.0
  x = tf.placeholder(tf.float32, [None, 6, 6, 3], name='x')
  _grouped(x, w1, wa, wb, wy, 2)
  small, report = shrink_same(_feed([2, 6, 6, 3]))
  layers = _layers(report)
  assert layers['conv1'].outputs_after == 4
  assert (layers['conv_a'].inputs_after, layers['conv_b'].inputs_after) == (
      2, 2)
  (split,) = [n for n in small.node if n.name == 'split']
  assert split.op == 'Split' and split.attr['num_split'].i == 2
  assert not _nodes(small, 'SplitV')


def test_split_v_sizes_are_rewritten_to_the_kept_counts():
  """A SplitV of explicit sizes, one of them -1 (Inception-style branches
  of 2, 4 and the rest); a removed channel whose constant is not 0 is
  folded into the bias of the branch that reads it."""
  w1, wa, wb, wc, wy = glorot(3, [3, 3, 3, 9], [1, 1, 2, 4], [3, 3, 4, 4],
                              [1, 1, 3, 4], [1, 1, 12, 5])
  w1[..., [0, 3, 4, 8]] = 0.0   # relu(b) is 0 for 3 only
  x = tf.placeholder(tf.float32, [None, 5, 5, 3], name='x')
  h = tf.nn.relu(tf.nn.bias_add(_conv(x, w1, 'conv1'),
                                const(biases(4, 9, negative=[3]))))
  p0, p1, p2 = tf.split(h, [2, 4, -1], axis=-1, name='split')
  net = tf.concat([_conv(p0, wa, 'conv_a'), _conv(p1, wb, 'conv_b'),
                   _conv(p2, wc, 'conv_c')], 3)
  _conv(tf.nn.relu(net), wy, 'y')
  small, report = shrink_same(_feed([2, 5, 5, 3]))
  layers = _layers(report)
  assert layers['conv1'].outputs_after == 5
  assert [layers[n].inputs_after for n in ('conv_a', 'conv_b', 'conv_c')] \
      == [1, 2, 2]
  assert report.stops == []
  (split,) = _nodes(small, 'SplitV')
  assert _value(small, split.input[1]) == [1, 2, 2]
  assert report.flops_after == (_flops(5, 5, 3, 3, 5) + _flops(5, 5, 1, 1, 4)
                                + _flops(5, 5, 3, 2, 4)
                                + _flops(5, 5, 1, 2, 4)
                                + _flops(5, 5, 1, 12, 5))


def test_a_residual_through_a_split_removes_a_channel_only_where_all_drop_it():
  """ShuffleNet-style: half the channels go through, the other half through
  a conv; the concat is added to another conv's output."""
  w1, wq, we, wy = glorot(5, [3, 3, 3, 8], [1, 1, 4, 4], [1, 1, 3, 8],
                          [1, 1, 8, 4])
  w1[..., [1, 2, 6]] = 0.0
  we[..., [2, 3]] = 0.0          # 2 both drop; 1 and 3 one only
  x = tf.placeholder(tf.float32, [None, 4, 4, 3], name='x')
  p0, p1 = tf.split(_conv(x, w1, 'conv1'), 2, axis=3, name='split')
  net = tf.concat([p0, _conv(tf.nn.relu(p1), wq, 'conv_q')], 3)
  _conv(tf.nn.relu(net + _conv(x, we, 'conv_e')), wy, 'y')
  small, report = shrink_same(_feed([2, 4, 4, 3]))
  layers = _layers(report)
  assert (layers['conv1'].outputs_after, layers['conv_e'].outputs_after,
          layers['conv_q'].inputs_after, layers['y'].inputs_after) == (
              6, 7, 3, 7)
  why = ('not every member of this add drops the channel: another layer '
         'keeps it')
  assert sorted((s.layer, s.op, s.reason, s.channels)
                for s in report.stops) == [('conv1', 'AddV2', why, 1),
                                           ('conv_e', 'AddV2', why, 1)]
  assert is_documented(why)
  (split,) = [n for n in small.node if n.name == 'split']
  assert split.op == 'Split'    # 3 and 3 kept: equal parts still


@pytest.mark.parametrize('axis', [1, 2])
def test_a_split_of_the_positions_passes_every_channel_whole(axis):
  w1, wa, wb = glorot(6, [3, 3, 3, 6], [3, 3, 6, 4], [1, 1, 6, 4])
  w1[..., [0, 2, 5]] = 0.0
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  h = tf.nn.relu(tf.nn.bias_add(_conv(x, w1, 'conv1'),
                                const(biases(7, 6, negative=[2]))))
  h = tf.pad(h, [[0, 0], [1, 1], [1, 1], [0, 0]])   # a map over positions
  top, bottom = tf.split(h, [4, 6], axis=axis, name='split')
  a = _conv(top, wa, 'conv_a', 'VALID')
  b = _conv(bottom, wb, 'conv_b')
  tf.concat([tf.reduce_mean(a, [1, 2]), tf.reduce_mean(b, [1, 2])], 1,
            name='y')
  small, report = shrink_same(_feed([2, 8, 8, 3]))
  layers = _layers(report)
  assert layers['conv1'].outputs_after == 3
  assert (layers['conv_a'].inputs_after, layers['conv_b'].inputs_after) == (
      3, 3)
  assert report.stops == []
  (split,) = [n for n in small.node if n.name == 'split']
  assert split.op == 'SplitV' and _value(small, split.input[1]) == [4, 6]
  top, bottom = ([2, 8], [6, 10]) if axis == 1 else ([8, 2], [10, 6])
  assert report.flops_after == (
      _flops(8, 8, 3, 3, 3) + _flops(top[0], top[1], 3, 3, 4) +
      _flops(bottom[0], bottom[1], 1, 3, 4))


def test_a_split_v_whose_sizes_are_shared_is_a_stop_that_says_so():
  w1, wa, wb, wc, wd = glorot(8, [1, 1, 3, 6], [1, 1, 2, 2], [1, 1, 4, 2],
                              [1, 1, 2, 2], [1, 1, 4, 2])
  w1[..., [0, 3]] = 0.0
  x = tf.placeholder(tf.float32, [None, 4, 4, 3], name='x')
  sizes = tf.constant([2, 4], name='sizes')
  h = tf.nn.relu(_conv(x, w1, 'conv1'))
  p0, p1 = tf.split(h, sizes, axis=3)
  q0, q1 = tf.split(tf.nn.relu(h), sizes, axis=3)
  tf.add_n([_conv(p0, wa, 'conv_a'), _conv(p1, wb, 'conv_b'),
            _conv(q0, wc, 'conv_c'), _conv(q1, wd, 'conv_d')], name='y')
  _, report = shrink_same(_feed([2, 4, 4, 3]))
  why = 'only a SplitV whose size_splits is a constant of its own is shrunk'
  assert [(s.layer, s.op, s.reason, s.channels) for s in report.stops] == [
      ('conv1', 'SplitV', why, 2)]
  assert _layers(report)['conv1'].outputs_after == 6
  assert is_documented(why)


def test_a_split_of_the_batch_passes_every_channel_and_its_constant():
  w1, wa, wb = glorot(9, [3, 3, 3, 6], [3, 3, 6, 4], [3, 3, 6, 4])
  w1[..., [1, 4]] = 0.0
  x = tf.placeholder(tf.float32, [4, 5, 5, 3], name='x')
  h = tf.nn.relu(tf.nn.bias_add(_conv(x, w1, 'conv1'),
                                const(biases(10, 6, negative=[4]))))
  first, second = tf.split(h, 2, axis=0, name='split')
  tf.concat([_conv(first, wa, 'conv_a'), _conv(second, wb, 'conv_b')], 0,
            name='y')
  small, report = shrink_same(_feed([4, 5, 5, 3]))
  layers = _layers(report)
  assert (layers['conv1'].outputs_after, layers['conv_a'].inputs_after,
          layers['conv_b'].inputs_after) == (4, 4, 4)
  assert report.stops == []
  (split,) = [n for n in small.node if n.name == 'split']
  assert split.op == 'Split'
  assert report.flops_after == (_flops(5, 5, 3, 3, 4) +
                                2 * _flops(5, 5, 3, 4, 4))
