"""The op table on maps broadcast over the channels, reshapes that keep the
last axis, products with 0 and sums over an unknown number of positions."""

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.channels import GraphView, RULES, classify
from tf1prune.channels.table import constant_through

_NAN = np.nan


def _attr(key, default):
  return default


def test_a_product_with_0_is_0_where_the_other_factor_is_not_known():
  out = constant_through(RULES['Mul'], _attr, [[0.0, 2.0, _NAN, 0.0]],
                         [[_NAN, _NAN, 0.0, np.inf]])
  np.testing.assert_array_equal(out, [[0.0, _NAN, 0.0, _NAN]])


def test_a_value_not_known_stays_not_known_through_other_ops():
  for op, inputs in [('Add', [[_NAN, 1.0], [1.0, 1.0]]),
                     ('Cast', [[_NAN, 1.0]]), ('Relu', [[_NAN, -1.0]]),
                     ('Maximum', [[_NAN, 3.0], [0.0, 0.0]])]:
    out = constant_through(RULES[op], _attr, *inputs)
    assert np.isnan(out[0]) and not np.isnan(out[1]), op


def test_a_sum_over_an_unknown_number_of_positions_knows_only_zeros():
  x = np.array([[[0.0, 2.0]]])
  np.testing.assert_array_equal(RULES['Sum'].value(x, None), [[[0.0, _NAN]]])
  np.testing.assert_array_equal(RULES['Sum'].value(x, 6), [[[0.0, 12.0]]])


def test_a_one_channel_map_is_broadcast_over_the_channels_and_ties_none():
  x = tf.placeholder(tf.float32, [None, 6, 6, 4])
  a = tf.placeholder(tf.float32, [None, 6, 6, 1])
  y = tf.multiply(x, a)
  op, why = classify(GraphView(tf.get_default_graph()), y.op,
                     lambda t: True)
  assert why is None
  assert (op.kind, op.inputs, op.params, op.loose) == ('elementwise', [0],
                                                       [], [1])


def test_reshapes_that_keep_the_last_axis_keep_the_channels():
  x = tf.placeholder(tf.float32, [None, 8, 8, 4])
  rows = tf.reshape(x, [-1, 4])
  back = tf.reshape(rows, [-1, 8, 8, 4])
  view = GraphView(tf.get_default_graph())
  for node in (rows.op, back.op):
    op, why = classify(view, node, lambda t: True)
    assert why is None and (op.kind, op.extra) == ('reshape', 1), node.name


def test_spatial_attention_passes_the_channels_and_ties_none_to_the_map():
  """a * sigmoid(conv(a) -> 1 channel) + c: the channels of `a` go through
  the product to the add, which ties them to `c`'s; the map's channel is a
  group of its own, read there (no model output)."""
  tf.set_random_seed(0)
  x = tf.placeholder(tf.float32, [None, 8, 8, 3])
  a = tf1prune.masked_conv2d(x, 6, 3, scope='a')
  attention = tf1prune.masked_conv2d(a, 1, 3, activation_fn=tf.sigmoid,
                                     scope='map')
  c = tf1prune.masked_conv2d(x, 6, 1, scope='c')
  net = tf1prune.masked_conv2d(a * attention + c, 4, 1, scope='b')
  tf1prune.masked_fully_connected(tf.reduce_mean(net, [1, 2]), 2,
                                  activation_fn=None, scope='logits')
  groups = dict((g.members[0].name, g)
                for g in tf1prune.find_channel_groups())
  assert sorted(m.name for m in groups['a/weights'].members) == [
      'a/weights', 'c/weights']
  assert not groups['a/weights'].blocked and not groups['a/weights'].outputs
  assert [m.name for m in groups['map/weights'].members] == ['map/weights']
  assert not groups['map/weights'].outputs
  assert groups['logits/weights'].outputs
