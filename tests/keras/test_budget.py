"""The Keras Pruner prunes to a budget: `tk.shrink_model`'s report counts
the FLOPs and parameters the budget planned, within one unit of the
target; the schedule ramps the cost; bad budgets are clear errors."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.support.keras_models import (keras_module, residual_cnn,
                                        skip_unless_usable)

skip_unless_usable()

import tf1prune.keras as tk  # noqa: E402

K = keras_module()
L = K.layers
END = 'sparsity_function_end_step=10,pruning_frequency=1'


def _one_unit_step(plan, keep, metric):
  """The most that keeping one more removed unit costs, over the groups."""
  cost = plan.model.cost(keep, metric)
  steps = [0.0]
  for unit in np.flatnonzero(keep == 0):
    more = keep.copy()
    more[unit] = 1.0
    steps.append(plan.model.cost(more, metric) - cost)
  return max(steps)


def _meets_the_budget(model, pruner, ratio, metric):
  """Shrinks `model`; asserts the report's cost is the plan's, at most the
  budget and within one unit of it. Returns the shrink report."""
  plan = pruner.budget_plan()
  keep = plan.current()
  small, report = tk.shrink_model(model)
  before, after = {'flops': (report.flops_before, report.flops_after),
                   'params': (report.params_before, report.params_after)
                   }[metric]
  budget = pruner.budget_report()
  assert before == plan.dense == budget.total(metric, after=False)
  assert after == plan.model.cost(keep, metric) == budget.total(metric)
  target = ratio * before
  assert after <= target
  assert target - after < _one_unit_step(plan, keep, metric)
  assert report.stops == []
  assert report.check and all(row.ok for row in report.check)
  return report


@pytest.mark.parametrize('budget,ratio,metric', [
    ('flops:0.5', 0.5, 'flops'), ('params:0.4', 0.4, 'params'),
    ('flops:200000', None, 'flops')])
def test_the_shrunk_residual_cnn_costs_the_budget(budget, ratio, metric):
  model = residual_cnn(K)
  pruner = tk.Pruner(model, 'budget=%s,%s' % (budget, END))
  pruner.update(step=10)
  ratio = ratio or 200000.0 / pruner.budget_plan().dense
  report = _meets_the_budget(model, pruner, ratio, metric)
  if metric == 'params':
    assert report.params_before == model.count_params()


def test_the_shrunk_mobilenet_v2_costs_the_budget():
  K.utils.set_random_seed(0)
  model = K.applications.MobileNetV2(
      alpha=0.35, weights=None, input_shape=(32, 32, 3), classes=4,
      classifier_activation=None)
  pruner = tk.Pruner(model, 'budget=flops:0.5,' + END)
  pruner.update(step=10)
  _meets_the_budget(model, pruner, 0.5, 'flops')


def test_the_schedule_ramps_the_cost_from_dense_to_the_budget():
  model = residual_cnn(K)
  pruner = tk.Pruner(model, 'budget=flops:0.3,sparsity_function_end_step=10,'
                            'pruning_frequency=2')
  dense = pruner.budget_plan().dense
  reached = []
  for step in range(14):
    expected = 1.0 - 0.7 * (1.0 - (1.0 - min(step / 10.0, 1.0)) ** 3)
    report = pruner.budget_report(step)
    assert report.allowed / dense == pytest.approx(expected, rel=1e-6)
    if pruner.step(step):
      assert pruner.cost_ratio <= expected + 1e-6
      assert pruner.budget_report().total('flops') == pytest.approx(
          pruner.cost_ratio * dense, rel=1e-6)
      reached.append((step, pruner.cost_ratio))
  assert [s for s, _ in reached] == [2, 4, 6, 8, 10, 12]
  ratios = [r for _, r in reached]
  assert ratios == sorted(ratios, reverse=True) and ratios[0] < 1.0
  assert 0.25 < ratios[-1] <= 0.3


def test_the_report_and_the_summaries(tmp_path):
  model = residual_cnn(K)
  model.compile(K.optimizers.SGD(0.01), 'mse')
  pruner = tk.Pruner(model, 'budget=flops:0.5,sparsity_function_end_step=4,'
                            'pruning_frequency=2')
  log_dir = str(tmp_path)
  x = np.random.RandomState(1).randn(8, 16, 16, 3).astype(np.float32)
  y = np.random.RandomState(2).randn(8, 4).astype(np.float32)
  model.fit(x, y, batch_size=2, epochs=2, verbose=0,
            callbacks=[tk.PruningCallback(pruner, log_dir=log_dir)])
  assert pruner.last_update_step == 8
  report = pruner.budget_report()
  lines = report.format_table().splitlines()
  assert lines[0].split() == ['layer', 'kind', 'inputs', 'outputs', 'params',
                              'FLOPs']
  dw = [n for n in pruner.weight_names if n.startswith('dw/')][0]
  assert [row[0] for row in report.rows] == [
      'stem/kernel', 'stem_bn', 'b1/kernel', 'b1_bn', 'b2/kernel', 'b2_bn',
      dw, 'dw_bn', 'head/kernel', 'head_bn', 'logits/kernel']
  assert lines[-1] == (
      'budget flops:0.5: flops x0.5000 now allowed, x%.4f reached'
      % pruner.cost_ratio)
  tags = {}
  for path in glob.glob(os.path.join(log_dir, 'train', 'events.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags[value.tag] = (event.step, float(tf.make_ndarray(value.tensor)))
  scope = 'model_pruning_summaries/'
  assert tags[scope + 'budget/cost_ratio_target'] == (8, pytest.approx(0.5))
  assert tags[scope + 'budget/cost_ratio'] == (8, pruner.cost_ratio)
  kept = pruner.masks()['b1/kernel'].any(axis=(0, 1, 2)).mean()
  assert tags[scope + 'b1/kernel/kept_channels'] == (8, kept)


def _two_convs(seed=0, bn=True, size=8):
  """size x size x 3 -> conv 'a' (8) [-> BN] -> ReLU -> conv 'b' (8) [->
  BN] -> ReLU -> pool -> Dense 'y' (10)."""
  K.utils.set_random_seed(seed)
  x = K.Input((size, size, 3))
  h = x
  for name in ('a', 'b'):
    h = L.Conv2D(8, 3, padding='same', name=name)(h)
    if bn:
      h = L.BatchNormalization(name=name + '_bn')(h)
    h = L.ReLU()(h)
  return K.Model(x, L.Dense(10, name='y')(L.GlobalAveragePooling2D()(h)))


def test_bn_scale_keeps_the_channels_of_the_largest_gammas():
  model = _two_convs()
  gammas = {'a_bn': [8., 1., 7., 2., 6., 3., 5., 4.],
            'b_bn': [1., 2., 3., 4., 5., 6., 7., 8.]}
  for name, values in gammas.items():
    model.get_layer(name).gamma.assign(np.float32(values) * -0.1)
  pruner = tk.Pruner(model, 'budget=flops:0.4,budget_criterion=bn_scale,' +
                     END)
  pruner.update(step=10)
  for layer, name in (('a', 'a_bn'), ('b', 'b_bn')):
    kept = pruner.masks()[layer + '/kernel'].any(axis=(0, 1, 2))
    count = int(kept.sum())
    assert 2 <= count < 8
    best = np.argsort(-np.float32(gammas[name]), kind='stable')[:count]
    assert sorted(np.flatnonzero(kept)) == sorted(best)


def test_bn_scale_ranks_a_group_without_batch_norm_by_l2(tf_warnings):
  tk.Pruner(_two_convs(bn=False), 'budget=flops:0.5,'
                                  'budget_criterion=bn_scale')
  assert ('budget_criterion=bn_scale: channel group [8 channels: a/kernel] '
          'has no batch norm with a scale after it; it is ranked by l2'
          ) in tf_warnings


def test_a_budget_keeps_the_locked_units_and_the_minimums():
  hparams = ('budget=flops:0.32,channel_group_min_channels=3,'
             'channel_group_multiple=2,' + END)

  def kept_units(model):
    pruner = tk.Pruner(model, hparams)
    pruner.update(step=10)
    return [pruner.masks()[n].any(axis=(0, 1, 2)) for n in ('a/kernel',
                                                            'b/kernel')]
  unlocked = kept_units(_two_convs())
  assert [int(k.sum()) for k in unlocked] == [4, 4]   # 3, to a multiple of 2
  removed = int(np.flatnonzero(~unlocked[0])[0])
  model = _two_convs()
  tk.lock(model, 'a', 'kernel', np.s_[0, 0, 0, removed])
  locked = kept_units(model)
  assert locked[0][removed]
  assert [int(k.sum()) for k in locked] == [4, 4]


def _errors():
  ones = 3 * 9 * 2 + 2 + 2 * 9 * 2 + 2 + 2 * 10 + 10
  dense = 3 * 9 * 8 + 8 + 8 * 9 * 8 + 8 + 8 * 10 + 10
  bn = 4 * (8 + 8)
  return [
      ('budget=latency:0.5', 'budget=latency:0.5: the Keras Pruner prunes to '
       'flops or params budgets, not latency'),
      ('budget=flops:0.5,budget_criterion=taylor',
       'budget_criterion=taylor: the Keras Pruner ranks channels by l1, l2, '
       'bn_scale (taylor needs the gradients the optimizer applies, which '
       'the Pruner does not see); give one of those'),
      ('budget=flops:0.5,budget_sensitivity=s.json',
       'budget_sensitivity=s.json: the Keras Pruner does not read '
       'sensitivity limits'),
      ('budget=energy:0.5', "budget must look like flops:0.5, params:0.4 or "
       "latency:0.5 (a ratio of the dense cost, in (0, 1]), flops:1.2e9 "
       "(FLOPs per example) or latency:3.5ms; got 'energy:0.5'"),
      ('budget=flops:0', "budget must look like flops:0.5"),
      ('budget=flops:1e12', "budget flops:1e+12 is not below the dense "
       "model's flops, "),
      ('budget=flops:0.5,do_not_prune=[a,b]', 'budget flops:0.5: no channel '
       'group can be pruned: give the layers a filter granularity'),
      ('budget=params:0.01,channel_group_min_channels=2',
       'budget params:0.01 is below what the pruned model can cost: with '
       'every group at its minimum (channel_group_min_channels=2 and 2 at '
       'least, channel_group_multiple=1) it costs %s params, %.4f of the '
       'dense %s; give a budget of at least params:%.4f, or lower the '
       'minimums' % ('{:,}'.format(ones + 4 * 4), (ones + 16) / (dense + bn),
                     '{:,}'.format(dense + bn), (ones + 16) / (dense + bn))),
  ]


@pytest.mark.parametrize('hparams,message', _errors())
def test_bad_budgets_are_refused_when_the_pruner_is_made(hparams, message):
  with pytest.raises(ValueError) as e:
    tk.Pruner(_two_convs(), hparams)
  assert str(e.value).startswith(message), str(e.value)


def test_a_flops_budget_needs_a_static_input_size():
  with pytest.raises(ValueError) as e:
    tk.Pruner(_two_convs(size=None), 'budget=flops:0.5')
  assert str(e.value).startswith(
      'budget flops:0.5: the output size of a/kernel')
  assert str(e.value).endswith('give the model input a static height and '
                               'width')
  assert tk.Pruner(_two_convs(size=None), 'budget=params:0.5').budget_plan()


def test_a_report_needs_a_budget():
  with pytest.raises(ValueError) as e:
    tk.Pruner(_two_convs()).budget_report()
  assert str(e.value) == ("budget_report needs the budget hparam; this "
                          "Pruner has none (budget='')")
