"""`Pruning` to a budget: the exported graph costs what the budget planned.

A net is pruned to its budget in a few steps; then `shrink_preview` (what
`strip_pruning_vars --shrink` exports) must cost exactly what the budget's
cost model says for the masks, meet the budget to within one group's step,
and stop at no channel (the removed channels' biases and batch norms are
zero, so nothing of them is left).
"""

import contextlib

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from bench import _mobile_nets

TF1 = tf.__version__.startswith('1.')
HPARAMS = ('budget=%s,begin_pruning_step=0,pruning_frequency=1,'
           'sparsity_function_begin_step=0,sparsity_function_end_step=3,'
           'budget_criterion=%s')


def _resnet_v1_50(size):
  import tf_slim as slim
  from tf_slim.nets import resnet_v1
  images = tf.placeholder(tf.float32, [None, size, size, 3], name='images')
  compat = (contextlib.nullcontext() if TF1
            else tf1prune.slim_compat.use_tf1prune_batch_norm())
  with compat, slim.arg_scope(resnet_v1.resnet_arg_scope()), \
      tf1prune.pruning_scope():
    logits = resnet_v1.resnet_v1_50(images, 10, is_training=False)[0]
  return images, tf.reshape(logits, [-1, 10])


def _build(net, size):
  if net == 'resnet_v1_50':
    return _resnet_v1_50(size)
  return _mobile_nets.build(net, size)


def _prune(net, size, budget, criterion='l2', steps=5):
  """Prunes `net` to `budget`; returns (pruning, session, output name)."""
  tf.set_random_seed(0)
  images, logits = _build(net, size)
  output = tf.identity(logits, name='output')
  labels = tf.placeholder(tf.int32, [None])
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  step = tf.train.get_or_create_global_step()
  train = tf.train.GradientDescentOptimizer(1e-4).minimize(loss, step)
  pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      HPARAMS % (budget, criterion)))
  with tf.control_dependencies([train]):
    update = pruning.conditional_mask_update_op()
  rs = np.random.RandomState(0)
  sess = tf.Session()
  sess.run(tf.global_variables_initializer())
  _mobile_nets.randomize_normalization(sess, rs)
  for _ in range(steps):
    sess.run(update, {images: rs.uniform(0, 1, [2, size, size, 3]),
                      labels: rs.randint(0, 10, [2])})
  return pruning, sess, output.op.name


def _kept_units(pruning, sess):
  plan = pruning.budget_plan()
  return np.concatenate(sess.run([plan.current_units(item)
                                  for item in plan.items]))


@pytest.mark.parametrize('net,size,budget', [
    ('mobilenet_v2', 32, 'flops:0.5'),
    ('efficientnet_b0', 32, 'params:0.4'),
    ('resnet_v1_50', 32, 'flops:0.3'),
])
def test_the_export_costs_what_the_budget_planned(net, size, budget):
  pruning, sess, output = _prune(net, size, budget)
  plan = pruning.budget_plan()
  metric, ratio = budget.split(':')
  keep = _kept_units(pruning, sess)
  planned = plan.model.cost(keep, metric)
  report = tf1prune.shrink_preview(sess, [output])
  sess.close()
  assert report.stops == []
  totals = report.to_dict()['totals']
  assert totals[metric + '_after'] == planned
  assert totals[metric + '_before'] == plan.dense
  # Within the budget, by less than 1% of the dense cost.
  assert float(ratio) * plan.dense >= planned > (float(ratio) - 0.01) * \
      plan.dense


@pytest.mark.parametrize('criterion', ['l1', 'taylor', 'bn_scale'])
def test_every_criterion_meets_the_budget(criterion):
  pruning, sess, output = _prune('mobilenet_v2', 32, 'flops:0.5', criterion)
  plan = pruning.budget_plan()
  cost = plan.model.cost(_kept_units(pruning, sess), 'flops')
  report = tf1prune.shrink_preview(sess, [output])
  sess.close()
  assert report.flops_after == cost <= 0.5 * plan.dense
  assert report.stops == []
