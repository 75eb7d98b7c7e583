"""contrib's `Pruning._spec`: the hparams it reads, and what setting them on it
does (tf1prune.training.contrib_spec)."""

import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune


CONTRIB_HPARAMS = ('name=test,threshold_decay=0.9,pruning_frequency=10,'
                   'do_not_prune=[conv1,conv2],target_sparsity=0.9')


def test_contrib_reads_hparams_from_spec():
  # contrib's PruningHParamsTest.testInit, as it is.
  tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(CONTRIB_HPARAMS))
  assert p._spec.name == 'test'
  assert p._spec.threshold_decay == pytest.approx(0.9)
  assert p._spec.pruning_frequency == 10
  assert p._spec.do_not_prune == ['conv1', 'conv2']
  assert p._spec.sparsity_function_end_step == 100
  assert p._spec.target_sparsity == pytest.approx(0.9)
  for name, value in tf1prune.get_pruning_hparams().parse(
      CONTRIB_HPARAMS).values().items():
    assert getattr(p._spec, name) == value, name


def _linspace_weights():
  weights = tf.Variable(tf.linspace(1.0, 100.0, 100), name='weights')
  return tf1prune.apply_mask(weights)


def test_contrib_sets_threshold_decay_before_the_update_op():
  # contrib's PruningTest.testUpdateSingleMask, as it is: the decay set on
  # _spec is the one the update op uses (0.9 would keep 96, not 50).
  tf.train.get_or_create_global_step()
  masked_weights = _linspace_weights()
  sparsity = tf.Variable(0.5, name='sparsity')
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'threshold_decay=0.9'), sparsity=sparsity)
  p._spec.threshold_decay = 0.0
  mask_update_op = p.mask_update_op()
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    assert np.count_nonzero(session.run(masked_weights)) == 100
    session.run(mask_update_op)
    assert np.count_nonzero(session.run(masked_weights)) == 50
  assert p._spec.threshold_decay == 0.0
  assert p.pruning_spec.threshold_decay == 0.0
  assert p.spec.threshold_decay == 0.0      # the hparams object, as contrib


def test_without_the_set_the_decay_of_the_hparams_is_used():
  tf.train.get_or_create_global_step()
  masked_weights = _linspace_weights()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'threshold_decay=0.9'), sparsity=tf.constant(0.5))
  update = p.mask_update_op()
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    session.run(update)
    # threshold 0.9 * 0 + 0.1 * 51 = 5.1: weights 6..100 stay.
    assert np.count_nonzero(session.run(masked_weights)) == 95


def test_a_schedule_hparam_set_on_spec_rebuilds_the_sparsity():
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams())
  p._spec.target_sparsity = 0.8
  p._spec.sparsity_function_end_step = 10
  p._spec.set_hparam('name', 'renamed')
  assert p.last_update_step.op.name == 'renamed/last_mask_update_step'
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    session.run(tf.assign(step, 10))
    assert session.run(p.sparsity) == pytest.approx(0.8)
    assert session.run(p._sparsity) == pytest.approx(0.8)


@pytest.mark.parametrize('name,value,message', [
    ('threshold_decay', 1.5, 'threshold_decay must be in [0, 1), got 1.5'),
    ('pruning_frequency', 0.5,
     'pruning_frequency must be an int, got 0.5 (float)'),
    ('sparsity_function_end_step', -5,
     'sparsity_function_end_step must be > sparsity_function_begin_step=0, '
     'got -5'),
])
def test_a_set_on_spec_is_checked_like_a_parse(name, value, message):
  tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams())
  with pytest.raises(ValueError, match='^' + re.escape(message) + '$'):
    setattr(p._spec, name, value)
  assert getattr(p._spec, name) == getattr(tf1prune.get_pruning_hparams(),
                                           name)


def test_an_unknown_name_set_on_spec_is_refused():
  tf.train.get_or_create_global_step()
  p = tf1prune.Pruning()
  with pytest.raises(ValueError, match=r'^unknown hparam threshold_dacay \(set '
                     r'on Pruning._spec to 0.0\); the hparams are those of '
                     r'get_pruning_hparams\(\): begin_pruning_step, '):
    p._spec.threshold_dacay = 0.0


@pytest.mark.parametrize('build', ['mask_update_op',
                                   'conditional_mask_update_op'])
def test_a_set_on_spec_after_the_ops_are_built_is_an_error(build):
  tf.train.get_or_create_global_step()
  _linspace_weights()
  p = tf1prune.Pruning()
  getattr(p, build)()
  with pytest.raises(ValueError) as e:
    p._spec.threshold_decay = 0.5
  assert str(e.value) == (
      'Pruning._spec.threshold_decay = 0.5 comes too late: the mask update ops '
      'are built already and use threshold_decay=0.0; set hparams before '
      'calling mask_update_op() or conditional_mask_update_op(), or make a new '
      'Pruning')
  assert p._spec.threshold_decay == 0.0
