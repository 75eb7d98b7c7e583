"""find_channel_groups through Split and SplitV: on the channel axis each
output carries the channels at its offset; on another axis every output
carries every channel."""

import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.channels import GraphView, classify
from tests.support.groups import masked_conv, summary
from tests.support.shrunk_graphs import is_documented


def test_a_shufflenet_unit_ties_the_passed_half_to_the_residual():
  """Half of `a` goes through, the other half through `q`; the concat is
  added to `e`: e's first half is a's first half, its second half q's."""
  x = tf.placeholder(tf.float32, [2, 8, 8, 3])
  a = masked_conv(x, 8, 'a', 3)
  p0, p1 = tf.split(tf.nn.relu(a), 2, axis=3)
  net = tf.concat([p0, masked_conv(p1, 4, 'q')], 3)
  masked_conv(tf.nn.relu(net + masked_conv(x, 8, 'e')), 2, 'y')
  groups = tf1prune.find_channel_groups()
  assert summary(groups) == [(['a/weights', 'q/weights', 'e/weights'], 12,
                              False), (['y/weights'], 2, False)]
  assert [m.units for m in groups[0].members] == [
      tuple(range(8)), (8, 9, 10, 11), (0, 1, 2, 3, 8, 9, 10, 11)]


def test_split_v_outputs_take_the_channels_at_their_offsets():
  x = tf.placeholder(tf.float32, [2, 4, 4, 3])
  a = masked_conv(x, 6, 'a')
  p0, p1, p2 = tf.split(a, [1, -1, 2], axis=-1)
  masked_conv(tf.nn.relu(p1 + masked_conv(x, 3, 'b')), 2, 'c')
  masked_conv(tf.concat([p2, p0], 3), 2, 'd')
  groups = tf1prune.find_channel_groups()
  assert summary(groups) == [(['a/weights', 'b/weights'], 6, False),
                             (['c/weights'], 2, False),
                             (['d/weights'], 2, False)]
  assert [m.units for m in groups[0].members] == [tuple(range(6)),
                                                  (1, 2, 3)]


def test_a_split_of_the_positions_gives_every_output_every_channel():
  x = tf.placeholder(tf.float32, [2, 8, 8, 3])
  a = masked_conv(x, 4, 'a', 3)
  top, bottom = tf.split(a, 2, axis=1)
  e = masked_conv(tf.split(x, [4, 4], axis=1)[0], 4, 'e')
  masked_conv(tf.nn.relu(top + e) * tf.sigmoid(bottom), 2, 'c')
  assert summary(tf1prune.find_channel_groups()) == [
      (['a/weights', 'e/weights'], 4, False), (['c/weights'], 2, False)]


def test_the_channels_of_a_split_output_that_nothing_reads_are_outputs():
  x = tf.placeholder(tf.float32, [2, 4, 4, 3])
  a = masked_conv(x, 6, 'a')
  p0, _ = tf.split(a, [4, 2], axis=3, name='parts')
  masked_conv(p0, 2, 'c')
  groups = tf1prune.find_channel_groups()
  assert groups[0].outputs == 'nothing reads them (parts:1)'


def test_a_split_whose_axis_is_not_a_constant_ends_the_channels_and_says_so():
  x = tf.placeholder(tf.float32, [2, 4, 4, 3])
  axis = tf.placeholder(tf.int32, [])
  a = masked_conv(x, 6, 'a')
  parts = tf.split(a, [2, 4], axis=axis)
  found, why = classify(GraphView(tf.get_default_graph()), parts[0].op,
                        lambda t: True)
  assert (found, why) == (None, 'the axis of this SplitV is not a constant')
  assert is_documented(why)
