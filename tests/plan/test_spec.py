"""PruningSpec: the hparams parsed once, validation errors, per-weight answers;
the schedule object and user schedules driving the masks."""

import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.plan.spec import validate_hparams
from tf1prune.masks import NM, Block, ChannelBlock, Element, Filter, Kernel
from tests.support import np_reference


def _spec(text=''):
  return tf1prune.PruningSpec.from_hparams(
      tf1prune.get_pruning_hparams().parse(text))


# ---------------------------------------------------------------- parsing


def test_defaults_are_the_hparams_defaults():
  spec = tf1prune.PruningSpec.from_hparams()
  assert spec == _spec('')
  assert spec != _spec('do_not_prune=[logits]')
  assert spec.values() == tf1prune.get_pruning_hparams().values()
  assert spec.name == 'model_pruning'
  assert (spec.begin_pruning_step, spec.end_pruning_step,
          spec.pruning_frequency) == (0, -1, 10)
  assert (spec.threshold_method, spec.threshold_decay, spec.nbins) == (
      'exact', 0.0, 256)
  assert spec.block == (1, 1, 'AVG')
  assert spec.group_importance == 'l1'
  assert spec.schedule == tf1prune.PolynomialDecaySparsity(0.0, 0.5, 0, 100,
                                                           3.0)
  assert spec.target_sparsity == 0.5
  assert spec.global_pruning_groups.patterns == []
  assert not spec.do_not_prune and not spec.weight_sparsity_map


def test_every_hparam_is_read_into_the_spec():
  spec = _spec('name=p,begin_pruning_step=5,end_pruning_step=50,'
               'pruning_frequency=3,threshold_method=histogram,'
               'threshold_decay=0.25,nbins=64,block_height=2,block_width=-1,'
               'block_pooling_function=MAX,initial_sparsity=0.1,'
               'target_sparsity=0.8,sparsity_function_begin_step=4,'
               'sparsity_function_end_step=40,sparsity_function_exponent=2,'
               'group_importance=max,global_pruning_groups=[conv,fc]')
  assert (spec.name, spec.begin_pruning_step, spec.end_pruning_step,
          spec.pruning_frequency) == ('p', 5, 50, 3)
  assert (spec.threshold_method, spec.threshold_decay, spec.nbins) == (
      'histogram', 0.25, 64)
  assert spec.block == (2, -1, 'MAX')
  assert spec.group_importance == 'max'
  assert spec.schedule == tf1prune.PolynomialDecaySparsity(
      initial_sparsity=0.1, target_sparsity=0.8, begin_step=4, end_step=40,
      exponent=2.0)
  assert spec.global_pruning_groups.patterns == ['conv', 'fc']


def test_the_spec_is_immutable_and_a_snapshot_of_the_hparams():
  hp = tf1prune.get_pruning_hparams().parse('target_sparsity=0.7,'
                                            'do_not_prune=[logits]')
  spec = tf1prune.PruningSpec.from_hparams(hp)
  with pytest.raises(AttributeError):
    spec.name = 'other'
  hp.target_sparsity = 0.2
  hp.do_not_prune.append('conv')
  assert spec.target_sparsity == 0.7
  assert spec.values()['do_not_prune'] == ['logits']
  assert spec.do_not_prune.patterns == ['logits']
  assert spec.to_hparams().values() == spec.values()


def test_validate_hparams_returns_the_spec():
  hp = tf1prune.get_pruning_hparams().parse('target_sparsity=0.9')
  assert validate_hparams(hp) == tf1prune.PruningSpec.from_hparams(hp)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize('text,message', [
    ('target_sparsity=1.0', 'target_sparsity must be in [0, 1), got 1.0'),
    ('initial_sparsity=-0.5', 'initial_sparsity must be in [0, 1), got -0.5'),
    ('sparsity_function_begin_step=100',
     'sparsity_function_end_step must be > sparsity_function_begin_step=100, '
     'got 100'),
    ('sparsity_function_exponent=0',
     'sparsity_function_exponent must be > 0, got 0.0'),
    ('group_importance=avg',
     "group_importance must be 'l1', 'l2' or 'max', got 'avg'"),
    ('global_pruning_groups=[(]',
     "global_pruning_groups entry '(' is not a valid regex: "),
    ('do_not_prune=[conv(]', "do_not_prune entry 'conv(' is not a valid regex: "),
    ('weight_sparsity_map=[conv1:1.0]',
     "weight_sparsity_map entry 'conv1:1.0' has a bad value: sparsity must be "
     "in [0, 1), got 1.0"),
    ('block_dims_map=[fc1:2by2]',
     "block_dims_map entry 'fc1:2by2' has a bad value: block dims must look "
     "like 'HxW', got '2by2'"),
    ('granularity_map=[conv1:kern]',
     "granularity_map entry 'conv1:kern' has a bad value: unknown granularity "
     "'kern'; use element, kernel, filter, input_channel, block<H>x<W> (e.g. "
     "block4x4), <N>of<M> or <N>of<M>_frozen (e.g. 2of4), or coupled_filter"),
    ('granularity_map=[fc:4of4]',
     "granularity_map entry 'fc:4of4' has a bad value: N:M sparsity needs "
     "integers 1 <= n < m, got n=4, m=4"),
])
def test_bad_hparams_are_refused_with_the_exact_message(text, message):
  with pytest.raises(ValueError, match='^' + re.escape(message)):
    _spec(text)


