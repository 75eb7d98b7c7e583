"""One task of a between-graph replicated pruning run (a process).

    python tests/support/dist_worker.py \
        --cluster='{"ps": [...], "worker": [...]}' \
        --job=ps --task=-1                     # all ps tasks, until killed
    python tests/support/dist_worker.py --cluster=... --job=worker --task=0 \
        --logdir=/tmp/run --report=/tmp/run/worker0.json

tests/training/test_distributed.py starts a cluster of them.

Each worker builds the same graph under `tf.train.replica_device_setter`: a
masked 20-32-10 network whose first weight is partitioned over two parameter
servers (`tf.fixed_size_partitioner(2)`). Worker 0 is the chief: it alone runs
`tf1prune.PruningHook` (in `chief_only_hooks`) and saves checkpoints. The
workers wait for each other (files in `--logdir`) so that they really train at
the same time; the non-chief stops at step `--last_step - 20`, so the chief
runs the last steps, and the last mask updates, by itself.

The report (JSON) holds the devices of every variable, the
`last_mask_update_step` values the worker saw, and its final global step.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune

HPARAMS = ('pruning_frequency=5,sparsity_function_end_step=20,'
           'target_sparsity=0.75')
WAIT_SECS = 120
_START = time.time()


def _log(message):
  """Progress with seconds since start, in the task's log (for timeouts)."""
  sys.stderr.write('[%.2f] %s\n' % (time.time(), message))
  sys.stderr.flush()


def _wait_for(path):
  deadline = time.time() + WAIT_SECS
  while not os.path.exists(path):
    if time.time() > deadline:
      raise RuntimeError('timed out waiting for %s' % path)
    time.sleep(0.05)


def _touch(path):
  with open(path, 'w') as f:
    f.write('ready\n')


def build_model(partitions):
  """Returns (train_op, outputs) of a masked network on fixed data."""
  rs = np.random.RandomState(0)
  data = rs.randn(8, 16, 20).astype(np.float32)
  labels = rs.randint(0, 10, [8, 16]).astype(np.int32)
  step = tf.train.get_or_create_global_step()
  # A random batch (asynchronous training is not deterministic anyway); the
  # inference path then holds no variable but the weights and masks.
  batch = tf.random.uniform([], 0, 8, dtype=tf.int32)
  x = tf.placeholder_with_default(tf.gather(tf.constant(data), batch),
                                  [None, 20], name='input')
  y = tf.gather(tf.constant(labels), batch)
  net = x
  for name, shape in (('fc1', [20, 32]), ('fc2', [32, 10])):
    with tf.variable_scope(name):
      partitioner = (tf.fixed_size_partitioner(partitions)
                     if name == 'fc1' and partitions > 1 else None)
      w = tf.get_variable('weights', initializer=tf.constant(
          rs.randn(*shape).astype(np.float32) * 0.3), partitioner=partitioner)
      b = tf.get_variable('biases', initializer=tf.zeros([shape[1]]))
      net = tf.matmul(net, tf1prune.apply_mask(w)) + b
      if name == 'fc1':
        net = tf.nn.relu(net)
  logits = tf.identity(net, name='logits')
  loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
  train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=step)
  return train_op


class _ReportHook(tf.train.SessionRunHook):
  """Records the `last_mask_update_step` values this worker sees."""

  def __init__(self, pruning, sleep, ready, peer_ready):
    self._pruning, self._sleep = pruning, sleep
    self._ready, self._peer_ready = ready, peer_ready
    self.seen, self.final_step = [], None

  def after_create_session(self, session, coord):
    _touch(self._ready)
    if self._peer_ready:
      _wait_for(self._peer_ready)

  def after_run(self, run_context, run_values):
    step, last = run_context.session.run(
        [tf.train.get_global_step(), self._pruning.last_update_step])
    if not self.seen or self.seen[-1] != int(last):
      self.seen.append(int(last))
    self.final_step = int(step)
    time.sleep(self._sleep)


def run_worker(args, cluster):
  task = args.task
  is_chief = task == 0
  server = tf.train.Server(cluster, job_name='worker', task_index=task,
                           config=_config(task))
  _log('worker %d: server started' % task)
  with tf.device(tf.train.replica_device_setter(
      worker_device='/job:worker/task:%d' % task, cluster=cluster)):
    train_op = build_model(args.partitions)
    pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(HPARAMS))
  chief_ready = os.path.join(args.logdir, 'chief_ready')
  other_ready = os.path.join(args.logdir, 'worker1_ready')
  if not is_chief:
    _wait_for(chief_ready)  # the chief initializes the variables first
  _log('graph built; creating the session')
  report = _ReportHook(pruning, args.step_sleep,
                       chief_ready if is_chief else other_ready,
                       other_ready if is_chief else None)
  last_step = args.last_step if is_chief else args.last_step - 20
  with tf.train.MonitoredTrainingSession(
      master=server.target, is_chief=is_chief,
      checkpoint_dir=args.logdir if is_chief else None,
      hooks=[tf.train.StopAtStepHook(last_step=last_step), report],
      chief_only_hooks=[tf1prune.PruningHook(pruning)],
      save_checkpoint_steps=20, save_checkpoint_secs=None,
      save_summaries_steps=None, save_summaries_secs=None,
      log_step_count_steps=None, config=_config(task)) as sess:
    _log('session ready')
    while not sess.should_stop():
      sess.run(train_op)
  _log('training done at step %s' % report.final_step)
  devices = {v.op.name: v.device for v in tf.global_variables()}
  with open(args.report, 'w') as f:
    json.dump({'devices': devices, 'seen': report.seen,
               'final_step': report.final_step}, f)


def _config(task):
  # A worker talks to the parameter servers and to itself only: it never
  # waits for the other worker.
  return tf.ConfigProto(device_filters=['/job:ps', '/job:worker/task:%d' % task],
                        intra_op_parallelism_threads=1,
                        inter_op_parallelism_threads=2)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--cluster', required=True, help='ClusterSpec as JSON')
  parser.add_argument('--job', choices=['ps', 'worker'], required=True)
  parser.add_argument('--task', type=int, default=0)
  parser.add_argument('--logdir', default='')
  parser.add_argument('--report', default='')
  parser.add_argument('--last_step', type=int, default=60)
  parser.add_argument('--partitions', type=int, default=2)
  parser.add_argument('--step_sleep', type=float, default=0.01)
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  cluster = tf.train.ClusterSpec(json.loads(args.cluster))
  if args.job == 'ps':
    # --task=-1: every ps task in this one process (one TF start-up less).
    tasks = (range(cluster.num_tasks('ps')) if args.task < 0 else [args.task])
    servers = [tf.train.Server(cluster, job_name='ps', task_index=task,
                               config=tf.ConfigProto(
                                   intra_op_parallelism_threads=1))
               for task in tasks]
    _log('ps %s: serving' % list(tasks))
    servers[0].join()  # serves until killed
    return 0
  run_worker(args, cluster)
  _log('exiting')
  return 0


if __name__ == '__main__':
  sys.exit(main())
