"""A small, deterministic pruning run, in a process of its own.

    python tests/support/train_worker.py --logdir=/tmp/run --last_step=60 \
        --save_steps=10 --kill_at=30 --dump=/tmp/run/final.npz

A two-layer masked network trains on fixed data (no random op; constant
initializers; one thread), under a `MonitoredTrainingSession` that restores
from and saves checkpoints to `--logdir` every `--save_steps` steps, with
`tf1prune.PruningHook` (and `tf1prune.LockHook` when locks exist). The batch of
a step is chosen by the global step, so a run resumed from a checkpoint sees
the data an uninterrupted run sees.

`--kill_at=N` makes the process SIGKILL itself right after the checkpoint of
step N is written, before the rest of that step's hooks run: the worst moment,
between the checkpoint and the mask update of a pruning step. `--dump` writes
every global variable at the end (`end` of the last hook), `--dump_start` every
global variable right after the session is created or restored.
tests/training/test_resume.py kills and resumes it.
"""

import argparse
import os
import signal
import sys
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune

HPARAMS = ('begin_pruning_step=10,end_pruning_step=50,pruning_frequency=5,'
           'sparsity_function_begin_step=10,sparsity_function_end_step=50,'
           'initial_sparsity=0.1,target_sparsity=0.8,threshold_decay=0.5')


def _values(session):
  variables = tf.global_variables()
  return dict(zip([v.op.name for v in variables], session.run(variables)))


class _DumpHook(tf.train.SessionRunHook):
  """Saves every global variable at session creation and/or at the end."""

  def __init__(self, start_path, end_path):
    self._start, self._end = start_path, end_path

  def after_create_session(self, session, coord):
    if self._start:
      np.savez(self._start, **_values(session))

  def end(self, session):
    if self._end:
      np.savez(self._end, **_values(session))


class _KillAfterCheckpointHook(tf.train.SessionRunHook):
  """SIGKILLs this process once the checkpoint of step `step` exists."""

  def __init__(self, logdir, step, sleep):
    self._logdir, self._step, self._sleep = logdir, step, sleep

  def after_run(self, run_context, run_values):
    if self._sleep:
      time.sleep(self._sleep)
    if not self._step:
      return
    step = run_context.session.run(tf.train.get_global_step())
    latest = tf.train.latest_checkpoint(self._logdir)
    if step == self._step and latest and latest.endswith('-%d' % step):
      sys.stdout.flush()
      os.kill(os.getpid(), signal.SIGKILL)


def build_model():
  """Returns the train op of a masked 20-32-10 network on fixed data."""
  rs = np.random.RandomState(0)
  data = rs.randn(8, 16, 20).astype(np.float32)       # 8 batches of 16
  labels = rs.randint(0, 10, [8, 16]).astype(np.int32)
  step = tf.train.get_or_create_global_step()
  batch = tf.mod(step, 8)
  x = tf.gather(tf.constant(data), batch)
  y = tf.gather(tf.constant(labels), batch)
  net = x
  for name, shape in (('fc1', [20, 32]), ('fc2', [32, 10])):
    with tf.variable_scope(name):
      w = tf.get_variable('weights', initializer=tf.constant(
          rs.randn(*shape).astype(np.float32) * 0.3))
      b = tf.get_variable('biases', initializer=tf.zeros([shape[1]]))
      kernel = tf1prune.apply_mask(w)
      if name == 'fc1' and hasattr(tf1prune, 'lock'):
        kernel = tf1prune.lock(kernel, np.s_[0:2, 0:3], value='current')
      net = tf.matmul(net, kernel) + b
      if name == 'fc1':
        net = tf.nn.relu(net)
  loss = tf.losses.sparse_softmax_cross_entropy(y, net)
  optimizer = tf.train.MomentumOptimizer(0.1, 0.9)
  return optimizer.minimize(loss, global_step=step)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--logdir', required=True)
  parser.add_argument('--last_step', type=int, default=60)
  parser.add_argument('--save_steps', type=int, default=10)
  parser.add_argument('--kill_at', type=int, default=0)
  parser.add_argument('--step_sleep', type=float, default=0.0)
  parser.add_argument('--dump', default='')
  parser.add_argument('--dump_start', default='')
  args = parser.parse_args(argv)

  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  train_op = build_model()
  pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(HPARAMS))
  hooks = [_DumpHook(args.dump_start, None)]
  if hasattr(tf1prune, 'LockHook'):
    hooks.append(tf1prune.LockHook())
  hooks += [_KillAfterCheckpointHook(args.logdir, args.kill_at,
                                     args.step_sleep),
            tf1prune.PruningHook(pruning),
            tf.train.StopAtStepHook(last_step=args.last_step),
            _DumpHook(None, args.dump)]
  config = tf.ConfigProto(intra_op_parallelism_threads=1,
                          inter_op_parallelism_threads=1)
  scaffold = tf.train.Scaffold(saver=tf.train.Saver(max_to_keep=100))
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=args.logdir, scaffold=scaffold, hooks=hooks,
      save_checkpoint_steps=args.save_steps, save_checkpoint_secs=None,
      save_summaries_steps=None, save_summaries_secs=None,
      log_step_count_steps=None, config=config) as sess:
    while not sess.should_stop():
      sess.run(train_op)
  return 0


if __name__ == '__main__':
  sys.exit(main())
