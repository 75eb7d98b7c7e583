"""PruningPlan: the decisions both backends execute (steps, sparsity, groups,
per-weight answers), the same as tensors and as Python values; the module
dependencies of hparams, spec and plan."""

import ast
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.plan import PruningPlan, Selection


def _plan(text=''):
  return tf1prune.PruningSpec.from_hparams(
      tf1prune.get_pruning_hparams().parse(text)).plan()


def _due(step, last, begin, end, frequency):
  """The contrib predicate, written out."""
  if step < begin:
    return False
  if end != -1 and step > end:
    return False
  return last + frequency <= step


@pytest.mark.parametrize('text,begin,end,frequency', [
    ('', 0, -1, 10),
    ('begin_pruning_step=5,end_pruning_step=40,pruning_frequency=7', 5, 40, 7),
    ('begin_pruning_step=3,pruning_frequency=1', 3, -1, 1),
])
def test_pruning_steps_are_one_rule_in_python_and_as_tensors(text, begin, end,
                                                              frequency):
  plan = _plan(text)
  steps = np.arange(0, 60, dtype=np.int64)
  lasts = np.array([0, 4, 12, 30, 45], np.int64)
  step_t = tf.placeholder(tf.int64, [None])
  last_t = tf.placeholder(tf.int64, [None])
  due_t = plan.is_pruning_step(step_t, last_t, tf.logical_and, tf.logical_or)
  grid_step, grid_last = [g.ravel() for g in np.meshgrid(steps, lasts)]
  with tf.Session() as sess:
    as_tensor = sess.run(due_t, {step_t: grid_step, last_t: grid_last})
  expected = [_due(int(s), int(l), begin, end, frequency)
              for s, l in zip(grid_step, grid_last)]
  as_python = [plan.is_pruning_step(int(s), int(l))
               for s, l in zip(grid_step, grid_last)]
  assert as_python == expected
  assert as_tensor.tolist() == expected
  assert any(expected) and not all(expected)


def test_the_sparsity_of_a_weight_follows_its_target():
  plan = _plan('target_sparsity=0.6,sparsity_function_end_step=50')
  schedule = plan.schedule
  # No target: the global sparsity, whatever it is.
  assert plan.sparsity_of(None, 0.123, schedule, None) == 0.123
  # A target and a schedule with `with_target`: the same curve to the target.
  for step in (0, 10, 25, 50, 80):
    got = plan.sparsity_of(0.9, schedule.sparsity_at(step), schedule,
                           lambda s, step=step: s.sparsity_at(step))
    assert got == tf1prune.PolynomialDecaySparsity(
        0.0, 0.9, 0, 50, 3.0).sparsity_at(step)
    assert got == plan.sparsity_at(step, 0.9)
  # A given sparsity (no schedule): scaled by target / target_sparsity, <= 1.
  assert plan.sparsity_of(0.3, 0.4, None) == 0.4 * (0.3 / 0.6)
  assert plan.sparsity_of(0.9, 0.5, None) == min(0.5 * 0.9 / 0.6, 1.0) == 0.75
  assert plan.sparsity_of(0.9, 0.6, None) == 0.6 * (0.9 / 0.6)
  assert _plan('target_sparsity=0.3').sparsity_of(0.9, 0.5, None) == 1.0
  assert _plan('target_sparsity=0.0').sparsity_of(0.9, 0.5, None) == 0.0


def test_the_tensor_sparsity_equals_the_python_one():
  plan = _plan('target_sparsity=0.8,initial_sparsity=0.1,'
               'sparsity_function_begin_step=5,sparsity_function_end_step=45')
  step = tf.placeholder(tf.int64, [])
  scheduled = plan.sparsity_of(0.5, plan.schedule(step), plan.schedule,
                               lambda s: s(step), tf.minimum)
  given = plan.sparsity_of(0.5, tf.constant(0.4), None, None, tf.minimum)
  with tf.Session() as sess:
    for s in (0, 5, 20, 44, 45, 90):
      assert sess.run(scheduled, {step: s}) == pytest.approx(
          plan.sparsity_at(s, 0.5), abs=1e-7)
    assert sess.run(given) == pytest.approx(0.4 * 0.5 / 0.8, abs=1e-7)


def test_global_groups_keep_the_hparam_order_and_the_item_order():
  plan = _plan('global_pruning_groups=[fc,conv,logits]')
  names = ['conv2/w', 'fc1/w', 'conv1/w', 'embed/w', 'fc2/w']
  groups = plan.global_groups(names, plan.group)
  assert list(groups.items()) == [('fc', ['fc1/w', 'fc2/w']),
                                  ('conv', ['conv2/w', 'conv1/w']),
                                  ('logits', [])]


def test_each_weight_is_answered_once_by_the_plan():
  plan = _plan('target_sparsity=0.6,weight_sparsity_map=[fc2:0.9],'
               'granularity_map=[conv:filter],global_pruning_groups=[fc1],'
               'do_not_prune=[logits/mask]')
  spec = plan.spec
  for name in ('conv1/weights', 'fc1/weights', 'fc2/weights', 'x/w'):
    got, old = plan.weight(name), spec.weight(name)
    assert got._replace(granularity=None) == old._replace(granularity=None)
    assert type(got.granularity) is type(old.granularity)
    assert vars(got.granularity) == vars(old.granularity)
  assert plan.weight('fc2/weights').target_sparsity == 0.9
  assert plan.weight('fc1/weights').group == 'fc1'
  assert repr(plan.weight('conv1/weights').granularity) == "Filter('l1')"
  assert not plan.weight('logits/weights', 'logits/mask').pruned
  assert plan.weight('logits/weights').pruned
  assert plan.selection == Selection('exact', 0.0, 256)
  assert _plan('threshold_method=histogram,threshold_decay=0.5,nbins=64'
               ).selection == Selection('histogram', 0.5, 64)


