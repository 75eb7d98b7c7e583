"""The one op table and the one propagation: training and the shrink agree,
and the docs follow them."""

import os
import re

import numpy as np
import pytest

import tf1prune.channels
from tf1prune.channels import RULES, Forward, passes_value, rule_of
from tf1prune.channels.table import TRAINING_ONLY
from tf1prune.export.shrink.regions import RegionWalk
from tests.support.checkout import ROOT

_DOCS = os.path.join(ROOT, 'docs')


def test_every_op_training_follows_the_shrink_passes_or_is_listed_with_why():
  followed = set(op for op, rule in RULES.items()
                 if rule.kind not in ('stop', 'layer'))
  shrunk = set(op for op in followed if passes_value(op))
  assert sorted(followed - shrunk) == sorted(TRAINING_ONLY)
  for op, why in TRAINING_ONLY.items():
    assert RULES[op].why == why and why


def test_the_ops_that_disagreed_before_now_pass_both():
  for op in ('Swish', 'Neg', 'Abs', 'Exp', 'Log', 'Sqrt', 'Square',
             'MirrorPad', 'AddN', 'Maximum', 'Minimum', 'Cast',
             'StopGradient', 'Max', 'Sum', 'Min', 'Mul'):
    assert passes_value(op), op


def test_an_op_the_table_does_not_know_stops_and_names_itself():
  assert rule_of('Cumsum').kind == 'stop'
  assert rule_of('Cumsum').why == 'Cumsum is not among the ops the shrink passes'


@pytest.mark.parametrize('op,inputs,expected', [
    ('Relu6', [[-1.0, 3.0, 7.0]], [0.0, 3.0, 6.0]),
    ('Sigmoid', [[0.0]], [0.5]),
    ('Softplus', [[0.0]], [np.log(2.0)]),
    ('Selu', [[-1.0]], [1.0507009873554805 * 1.6732632423543772 * (np.exp(-1) - 1)]),
    ('SquaredDifference', [[3.0], [1.0]], [4.0]),
    ('DivNoNan', [[3.0, 2.0], [0.0, 4.0]], [0.0, 0.5]),
    ('AddN', [[1.0], [2.0], [3.0]], [6.0]),
    ('Swish', [[1.0]], [1.0 / (1.0 + np.exp(-1.0))]),
])
def test_values_are_the_numpy_function_of_the_constants(op, inputs, expected):
  value = RULES[op].value(lambda key, default: default,
                          *[np.array(i) for i in inputs])
  np.testing.assert_allclose(value, expected, rtol=1e-12)


def test_structured_md_lists_exactly_the_ops_the_shrink_passes():
  with open(os.path.join(_DOCS, 'structured.md')) as f:
    text = f.read()
  listed = text.split('<!-- shrink-ops -->')[1].split('<!-- /shrink-ops -->')[0]
  assert sorted(re.findall(r'`(\w+)`', listed)) == sorted(
      op for op in RULES if passes_value(op))


def test_the_shrink_has_no_walk_of_its_own_and_the_docs_say_so():
  assert issubclass(RegionWalk, Forward)
  assert 'one propagation' in tf1prune.channels.__doc__
  for name in ('structured.md', 'channel_groups.md'):
    with open(os.path.join(_DOCS, name)) as f:
      text = f.read()
    assert 'channels.Forward' in text or '(`Forward`)' in text, name
    assert 'explore' not in text and 'own walk' not in text, name