def test_a_string_is_not_a_spec():
  with pytest.raises(ValueError, match=re.escape(
      "spec must be an hparams object from get_pruning_hparams(), got 'a=1'")):
    tf1prune.PruningSpec.from_hparams('a=1')


@pytest.mark.parametrize('text,name,message', [
    ('weight_sparsity_map=[conv:0.8,conv1:0.9]', 'conv1/weights',
     'weight_sparsity_map matches weight conv1/weights more than once: conv, '
     'conv1; make the regexes exclusive'),
    ('global_pruning_groups=[conv,1]', 'conv1/weights',
     'weight conv1/weights matches several global_pruning_groups: conv, 1; '
     'make them exclusive'),
    ('global_pruning_groups=[conv],weight_sparsity_map=[conv1:0.8]',
     'conv1/weights',
     'weight conv1/weights is in global_pruning_groups (conv) and in '
     'weight_sparsity_map; a group has one sparsity, remove it from one of '
     'them'),
    ('granularity_map=[fc1:filter],block_dims_map=[fc1:2x2]', 'fc1/weights',
     'weight fc1/weights is in both granularity_map and block_dims_map; keep '
     'it in one of them'),
    ('granularity_map=[fc1:2of4_frozen]', 'fc1/weights',
     'frozen N:M needs previous_mask, the mask variable'),
])
def test_conflicts_of_one_weight_are_refused_when_it_is_asked_for(text, name,
                                                                   message):
  spec = _spec(text)   # the lists alone are fine
  with pytest.raises(ValueError, match='^' + re.escape(message) + '$'):
    spec.weight(name)


# ---------------------------------------------------------------- per weight


def test_each_weight_gets_its_target_granularity_and_group():
  spec = _spec('target_sparsity=0.6,group_importance=l2,block_height=2,'
               'block_width=4,block_pooling_function=MAX,'
               'weight_sparsity_map=[conv2:0.9],block_dims_map=[fc2:1x8],'
               'granularity_map=[conv1:filter,conv2:kernel,conv3:block2x-1,'
               'fc1:2of4],global_pruning_groups=[conv3|fc1]')
  conv1 = spec.weight('conv1/weights')
  assert conv1 == tf1prune.WeightSpec('conv1/weights', True, None,
                                      conv1.granularity, None)
  assert repr(conv1.granularity) == "Filter('l2')"
  conv2 = spec.weight('conv2/weights')
  assert conv2.target_sparsity == 0.9 and conv2.group is None
  assert repr(conv2.granularity) == "Kernel('l2')"
  conv3 = spec.weight('conv3/weights')
  assert isinstance(conv3.granularity, ChannelBlock)
  assert conv3.granularity.dims == [2, -1] and conv3.group == 'conv3|fc1'
  fc1 = spec.weight('fc1/weights')
  assert repr(fc1.granularity) == 'NM(2, 4, frozen=False)'
  assert fc1.group == 'conv3|fc1' and fc1.target_sparsity is None
  for name, block in (('fc2/weights', (1, 8)), ('logits/weights', (2, 4))):
    granularity = spec.weight(name).granularity
    assert type(granularity) is Block, name
    assert (granularity.block, granularity.pooling) == (block, 'MAX'), name


def test_block_1x1_is_element_granularity():
  assert type(_spec('').weight('w').granularity) is Element
  assert type(_spec('block_dims_map=[w:1x1],block_height=2').weight(
      'w').granularity) is Element
  assert type(_spec('granularity_map=[w:element]').weight(
      'w').granularity) is Element


