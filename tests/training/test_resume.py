"""Kill and resume: a SIGKILLed pruning run restarts from its checkpoint and
ends bit-identical to a run that was never interrupted.

Real processes (tests/support/train_worker.py), bounded by timeouts and always
killed in the end. Training is deterministic (fixed data, constant
initializers, one thread), so any difference is a resume bug.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tests.support.checkout import ROOT, SUPPORT

WORKER = os.path.join(SUPPORT, 'train_worker.py')
TIMEOUT = 240  # seconds per process; they take a few seconds alone.


class _Processes(object):
  """Launches workers; `close()` kills whatever still runs."""

  def __init__(self, root):
    self.root = root
    self.procs = []

  def launch(self, name, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
               PYTHONPATH=os.pathsep.join(
                   [ROOT, os.environ.get('PYTHONPATH', '')]))
    log = open(os.path.join(self.root, name + '.log'), 'wb')
    proc = subprocess.Popen([sys.executable, WORKER] + list(args), env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    log.close()
    proc.log_path = os.path.join(self.root, name + '.log')
    self.procs.append(proc)
    return proc

  def wait(self, proc):
    try:
      proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
      pytest.fail('worker timed out; log:\n' + self.log(proc))
    return proc.returncode

  def log(self, proc):
    with open(proc.log_path) as f:
      return f.read()[-3000:]

  def close(self):
    for proc in self.procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait()


def _load(path):
  with np.load(path) as data:
    return {k: data[k] for k in data.files}


def _checkpoint_values(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Runs, in parallel where possible, an uninterrupted run and two killed and
  resumed ones; returns their directories."""
  root = str(tmp_path_factory.mktemp('resume'))
  d = {name: os.path.join(root, name) for name in ('full', 'self', 'parent')}
  procs = _Processes(root)
  try:
    full = procs.launch('full', '--logdir=' + d['full'],
                        '--dump=' + d['full'] + '.npz')
    # Dies right after the checkpoint of pruning step 30 is written.
    killed_self = procs.launch('self_1', '--logdir=' + d['self'], '--kill_at=30',
                               '--dump=' + d['self'] + '_1.npz')
    # Slowed down; the test SIGKILLs it at some moment after checkpoint 20.
    killed_parent = procs.launch('parent_1', '--logdir=' + d['parent'],
                                 '--step_sleep=0.05',
                                 '--dump=' + d['parent'] + '_1.npz')
    marker = os.path.join(d['parent'], 'model.ckpt-20.index')
    deadline = time.time() + TIMEOUT
    while not os.path.exists(marker) and killed_parent.poll() is None:
      if time.time() > deadline:
        pytest.fail('no checkpoint 20 in time:\n' + procs.log(killed_parent))
      time.sleep(0.02)
    time.sleep(0.1)
    killed_parent.send_signal(signal.SIGKILL)
    codes = {name: procs.wait(p) for name, p in
             (('full', full), ('self', killed_self), ('parent', killed_parent))}
    assert codes['full'] == 0, procs.log(full)
    assert codes['self'] == -signal.SIGKILL, procs.log(killed_self)
    assert codes['parent'] == -signal.SIGKILL, procs.log(killed_parent)
    d['self_latest'] = tf.train.latest_checkpoint(d['self'])
    d['parent_latest'] = tf.train.latest_checkpoint(d['parent'])
    resumed = [procs.launch(name + '_2', '--logdir=' + d[name],
                            '--dump=' + d[name] + '_2.npz',
                            '--dump_start=' + d[name] + '_start.npz')
               for name in ('self', 'parent')]
    for proc in resumed:
      assert procs.wait(proc) == 0, procs.log(proc)
    yield d
  finally:
    procs.close()


def test_killed_runs_left_no_final_state(runs):
  assert not os.path.exists(runs['self'] + '_1.npz')
  assert not os.path.exists(runs['parent'] + '_1.npz')
  assert runs['self_latest'].endswith('model.ckpt-30')
  # The parent's kill lands somewhere after checkpoint 20.
  assert int(runs['parent_latest'].rsplit('-', 1)[1]) >= 20


def test_restart_restores_masks_thresholds_last_update_and_locks(runs):
  start = _load(runs['self'] + '_start.npz')
  reference = _checkpoint_values(os.path.join(runs['full'], 'model.ckpt-30'))
  assert sorted(start) == sorted(reference)
  for name in reference:
    np.testing.assert_array_equal(start[name], reference[name], err_msg=name)
  # Mid-schedule: pruned by now, not at the target yet.
  assert start['model_pruning/last_mask_update_step'] == 25
  assert start['global_step'] == 30
  for mask in ('fc1/mask', 'fc2/mask'):
    assert 0.1 < 1.0 - start[mask].mean() < 0.8
  if 'fc1/lock_captured' in start:  # tf1prune.lock exists
    assert start['fc1/lock_captured']
  assert start['fc1/threshold'] > 0.0


@pytest.mark.parametrize('run', ['self', 'parent'])
def test_resumed_run_ends_bit_identical_to_an_uninterrupted_one(runs, run):
  full = _load(runs['full'] + '.npz')
  resumed = _load(runs[run] + '_2.npz')
  assert sorted(resumed) == sorted(full)
  for name in full:
    np.testing.assert_array_equal(resumed[name], full[name], err_msg=name)
  assert full['global_step'] == 60
  assert full['model_pruning/last_mask_update_step'] == 50
  # The schedule reached its target (thresholds smoothed with decay 0.5, so
  # not the exact count).
  assert 1.0 - full['fc1/mask'].mean() > 0.7
  if 'fc1/lock_value' in full:
    # The locked entries still hold the value captured at the first start.
    initial = _load(runs['self'] + '_start.npz')
    np.testing.assert_array_equal(full['fc1/lock_value'],
                                  initial['fc1/lock_value'])
