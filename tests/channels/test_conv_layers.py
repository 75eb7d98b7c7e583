"""find_channel_groups and the budget's cost model with transposed convs
(U-Net decoders): one starts channels as a Conv2D does (on its filter's
axis 2), and the budget counts it as the shrink reports it."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune


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


def test_a_transposed_conv_ties_its_filter_axis_2_to_the_skip_it_is_added_to():
  _unet()
  assert _summary(tf1prune.find_channel_groups()) == [
      (['a/weights'], [-1], 8, False),
      (['up/weights', 'skip/weights'], [2, -1], 6, False),
      (['y/weights'], [-1], 10, False)]


_HPARAMS = ('budget=%s,begin_pruning_step=0,pruning_frequency=1,'
            'sparsity_function_begin_step=0,sparsity_function_end_step=3,'
            'budget_criterion=l2')
_NETS = {'unet': (_unet, [2, 8, 8, 3])}


@pytest.mark.parametrize('net,budget', [('unet', 'flops:0.5'),
                                        ('unet', 'params:0.6')])
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