def test_do_not_prune_matches_the_weight_or_its_mask():
  with tf.variable_scope('logits'):
    mask = tf.get_variable('mask', [2, 2])
  spec = _spec('do_not_prune=[logits/mask,embed],weight_sparsity_map=[e:0.2]')
  assert spec.weight('logits/weights', mask) == tf1prune.WeightSpec(
      'logits/weights', False, None, None, None)
  assert spec.weight('logits/weights').pruned
  assert not spec.weight('embed/table').pruned
  assert not spec.is_pruned('fc/weights', 'logits/mask')
  assert spec.is_pruned('fc/weights', 'fc/mask')


def test_frozen_nm_reads_the_mask_it_is_given():
  mask = tf.get_variable('fc1/mask', [8, 2])
  granularity = _spec('granularity_map=[fc1:2of4_frozen]').weight(
      'fc1/weights', mask).granularity
  assert isinstance(granularity, NM) and granularity.previous_mask is mask
  assert (granularity.n, granularity.m) == (2, 4)


def test_unmatched_entries_are_listed_per_hparam():
  spec = _spec('weight_sparsity_map=[conv1:0.8,conv9:0.7],'
               'block_dims_map=[fc:2x2],granularity_map=[x:kernel],'
               'do_not_prune=[conv1/mask,logits]')
  assert spec.unmatched(['conv1/weights', 'fc/weights'],
                        ['conv1/mask', 'fc/mask']) == [
                            ('weight_sparsity_map', ['conv9']),
                            ('granularity_map', ['x']),
                            ('do_not_prune', ['logits'])]


def test_granularity_values_name_the_mask_classes():
  spec = _spec('group_importance=max,granularity_map=[a:input_channel,'
               'b:block1x1x2x2,c:kernel]')
  assert repr(spec.granularity('a/w')) == "InputChannel('max')"
  assert repr(spec.granularity('b/w')) == "ChannelBlock([1, 1, 2, 2], 'max')"
  assert type(spec.granularity('c/w')) is Kernel
  assert type(_spec('granularity_map=[f:filter]').granularity('f')) is Filter


# ---------------------------------------------------------------- schedule


@pytest.mark.parametrize('kwargs,message', [
    (dict(initial_sparsity=1.5), 'initial_sparsity must be in [0, 1), got 1.5'),
    (dict(target_sparsity=1.0), 'target_sparsity must be in [0, 1), got 1.0'),
    (dict(target_sparsity='0.9'),
     "target_sparsity must be in [0, 1), got '0.9'"),
    (dict(begin_step=1.5), 'begin_step must be an int, got 1.5'),
    (dict(begin_step=10, end_step=10), 'end_step must be > begin_step=10, got 10'),
    (dict(exponent=0), 'exponent must be > 0, got 0'),
    (dict(exponent=float('inf')), 'exponent must be finite, got inf'),
    (dict(exponent=None), 'exponent must be a number, got None'),
])
def test_schedule_validates_its_arguments(kwargs, message):
  with pytest.raises(ValueError, match='^' + re.escape(message) + '$'):
    tf1prune.PolynomialDecaySparsity(**kwargs)


def test_schedule_in_the_graph_equals_the_numpy_formula():
  schedule = tf1prune.PolynomialDecaySparsity(0.2, 0.75, 10, 200, 3.0)
  step = tf.placeholder(tf.int64, [])
  sparsity = schedule(step)
  assert sparsity.dtype == tf.float32
  with tf.Session() as sess:
    for t in (-5, 0, 10, 37, 105, 199, 200, 5000):
      expected = np_reference.schedule(t, 0.2, 0.75, 10, 200, 3.0)
      assert sess.run(sparsity, {step: t}) == pytest.approx(expected, abs=1e-6)
      assert schedule.sparsity_at(t) == pytest.approx(expected, rel=1e-12)
  other = schedule.with_target(0.5)
  assert other == tf1prune.PolynomialDecaySparsity(0.2, 0.5, 10, 200, 3.0)
  assert other.sparsity_at(200) == 0.5


# ---------------------------------------------------------------- Pruning


def _layers(sizes, seed=0):
  """One masked weight per (scope, n): distinct magnitudes 1..n, shuffled."""
  rs = np.random.RandomState(seed)
  values = {}
  for scope, n in sizes:
    value = (rs.permutation(np.arange(1.0, n + 1.0)) *
             rs.choice([-1.0, 1.0], n)).astype(np.float32)
    with tf.variable_scope(scope):
      tf1prune.apply_mask(tf.get_variable('weights', initializer=value))
    values[scope] = value
  return values


