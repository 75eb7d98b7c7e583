"""PruningHook in a real MonitoredTrainingSession, and tf1prune.train (slim)."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import np_reference

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


class _CountingSession(tf.Session):
  """A tf.Session that records the fetches of every `run`."""

  def __init__(self, *args, **kwargs):
    super(_CountingSession, self).__init__(*args, **kwargs)
    self.fetches = []

  def run(self, fetches, *args, **kwargs):
    self.fetches.append(fetches)
    return super(_CountingSession, self).run(fetches, *args, **kwargs)


class _CountingCreator(tf.train.SessionCreator):
  """Creates an initialized `_CountingSession` (what the hooks are given)."""

  def __init__(self):
    self.session = None

  def create_session(self):
    self.session = _CountingSession()
    self.session.run(tf.global_variables_initializer())
    self.session.fetches = []
    return self.session


def _hook_runs(steps, hparams):
  """Trains `steps` steps; returns (extra runs after each step, recorder)."""
  train_op, _ = _tiny_model()
  p = _pruning(hparams)
  recorder = _Recorder([tf.train.get_global_step(), p.last_update_step])
  creator = _CountingCreator()
  with tf.train.MonitoredSession(session_creator=creator,
                                 hooks=[tf1prune.PruningHook(p), recorder]) as sess:
    runs_at_start = len(creator.session.fetches)
    extra = []
    for _ in range(steps):
      before = len(creator.session.fetches)
      sess.run(train_op)
      # One run of the step itself, one of the recorder; the rest the hook's.
      extra.append(len(creator.session.fetches) - before - 2)
  return runs_at_start, extra, recorder.history


def test_hook_adds_no_run_on_steps_where_no_update_is_due():
  start, extra, history = _hook_runs(30, (
      'target_sparsity=0.8,sparsity_function_end_step=30,pruning_frequency=5,'
      'begin_pruning_step=3,end_pruning_step=22'))
  assert start == 1  # the conditional update once, at session creation
  lasts = [int(last) for _, last in history]
  # Due at 5, 10, 15, 20 (step 3..22, every 5 from last_mask_update_step 0).
  assert lasts == [0] * 4 + [5] * 5 + [10] * 5 + [15] * 5 + [20] * 11
  updates = [i for i in range(30) if lasts[i] != (lasts[i - 1] if i else 0)]
  for i in updates:
    assert extra[i] == 1, (i, extra)
  # A step read after its increment may cost one extra run just before a
  # due step; every other step costs none.
  idle = [n for i, n in enumerate(extra) if i not in updates and
          i + 1 not in updates]
  assert idle == [0] * len(idle)
  assert sum(extra) <= 2 * len(updates)


def test_hook_given_an_op_runs_it_after_every_step():
  train_op, _ = _tiny_model()
  p = _pruning('target_sparsity=0.5,sparsity_function_end_step=1')
  creator = _CountingCreator()
  with tf.train.MonitoredSession(
      session_creator=creator,
      hooks=[tf1prune.PruningHook(p.mask_update_op())]) as sess:
    for _ in range(4):
      sess.run(train_op)
  assert len(creator.session.fetches) == 8


def _momentum_model(ema):
  step = tf.train.get_or_create_global_step()
  rs = np.random.RandomState(1)
  x = tf.constant(rs.randn(32, IN).astype(np.float32))
  y = tf.constant(rs.randn(32, OUT).astype(np.float32))
  net = tf1prune.masked_fully_connected(x, OUT, activation_fn=None, scope='fc')
  loss = tf.reduce_mean(tf.square(net - y))
  train_op = tf.train.MomentumOptimizer(0.05, 0.9).minimize(
      loss, global_step=step)
  if ema:
    averages = tf.train.ExponentialMovingAverage(0.9, step)
    with tf.control_dependencies([train_op]):
      train_op = averages.apply(tf.trainable_variables())
  return train_op


@pytest.mark.parametrize('ema', [False, True])
def test_bake_masks_writes_checkpoints_whose_raw_weights_are_pruned(tmp_path,
                                                                   ema):
  train_op = _momentum_model(ema)
  p = _pruning('target_sparsity=0.75,sparsity_function_end_step=6,'
               'pruning_frequency=2')
  hook = tf1prune.PruningHook(p, bake_masks=True)
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), chief_only_hooks=[hook],
      hooks=[tf.train.StopAtStepHook(last_step=9)], save_summaries_steps=None,
      save_checkpoint_secs=None, save_checkpoint_steps=3,
      log_step_count_steps=None) as sess:
    while not sess.should_stop():
      sess.run(train_op)
  for prefix in tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths:
    reader = tf.train.load_checkpoint(prefix)
    mask = reader.get_tensor('fc/mask')
    names = ['fc/weights'] + (['fc/weights/ExponentialMovingAverage']
                              if ema else [])
    for name in names:
      raw = reader.get_tensor(name)
      np.testing.assert_array_equal(raw, raw * mask, err_msg=prefix + name)
      assert (raw[mask == 1] != 0).all()
  final = tf.train.load_variable(str(tmp_path), 'fc/mask')
  assert final.sum() == _target_kept(0.75)


def test_without_bake_masks_raw_weights_stay_dense(tmp_path):
  train_op = _momentum_model(False)
  p = _pruning('target_sparsity=0.75,sparsity_function_end_step=6,'
               'pruning_frequency=2')
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), chief_only_hooks=[tf1prune.PruningHook(p)],
      hooks=[tf.train.StopAtStepHook(last_step=9)], save_summaries_steps=None,
      save_checkpoint_secs=None, save_checkpoint_steps=3,
      log_step_count_steps=None) as sess:
    while not sess.should_stop():
      sess.run(train_op)
  mask = tf.train.load_variable(str(tmp_path), 'fc/mask')
  raw = tf.train.load_variable(str(tmp_path), 'fc/weights')
  assert mask.sum() == _target_kept(0.75)
  assert (raw[mask == 0] != 0).all()


class _Initial(tf.train.SessionRunHook):
  """Reads `tensor` once the session is created, before the hooks after it."""

  def __init__(self, tensor):
    self._tensor = tensor
    self.value = None

  def after_create_session(self, session, coord):
    self.value = session.run(self._tensor)


@pytest.mark.parametrize('compose', ['lock_outside', 'lock_inside'])
@pytest.mark.parametrize('bake', [False, True])
def test_chief_only_hook_before_lock_hook_keeps_the_initial_locked_values(
    compose, bake):
  # chief_only_hooks run before hooks=: the PruningHook's first update and
  # bake run before LockHook's capture, and must neither fail there
  # (apply_mask(lock(w)): 'never captured') nor make the lock pin the baked
  # zeros (lock(apply_mask(w)) with bake_masks).
  step = tf.train.get_or_create_global_step()
  rs = np.random.RandomState(2)
  images = tf.constant(rs.randn(4, 6, 6, 8).astype(np.float32))
  w = tf.get_variable('conv/weights', [3, 3, 8, 16])
  with tf.variable_scope('conv'):
    if compose == 'lock_outside':
      kernel = tf1prune.lock(tf1prune.apply_mask(w), np.s_[:, :, 3, 5])
    else:
      kernel = tf1prune.apply_mask(tf1prune.lock(w, np.s_[:, :, 3, 5]))
  out = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], 'SAME')
  train_op = tf.train.MomentumOptimizer(0.1, 0.9).minimize(
      tf.reduce_mean(tf.square(out - 1.0)), global_step=step)
  p = _pruning('target_sparsity=0.5,sparsity_function_end_step=4,'
               'pruning_frequency=1')
  initial = _Initial(w)
  with tf.train.MonitoredTrainingSession(
      chief_only_hooks=[initial, tf1prune.PruningHook(p, bake_masks=bake)],
      hooks=[tf1prune.LockHook()], save_summaries_steps=None,
      log_step_count_steps=None) as sess:
    for _ in range(6):
      sess.run(train_op)
    locked, raw = sess.run([kernel, w])
  expected = initial.value[:, :, 3, 5]
  assert np.all(expected != 0)
  np.testing.assert_array_equal(locked[:, :, 3, 5].view(np.uint32),
                                expected.view(np.uint32))
  if bake:
    np.testing.assert_array_equal(raw[:, :, 3, 5].view(np.uint32),
                                  expected.view(np.uint32))
