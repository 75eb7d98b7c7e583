"""find_channel_groups and the budget's cost model with transposed convs
(U-Net decoders), Conv3D and 1-D convs: each starts channels as a Conv2D
does, and the budget counts it as the shrink reports it."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.channels import GraphView, classify
from tests.support.shrunk_graphs import is_documented


def _masked(scope, shape):
  """A masked weight `<scope>/weights` of `shape` (glorot uniform)."""
  with tf.variable_scope(scope):
    weights = tf.get_variable('weights', shape,
                              initializer=tf.glorot_uniform_initializer())
    return tf1prune.apply_mask(weights)


def _summary(groups):
  return [([m.name for m in g.members], [m.axis for m in g.members],
           g.num_units, g.blocked is not None) for g in groups]


def _unet(size=8):
  """x -> conv a (stride 2, 8) -> up (transposed, 8 -> 6, back to size)
  + skip (1x1 conv of x, 6) -> y (1x1, 10)."""
  x = tf.placeholder(tf.float32, [None, size, size, 3], name='x')
  a = tf.nn.relu(tf.nn.conv2d(x, _masked('a', [3, 3, 3, 8]), [1, 2, 2, 1],
                              'SAME'))
  shape = tf.stack([tf.shape(a)[0], size, size, 6])
  up = tf.nn.conv2d_transpose(a, _masked('up', [3, 3, 6, 8]), shape,
                              [1, 2, 2, 1], 'SAME')
  skip = tf.nn.conv2d(x, _masked('skip', [1, 1, 3, 6]), [1] * 4, 'SAME')
  y = tf.nn.conv2d(tf.nn.relu(up + skip), _masked('y', [1, 1, 6, 10]),
                   [1] * 4, 'SAME')
  return x, tf.identity(y, name='output')


def _conv3d(size=6):
  x = tf.placeholder(tf.float32, [None, 4, size, size, 3], name='x')
  a = tf.nn.relu(tf.nn.conv3d(x, _masked('a', [3, 3, 3, 3, 8]), [1] * 5,
                              'SAME'))
  b = tf.nn.conv3d(a, _masked('b', [1, 3, 3, 8, 6]), [1, 1, 2, 2, 1],
                   'VALID')
  c = tf.nn.conv3d(x, _masked('c', [1, 1, 1, 3, 6]), [1, 1, 3, 3, 1],
                   'VALID')
  y = tf.nn.conv3d(tf.nn.relu(b + c), _masked(
      'y', [1, 1, 1, 6, 10]), [1] * 5, 'SAME')
  return x, tf.identity(y, name='output')


def _conv1d(size=16):
  x = tf.placeholder(tf.float32, [None, size, 3], name='x')
  a = tf.nn.relu(tf.nn.conv1d(x, _masked('a', [5, 3, 8]), 1, 'SAME'))
  b = tf.nn.conv1d(a, _masked('b', [3, 8, 8]), 1, 'SAME')
  y = tf.nn.conv1d(tf.nn.relu(a + b), _masked('y', [1, 8, 10]), 2, 'SAME')
  return x, tf.identity(y, name='output')


def test_a_transposed_conv_ties_its_filter_axis_2_to_the_skip_it_is_added_to():
  _unet()
  assert _summary(tf1prune.find_channel_groups()) == [
      (['a/weights'], [-1], 8, False),
      (['up/weights', 'skip/weights'], [2, -1], 6, False),
      (['y/weights'], [-1], 10, False)]


def test_conv3d_layers_start_channels_and_a_residual_ties_them():
  _conv3d()
  assert _summary(tf1prune.find_channel_groups()) == [
      (['a/weights'], [-1], 8, False),
      (['b/weights', 'c/weights'], [-1, -1], 6, False),
      (['y/weights'], [-1], 10, False)]


def test_a_1d_conv_is_a_layer_through_its_expand_dims_and_squeeze():
  _conv1d()
  assert _summary(tf1prune.find_channel_groups()) == [
      (['a/weights', 'b/weights'], [-1, -1], 8, False),
      (['y/weights'], [-1], 10, False)]


def test_an_expand_dims_of_the_channel_axis_ends_the_channels_and_says_so():
  x = tf.placeholder(tf.float32, [2, 4, 6])
  a = tf.nn.conv1d(x, _masked('a', [1, 6, 5]), 1, 'SAME')
  wide = tf.expand_dims(a, -1)
  found, why = classify(GraphView(tf.get_default_graph()), wide.op,
                        lambda t: True)
  assert found is None
  assert why == ('the ExpandDims to [2, 4, 5, 1] does not keep whole '
                 'channels (only NHWC to rows [N, K], or a reshape that '
                 'keeps the last axis: [N, C] <-> [N, 1, 1, C], [N, H, W, C] '
                 '<-> [N * H * W, C])')
  assert is_documented(why)


_HPARAMS = ('budget=%s,begin_pruning_step=0,pruning_frequency=1,'
            'sparsity_function_begin_step=0,sparsity_function_end_step=3,'
            'budget_criterion=l2')
_NETS = {'unet': (_unet, [2, 8, 8, 3]), 'conv3d': (_conv3d, [2, 4, 6, 6, 3]),
         'conv1d': (_conv1d, [2, 16, 3])}


@pytest.mark.parametrize('net,budget', [('unet', 'flops:0.5'),
                                        ('unet', 'params:0.6'),
                                        ('conv3d', 'flops:0.5'),
                                        ('conv1d', 'params:0.5')])
def test_the_budget_counts_these_layers_as_the_shrink_report_does(net,
                                                                  budget):
  build, shape = _NETS[net]
  tf.set_random_seed(0)
  x, output = build()
  step = tf.train.get_or_create_global_step()
  pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      _HPARAMS % budget))
  update = pruning.conditional_mask_update_op()
  increment = tf.assign_add(step, 1)
  metric, ratio = budget.split(':')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(4):
      sess.run(update)
      sess.run(increment)
    plan = pruning.budget_plan()
    keep = np.concatenate(sess.run([plan.current_units(item)
                                    for item in plan.items]))
    report = tf1prune.shrink_preview(sess, [output.op.name])
  assert 0 < keep.sum() < keep.size
  totals = report.to_dict()['totals']
  assert totals[metric + '_before'] == plan.dense
  assert totals[metric + '_after'] == plan.model.cost(keep, metric)
  assert totals[metric + '_after'] <= float(ratio) * plan.dense
  assert report.stops == []
