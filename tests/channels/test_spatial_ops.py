"""find_channel_groups through ops that move positions and keep every
channel: spatial slices, SpaceToBatchND / BatchToSpaceND, resizes."""

import tensorflow.compat.v1 as tf

import tf1prune
from tests.support.groups import masked_conv, summary


def test_a_spatial_slice_ties_the_channels_it_passes():
  x = tf.placeholder(tf.float32, [2, 9, 9, 3])
  a = tf.nn.relu(masked_conv(x, 4, 'a', 3))
  cut = tf.pad(a, [[0, 0], [0, 1], [0, 1], [0, 0]])[:, 1:, 1:, :]
  b = masked_conv(x, 4, 'b', 3)
  masked_conv(tf.nn.relu(tf.slice(cut + b, [0, 1, 1, 0], [-1, 7, 7, 4])), 2,
              'c')
  assert summary(tf1prune.find_channel_groups()) == [
      (['a/weights', 'b/weights'], 4, False), (['c/weights'], 2, False)]


def test_a_slice_of_a_channel_range_ends_the_group():
  x = tf.placeholder(tf.float32, [2, 4, 4, 3])
  a = masked_conv(x, 6, 'a')
  masked_conv(a[:, :, :, 1:4], 2, 'c')
  groups = tf1prune.find_channel_groups()
  assert summary(groups) == [(['a/weights'], 6, False),
                             (['c/weights'], 2, False)]


def test_space_to_batch_and_back_tie_an_atrous_conv_to_its_residual():
  x = tf.placeholder(tf.float32, [2, 8, 8, 3])
  stem = masked_conv(x, 4, 'stem', 3)
  blocks = tf.space_to_batch_nd(tf.nn.relu(stem), [2, 2], [[2, 2], [2, 2]])
  atrous = masked_conv(blocks, 4, 'atrous', 3, padding='VALID')
  back = tf.batch_to_space_nd(atrous, [2, 2], [[0, 0], [0, 0]])
  masked_conv(tf.nn.relu(stem + back), 2, 'c')
  assert summary(tf1prune.find_channel_groups()) == [
      (['stem/weights', 'atrous/weights'], 4, False),
      (['c/weights'], 2, False)]


def test_a_resize_ties_the_channels_it_passes():
  x = tf.placeholder(tf.float32, [2, 4, 4, 3])
  small = masked_conv(x, 4, 'small', 3)
  big = masked_conv(tf.image.resize_bilinear(x, [8, 8]), 4, 'big', 3)
  near = tf.image.resize_nearest_neighbor(small, [8, 8])
  masked_conv(tf.nn.relu(tf.image.resize_bilinear(near, [8, 8]) + big), 2, 'c')
  assert summary(tf1prune.find_channel_groups()) == [
      (['small/weights', 'big/weights'], 4, False),
      (['c/weights'], 2, False)]
