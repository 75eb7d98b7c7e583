"""The `budget` hparams: parsing, the errors, and the cost schedule."""

import numpy as np
import pytest

import tf1prune
from tf1prune.plan.budget import Budget, cost_ratio_at, parse_budget


@pytest.mark.parametrize('text,kind,value,relative', [
    ('flops:0.5', 'flops', 0.5, True),
    (' PARAMS : 0.4 ', 'params', 0.4, True),
    ('flops:1', 'flops', 1.0, True),
    ('flops:1.2e9', 'flops', 1.2e9, False),
    ('params:2000000', 'params', 2e6, False),
])
def test_a_budget_is_a_kind_and_a_ratio_or_a_count(text, kind, value,
                                                   relative):
  budget = parse_budget(text)
  assert (budget.kind, budget.value, budget.relative) == (kind, value,
                                                          relative)


def test_no_budget_is_none():
  assert parse_budget('') is None
  assert tf1prune.PruningSpec.from_hparams().budget is None


@pytest.mark.parametrize('text,message', [
    ('macs:0.5', "budget must look like flops:0.5, .* got 'macs:0.5' "
                 r"\(kinds: flops, params, latency\)"),
    ('flops', "got 'flops' \\(kinds"),
    ('flops:half', "got 'flops:half', whose value is not a number"),
    ('flops:0', "got 'flops:0': the value must be > 0 and finite"),
    ('params:-3', "got 'params:-3': the value must be > 0 and finite"),
    ('flops:inf', "got 'flops:inf': the value must be > 0 and finite"),
])
def test_a_bad_budget_names_the_value_and_the_forms(text, message):
  with pytest.raises(ValueError, match=message):
    parse_budget(text)
  with pytest.raises(ValueError, match=message):
    tf1prune.PruningSpec.from_hparams(
        tf1prune.get_pruning_hparams().parse('budget=%s' % text))


def test_an_absolute_budget_is_a_ratio_of_the_dense_cost():
  assert Budget('flops', 3e6).ratio(4e6) == 0.75
  assert Budget('flops', 0.3).ratio(4e6) == 0.3
  with pytest.raises(ValueError, match="budget params:5e\\+06 is not below "
                     "the dense model's params, 4,000,000: nothing would be "
                     "pruned"):
    Budget('params', 5e6).ratio(4e6)


@pytest.mark.parametrize('name,value,message', [
    ('budget_criterion', 'gradient', "budget_criterion must be 'l1', 'l2', "
     "'taylor' or 'bn_scale', got 'gradient'"),
    ('budget_normalization', 'sum', "budget_normalization must be 'mean', "
     "'max' or 'none', got 'sum'"),
    ('budget_taylor_decay', 1.0, r'budget_taylor_decay must be in \[0, 1\), '
     'got 1.0'),
    ('budget_cost_exponent', -0.5, r'budget_cost_exponent must be in \[0, 2\] '
     r'\(1: importance per unit of cost saved, 0: importance alone\), got '
     r'-0.5'),
])
def test_bad_budget_hparams_name_the_value(name, value, message):
  hparams = tf1prune.get_pruning_hparams()
  setattr(hparams, name, value)
  with pytest.raises(ValueError, match=message):
    tf1prune.PruningSpec.from_hparams(hparams)


def test_the_cost_follows_the_sparsity_schedule_from_one_to_the_budget():
  spec = tf1prune.PruningSpec.from_hparams(tf1prune.get_pruning_hparams(
  ).parse('sparsity_function_begin_step=10,sparsity_function_end_step=110,'
          'sparsity_function_exponent=2'))
  for step in (0, 10, 35, 60, 110, 500):
    p = np.clip((step - 10) / 100.0, 0.0, 1.0)
    assert cost_ratio_at(step, 0.3, spec.schedule) == pytest.approx(
        1.0 - 0.7 * (1.0 - (1.0 - p) ** 2), abs=1e-12)
  assert cost_ratio_at(0, 0.3, spec.schedule) == 1.0
  assert cost_ratio_at(110, 0.3, spec.schedule) == pytest.approx(0.3)


def test_a_budget_makes_filters_coupled_and_leaves_other_granularities():
  plan = tf1prune.PruningSpec.from_hparams(tf1prune.get_pruning_hparams(
  ).parse('budget=flops:0.5,granularity_map=[fc:2of4,conv2:filter],'
          'block_dims_map=[emb:1x4]')).plan()
  assert plan.weight('conv1/weights').granularity.name == 'coupled_filter'
  assert plan.weight('conv2/weights').granularity.name == 'coupled_filter'
  assert repr(plan.weight('fc/weights').granularity) == 'NM(2, 4, frozen=False)'
  assert type(plan.weight('emb/weights').granularity).__name__ == 'Block'