NAMES = ['Conv1/weights', 'Conv2/weights', 'Logits/weights']
WHY = 'nothing reads them (Logits/BiasAdd:0)'


@pytest.mark.parametrize('text,named', [
    ('granularity_map=[.*:filter]', False),             # every weight
    ('granularity_map=[weights:filter]', False),
    ('granularity_map=[Conv:filter,Logits:filter]', True),
    ('granularity_map=[^(Conv1|Logits)/:filter]', True),
    ('granularity_map=[Conv:filter]', False),
    ('block_dims_map=[Conv:4x4,Logits:-1x1]', False)])   # not guarded
def test_a_layer_is_named_by_an_entry_that_matches_it_and_not_every_weight(
    text, named):
  assert _plan(text).names_layer('Logits/weights', NAMES) == named


@pytest.mark.parametrize('text,shape,kept', [
    ('granularity_map=[.*:filter]', [8, 10], True),
    ('granularity_map=[.*:coupled_filter]', [8, 10], True),
    ('granularity_map=[.*:block-1x2]', [8, 10], True),
    ('granularity_map=[.*:block-1x2]', [3, 3, 8, 10], True),
    ('granularity_map=[.*:block2x2]', [8, 10], False),
    ('granularity_map=[.*:block3x3x-1x1]', [3, 3, 8, 10], True),
    ('granularity_map=[.*:kernel]', [3, 3, 8, 10], False),
    ('granularity_map=[.*:input_channel]', [8, 10], False),
    ('granularity_map=[.*:2of4]', [8, 10], False),
    # contrib's block hparams prune as in contrib, full height included
    ('block_height=-1,block_width=2', [8, 10], False),
    ('block_dims_map=[.*:-1x1]', [1, 1, 8, 10], False),
    ('block_height=-1,block_width=2', [3, 3, 8, 10], False),   # elements
    ('block_height=4', [8, 10], False),
    ('', [8, 10], False),
    ('granularity_map=[Conv:filter,Logits:filter]', [8, 10], False),
    ('granularity_map=[.*:filter],do_not_prune=[Logits]', [8, 10], False)])
def test_output_layers_stay_dense_under_granularities_removing_outputs(
    text, shape, kept):
  plan = _plan(text)
  weight = plan.weight('Logits/weights')
  assert plan.keeps_outputs(weight, shape, WHY, NAMES) == kept
  assert not plan.keeps_outputs(weight, shape, None, NAMES)


@pytest.mark.parametrize('text,value', [
    ('granularity_map=[.*:filter]', "filter: Logits/weights stay dense: "
     "their output channels are the model's outputs (%s), and filter pruning "
     "would remove outputs. Name the layer in granularity_map (e.g. "
     "'Logits:filter')" % WHY),
    ('granularity_map=[.*:block-1x2]', "block-1x2: Logits/weights stay "
     "dense: their output channels are the model's outputs (%s), and "
     "block-1x2 pruning would remove outputs. Name the layer in "
     "granularity_map (e.g. 'Logits:block-1x2')" % WHY)])
def test_the_outputs_warning_names_the_layer_why_and_the_fix(text, value):
  assert _plan(text).outputs_warning(['Logits/weights'], WHY) == (
      value + ' to prune it anyway, or do_not_prune it to silence this.')


def test_pruning_executes_the_plan_of_its_hparams():
  tf.train.get_or_create_global_step()
  hp = tf1prune.get_pruning_hparams().parse('target_sparsity=0.7,'
                                            'weight_sparsity_map=[a:0.2]')
  p = tf1prune.Pruning(hp)
  assert isinstance(p.plan, PruningPlan)
  assert p.plan.spec == tf1prune.PruningSpec.from_hparams(hp)
  assert p.plan.spec is p.pruning_spec


# ---------------------------------------------------------------- modules


def _tf1prune_imports(module):
  """The tf1prune modules `module` (a file of tf1prune/) imports, anywhere."""
  path = os.path.join(os.path.dirname(tf1prune.__file__), module + '.py')
  with open(path) as f:
    tree = ast.parse(f.read())
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module:
      if node.module == 'tf1prune':
        found.update('tf1prune.' + a.name for a in node.names)
      elif node.module.startswith('tf1prune.'):
        found.add(node.module)
    elif isinstance(node, ast.Import):
      found.update(a.name for a in node.names
                   if a.name.startswith('tf1prune'))
  return found


def test_hparams_spec_and_plan_depend_one_way():
  # _moved (the old name validate_hparams, imported from spec when asked for)
  # imports no tf1prune module itself.
  assert _tf1prune_imports('plan/hparams') == {'tf1prune._moved'}
  assert _tf1prune_imports('_moved') == set()
  assert 'tf1prune.plan.hparams' in _tf1prune_imports('plan/spec')
  assert 'tf1prune.plan.pruning_plan' in _tf1prune_imports('plan/spec')
  plan = _tf1prune_imports('plan/pruning_plan')
  assert not plan & {'tf1prune.plan.spec', 'tf1prune.plan.hparams',
                     'tf1prune.training.pruning'}
