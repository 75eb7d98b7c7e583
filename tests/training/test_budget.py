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
from tests.support.pruned_nets import randomize_batch_norm

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
  train = tf.train.GradientDescentOptimizer(1e-6).minimize(loss, step)
  pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      HPARAMS % (budget, criterion)))
  with tf.control_dependencies([train]):
    update = pruning.conditional_mask_update_op()
  rs = np.random.RandomState(0)
  sess = tf.Session()
  sess.run(tf.global_variables_initializer())
  randomize_batch_norm(sess, rs)
  for _ in range(steps):
    feed = {images: rs.uniform(0, 1, [2, size, size, 3]),
            labels: rs.randint(0, 10, [2])}
    assert np.isfinite(sess.run(loss, feed))   # a net that trains
    sess.run(update, feed)
  return pruning, sess, output.op.name


def _kept_units(pruning, sess):
  plan = pruning.budget_plan()
  return np.concatenate(sess.run([plan.current_units(item)
                                  for item in plan.items]))


# The larger nets take one to two minutes each on TF 1.15 (building the
# update and its first run): the full run has them.
@pytest.mark.parametrize('net,size,budget', [
    ('mobilenet_v2', 32, 'flops:0.5'),
    ('se_resnet', 32, 'params:0.4'),
    pytest.param('mobilenet_v3_small', 32, 'flops:0.3',
                 marks=pytest.mark.slow),
    pytest.param('efficientnet_b0', 32, 'params:0.4', marks=pytest.mark.slow),
    pytest.param('resnet_v1_50', 32, 'flops:0.3', marks=pytest.mark.slow),
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
@pytest.mark.parametrize('net', [
    'se_resnet', pytest.param('mobilenet_v2', marks=pytest.mark.slow)])
def test_every_criterion_meets_the_budget(criterion, net):
  pruning, sess, output = _prune(net, 32, 'flops:0.5', criterion)
  plan = pruning.budget_plan()
  cost = plan.model.cost(_kept_units(pruning, sess), 'flops')
  report = tf1prune.shrink_preview(sess, [output])
  sess.close()
  assert report.flops_after == cost <= 0.5 * plan.dense
  assert report.stops == []


def _small_net(size=8, lrn=False, batch_norm=False):
  """x -> conv a (8) -> [lrn] -> conv b (8) -> dense y (10), masked."""
  x = tf.placeholder(tf.float32, [None, size, size, 3], name='x')
  params = ({'normalizer_fn': tf1prune.batch_norm,
             'normalizer_params': {'is_training': False, 'scale': True}}
            if batch_norm else {})
  a = tf1prune.masked_conv2d(x, 8, 3, scope='a', **params)
  if lrn:
    a = tf.nn.lrn(a, 2, bias=1.0, alpha=0.001, beta=0.75, name='norm')
  b = tf1prune.masked_conv2d(a, 8, 3, scope='b', **params)
  y = tf1prune.masked_fully_connected(tf.reshape(b, [-1, size * size * 8]),
                                      10, activation_fn=None, scope='y')
  return x, tf.identity(y, name='output')


def _hparams(text):
  return tf1prune.get_pruning_hparams().parse(text)


def test_a_budget_with_no_group_to_prune_says_why():
  _small_net()
  tf.train.get_or_create_global_step()
  pruning = tf1prune.Pruning(_hparams('budget=flops:0.5,'
                                      'do_not_prune=[a,b]'))
  with pytest.raises(ValueError, match='budget flops:0.5: no channel group '
                     'can be pruned'):
    pruning.mask_update_op()


def test_a_budget_below_the_minimum_names_the_least_it_can_be():
  _small_net()
  tf.train.get_or_create_global_step()
  pruning = tf1prune.Pruning(_hparams('budget=params:0.01,'
                                      'channel_group_min_channels=2'))
  # Each of a, b keeps 2 of 8 channels: 3*9*2+2 + 2*9*2+2 + 2*64*10+10.
  least = 56 + 38 + 1290
  dense = 3 * 9 * 8 + 8 + 8 * 9 * 8 + 8 + 512 * 10 + 10
  with pytest.raises(ValueError, match=(
      r'budget params:0.01 is below what the pruned model can cost: with '
      r'every group at its minimum \(channel_group_min_channels=2 and 2 at '
      r'least, channel_group_multiple=1\) it costs %s params, %.4f of the '
      r'dense %s; give a budget of at least params:%.4f' % (
          '{:,}'.format(least), least / dense, '{:,}'.format(dense),
          least / dense))):
    pruning.budget_plan()


def test_a_flops_budget_needs_known_sizes():
  x = tf.placeholder(tf.float32, [None, None, None, 3])
  net = tf1prune.masked_conv2d(x, 8, 3, scope='a')
  tf1prune.masked_conv2d(net, 4, 3, scope='b')
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError, match='the output size of .*a/.* is '
                     'unknown, so its FLOPs are; give the model input a '
                     'static height and width'):
    tf1prune.Pruning(_hparams('budget=flops:0.5')).budget_plan()
  assert tf1prune.Pruning(_hparams('budget=params:0.5')).budget_plan()


def test_taylor_without_gradients_names_the_fix():
  _small_net()
  tf.train.get_or_create_global_step()
  pruning = tf1prune.Pruning(_hparams('budget=flops:0.5,'
                                      'budget_criterion=taylor'))
  with pytest.raises(ValueError, match=r'budget_criterion=taylor needs the '
                     r'gradient of each pruned weight: no optimizer op in the '
                     r'graph updates a/weights'):
    pruning.mask_update_op()


def test_a_report_needs_a_budget():
  _small_net()
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError, match="budget_report needs the budget "
                     "hparam; this Pruning has none \\(budget=''\\)"):
    tf1prune.Pruning().budget_report(None)