class _Steps(object):
  """A user schedule: 0 before step 10, 0.4 before step 20, then 0.8."""

  def __call__(self, step):
    return tf.where(step < 10, 0.0, tf.where(step < 20, 0.4, 0.8))


def _masks(sess):
  return {r.name.split('/')[0]: sess.run(r.mask)
          for r in tf1prune.masked_weight_records()}


def test_a_user_schedule_drives_the_masks():
  step = tf.train.get_or_create_global_step()
  values = _layers([('conv1', 100), ('fc1', 50)])
  hp = tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.8,weight_sparsity_map=[fc1:0.4]')
  schedule = _Steps()
  p = tf1prune.Pruning(hp, schedule=schedule)
  assert p.schedule is schedule
  update = p.mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for t, s in ((5, 0.0), (15, 0.4), (25, 0.8)):
      sess.run(tf.assign(step, t))
      sess.run(update)
      assert sess.run(p.sparsity) == np.float32(s)
      got = _masks(sess)
      np.testing.assert_array_equal(got['conv1'], np_reference.magnitude_mask(
          np.abs(values['conv1']), s))
      # No with_target: fc1 gets the schedule scaled by 0.4 / 0.8.
      np.testing.assert_array_equal(got['fc1'], np_reference.magnitude_mask(
          np.abs(values['fc1']), np.float32(s) * np.float32(0.5)))


def test_a_lambda_schedule_and_a_polynomial_one_with_per_weight_targets():
  step = tf.train.get_or_create_global_step()
  values = _layers([('conv1', 40), ('fc1', 60)], seed=3)
  hp = tf1prune.get_pruning_hparams().parse('weight_sparsity_map=[fc1:0.3]')
  schedule = tf1prune.PolynomialDecaySparsity(0.1, 0.9, 0, 50, 1.0)
  polynomial = tf1prune.Pruning(hp, schedule=schedule).mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 20))
    sess.run(polynomial)
    got = _masks(sess)
  for name, target in (('conv1', 0.9), ('fc1', 0.3)):
    s = np_reference.schedule(20, 0.1, target, 0, 50, 1.0)
    np.testing.assert_array_equal(got[name], np_reference.magnitude_mask(
        np.abs(values[name]), s), err_msg=name)


def test_a_constant_lambda_schedule():
  tf.train.get_or_create_global_step()
  values = _layers([('conv1', 30)], seed=5)
  p = tf1prune.Pruning(schedule=lambda step: tf.constant(0.7, tf.float64))
  update = p.mask_update_op()
  assert p.sparsity.dtype == tf.float32
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    np.testing.assert_array_equal(_masks(sess)['conv1'],
                                  np_reference.magnitude_mask(
                                      np.abs(values['conv1']), 0.7))


def test_a_pruning_spec_is_accepted_in_place_of_hparams():
  step = tf.train.get_or_create_global_step()
  values = _layers([('conv1', 20)], seed=7)
  spec = _spec('target_sparsity=0.75,sparsity_function_end_step=1,name=p')
  p = tf1prune.Pruning(spec)
  assert p.pruning_spec is spec
  assert p.spec.values() == spec.values()
  assert p.last_update_step.op.name == 'p/last_mask_update_step'
  update = p.mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 1))
    sess.run(update)
    np.testing.assert_array_equal(_masks(sess)['conv1'],
                                  np_reference.magnitude_mask(
                                      np.abs(values['conv1']), 0.75))


def test_bad_schedules_are_refused_while_the_graph_is_built():
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError, match=re.escape(
      'schedule must be a callable step -> sparsity tensor, e.g. '
      'tf1prune.PolynomialDecaySparsity(0.0, 0.9), got 0.5')):
    tf1prune.Pruning(schedule=0.5)
  with pytest.raises(ValueError, match=re.escape(
      'Pruning takes sparsity= (a tensor) or schedule= (a callable), not '
      'both')):
    tf1prune.Pruning(sparsity=tf.constant(0.5), schedule=_Steps())
  with pytest.raises(ValueError, match=re.escape(
      'schedule(step) must return a scalar sparsity; ')):
    tf1prune.Pruning(schedule=lambda step: tf.zeros([3]))


def test_the_schedule_property_names_what_drives_the_sparsity():
  tf.train.get_or_create_global_step()
  default = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.9'))
  assert default.schedule == tf1prune.PolynomialDecaySparsity(0.0, 0.9)
  assert tf1prune.Pruning(sparsity=tf.constant(0.5), spec=_spec(
      'name=other')).schedule is None
