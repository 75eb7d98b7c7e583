"""PruningHook in a real MonitoredTrainingSession, and tf1prune.train (slim)."""

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
import np_reference

IN, OUT = 8, 5


def _tiny_model():
  """A masked linear regression; returns (train_op, loss)."""
  step = tf.train.get_or_create_global_step()
  rs = np.random.RandomState(0)
  x = tf.constant(rs.randn(32, IN).astype(np.float32))
  y = tf.constant(rs.randn(32, OUT).astype(np.float32))
  net = tf1prune.masked_fully_connected(x, OUT, activation_fn=None, scope='fc')
  loss = tf.reduce_mean(tf.square(net - y))
  train_op = tf.train.GradientDescentOptimizer(0.05).minimize(
      loss, global_step=step)
  return train_op, loss


def _pruning(text='target_sparsity=0.8,sparsity_function_end_step=10,'
                  'pruning_frequency=2'):
  return tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(text))


def _target_kept(sparsity):
  return np_reference.keep_count(IN * OUT, np.float32(sparsity))


class _Recorder(tf.train.SessionRunHook):
  """Reads `tensors` after every run, after the hooks listed before it."""

  def __init__(self, tensors):
    self._tensors = tensors
    self.history = []

  def after_run(self, run_context, run_values):
    self.history.append(run_context.session.run(self._tensors))


def test_hook_in_monitored_training_session_reaches_the_target(tmp_path):
  train_op, _ = _tiny_model()
  p = _pruning()
  mask, = tf1prune.get_masks()
  weights = tf1prune.get_weights()[0]
  recorder = _Recorder([tf.train.get_global_step(), p.last_update_step, mask,
                        weights])
  hooks = [tf1prune.PruningHook(p), recorder,
           tf.train.StopAtStepHook(last_step=15)]
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), hooks=hooks, save_summaries_steps=None,
      save_checkpoint_secs=None, save_checkpoint_steps=100,
      log_step_count_steps=None) as sess:
    while not sess.should_stop():
      sess.run(train_op)
  steps = [int(h[0]) for h in recorder.history]
  assert steps == list(range(1, 16))
  # Updates on the steps 2, 4, ... (frequency 2, from last_mask_update_step 0).
  assert [int(h[1]) for h in recorder.history] == [
      0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14]
  for step, last, m, _ in recorder.history:
    sparsity = np_reference.schedule(last, 0.0, 0.8, 0, 10, 3.0)
    assert m.sum() == _target_kept(sparsity), step
  final_mask = recorder.history[-1][2]
  assert final_mask.sum() == _target_kept(0.8)
  # The last update (step 14) kept the largest weights of step 14.
  step, last, mask_14, weights_14 = recorder.history[13]
  assert step == last == 14
  np.testing.assert_array_equal(mask_14, final_mask)
  np.testing.assert_array_equal(
      final_mask, np_reference.magnitude_mask(np.abs(weights_14), 0.8))
  # The checkpoint saved at the end holds the pruned mask.
  saved = tf.train.load_variable(str(tmp_path), 'fc/mask')
  np.testing.assert_array_equal(saved, final_mask)


def test_hook_runs_a_given_op_after_every_run():
  train_op, _ = _tiny_model()
  p = _pruning('target_sparsity=0.5,sparsity_function_end_step=1')
  recorder = _Recorder([p.last_update_step,
                        tf.reduce_sum(tf1prune.get_masks()[0])])
  hooks = [tf1prune.PruningHook(p.mask_update_op()), recorder]
  with tf.train.MonitoredSession(hooks=hooks) as sess:
    for _ in range(3):
      sess.run(train_op)
  assert [int(last) for last, _ in recorder.history] == [1, 2, 3]
  assert [int(kept) for _, kept in recorder.history] == [_target_kept(0.5)] * 3


def test_train_runs_slim_learning_and_updates_masks(tmp_path):
  import tf_slim as slim
  _, loss = _tiny_model()
  train_op = slim.learning.create_train_op(
      loss, tf.train.GradientDescentOptimizer(0.05))
  p = _pruning()
  update = p.conditional_mask_update_op()
  final_loss = tf1prune.train(train_op, str(tmp_path), update,
                              number_of_steps=12, save_summaries_secs=10 ** 6,
                              save_interval_secs=10 ** 6)
  assert np.isfinite(final_loss)
  assert tf.train.load_variable(str(tmp_path), 'global_step') == 12
  last = tf.train.load_variable(str(tmp_path),
                                'model_pruning/last_mask_update_step')
  assert last == 12
  saved_mask = tf.train.load_variable(str(tmp_path), 'fc/mask')
  saved_weights = tf.train.load_variable(str(tmp_path), 'fc/weights')
  assert saved_mask.sum() == _target_kept(0.8)
  np.testing.assert_array_equal(
      saved_mask, np_reference.magnitude_mask(np.abs(saved_weights), 0.8))