@pytest.mark.parametrize('criterion', ['taylor', 'l2'])
def test_the_hook_prunes_to_the_budget_and_reports_per_layer(criterion,
                                                             tmp_path):
  x, y = _small_net(batch_norm=True)
  labels = tf.placeholder(tf.int64, [None])
  loss = tf.losses.sparse_softmax_cross_entropy(labels, y)
  step = tf.train.get_or_create_global_step()
  train = tf.train.MomentumOptimizer(0.01, 0.9).minimize(loss, step)
  pruning = tf1prune.Pruning(_hparams(
      'budget=flops:0.5,sparsity_function_end_step=6,pruning_frequency=2,'
      'budget_criterion=%s' % criterion))
  pruning.add_pruning_summaries()
  hook = tf1prune.PruningHook(pruning)
  rs = np.random.RandomState(0)
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_summaries_steps=1,
      hooks=[hook]) as sess:
    for _ in range(8):
      sess.run(train, {x: rs.rand(4, 8, 8, 3), labels: rs.randint(0, 10, 4)})
  with tf.Session() as sess:
    tf.train.Saver().restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
    report = pruning.budget_report(sess)
    plan = pruning.budget_plan()
    if criterion == 'taylor':
      averages = sess.run(list(pruning._budget[3].averages.values()))
      assert all(a.max() > 0 for a in averages)
    # A removed channel: its batch norm's scale and offset are 0.
    units = sess.run(pruning._budget_now[0])
    for variable, position, ids, what in pruning.channel_params():
      kept = plan.split(units)[position]
      value = sess.run(variable)
      assert (value[kept[ids] == 0] == 0).all(), variable.op.name
      assert what in ('scale', 'offset')
  assert report.total('flops') <= 0.5 * report.total('flops', False)
  assert report.total('flops') == plan.model.cost(units, 'flops')
  assert report.allowed == 0.5 * plan.dense
  text = report.format_table()
  assert text.splitlines()[0].split() == ['layer', 'kind', 'inputs',
                                          'outputs', 'params', 'FLOPs']
  assert text.splitlines()[-1] == (
      'budget flops:0.5: flops x0.5000 now allowed, x%.4f reached' % (
          report.total('flops') / plan.dense))
  tags = set()
  for event in tf.train.summary_iterator(str(next(tmp_path.glob(
      'events.out.tfevents.*')))):
    tags.update(v.tag for v in event.summary.value)
  assert {'model_pruning_summaries/budget/cost_ratio',
          'model_pruning_summaries/budget/cost_ratio_target',
          'model_pruning_summaries/a/weights/kept_channels'} <= tags


@pytest.mark.parametrize('zeroed', [False, True])
def test_filter_pruning_can_zero_the_removed_channels_bias(zeroed):
  """With prune_channel_params a pruned filter's channel is 0, and the
  shrink removes it past an LRN; without it the bias keeps it (contrib)."""
  x, y = _small_net(lrn=True)
  step = tf.train.get_or_create_global_step()
  pruning = tf1prune.Pruning(_hparams(
      'granularity_map=[a:coupled_filter],target_sparsity=0.5,'
      'sparsity_function_end_step=1,pruning_frequency=1,'
      'prune_channel_params=%s' % zeroed))
  update = pruning.conditional_mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    biases = [v for v in tf.global_variables() if v.op.name == 'a/biases'][0]
    sess.run(tf.assign(biases, np.arange(1.0, 9.0)))
    sess.run(tf.assign(step, 1))
    sess.run(update)
    kept = sess.run(tf.reduce_max(tf.abs(tf1prune.get_masks()[0]),
                                  [0, 1, 2])) > 0
    assert kept.sum() == 4
    bias = sess.run(biases)
    report = tf1prune.shrink_preview(sess, ['output'])
  assert (bias[~kept] == 0).all() == zeroed
  assert (bias[kept] == np.arange(1.0, 9.0)[kept]).all()
  outputs = dict((l.name, l.outputs_after) for l in report.layers)
  assert outputs[[n for n in outputs if n.startswith('a/')][0]] == (
      4 if zeroed else 8)
