"""Locks and masks survive save/load, EMA, mixed precision, resume, replicas.

A Sequential with a Dense layer 'Dense0' (its kernel's column 13 locked at
zero and row 2's first five entries at 1..5), on the Keras tf.keras stands
for: Keras 3, Keras 2 (TF <= 2.15) or tf_keras. Checks are bit for bit
on the locked entries and exact on the masks.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.support.checkout import ROOT, SUPPORT
from tests.support.keras_models import (
    bits, dense0_data, dense0_model, has_ema, is_keras3, keras_module,
    lock_dense0, skip_unless_usable)

skip_unless_usable()

import tf1prune.keras as tk  # noqa: E402

K = keras_module()
WORKER = os.path.join(SUPPORT, 'keras_worker.py')
TIMEOUT = 240
HPARAMS = ('pruning_frequency=2,sparsity_function_end_step=12,'
           'target_sparsity=0.5')


def _env(**extra):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=ROOT)
  env.update(extra)
  return env


def _run(args, **extra):
  run = subprocess.run([sys.executable, WORKER] + list(args), env=_env(**extra),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=TIMEOUT)
  return run


def _trained_locked_pruned():
  """The Dense0 model, locked, pruned to 50%, one epoch of Adam."""
  model = dense0_model(K)
  expected = lock_dense0(tk, model)
  model.compile(K.optimizers.Adam(0.05), 'mse')
  pruner = tk.Pruner(model, HPARAMS, weights=[('Dense0', 'kernel')])
  pruner.update(sparsity=0.5)
  model.fit(*dense0_data(), batch_size=16, epochs=1, verbose=0)
  return model, expected


def _check_locks(kernel, locked, values):
  assert bits(np.asarray(kernel)[locked]) == bits(values[locked])


# Save / load in every format the Keras offers, loaded in a fresh process.

# One format in the default run; each takes a process start (~15 s).
FORMATS = ['.keras', pytest.param('.h5', marks=pytest.mark.slow),
           pytest.param('saved_model', marks=pytest.mark.slow)]


def _save(model, path, fmt):
  if fmt == 'saved_model':
    if is_keras3(K):
      pytest.skip('Keras 3 saves no Keras SavedModel (model.save needs .keras '
                  'or .h5; tk.export_saved_model writes an inference-only one)')
    model.save(path, save_format='tf')
  elif fmt == '.h5':
    model.save(path, save_format='h5') if not is_keras3(K) else model.save(path)
  else:
    model.save(path)


@pytest.mark.parametrize('fmt', FORMATS)
def test_locks_and_masks_load_in_a_fresh_process_and_hold_under_ema(
    tmp_path, fmt):
  model, expected = _trained_locked_pruned()
  locked, values = expected['Dense0/kernel']
  pin = model.get_layer('Dense0').kernel_constraint
  path = str(tmp_path / ('model' + (fmt if fmt != 'saved_model' else '')))
  _save(model, path, fmt)
  out = str(tmp_path / 'out.npz')
  run = _run(['load', out, path])
  assert run.returncode == 0, run.stderr[-3000:]
  got = np.load(out)
  np.testing.assert_array_equal(got['locked0'], locked)
  np.testing.assert_array_equal(got['mask0'], pin.mask)
  assert bits(got['loaded0']) == bits(np.array(model.get_layer('Dense0')
                                               .kernel))
  _check_locks(got['trained0'], locked, values)
  pruned = ~got['mask0']
  assert bits(got['trained0'][pruned]) == bits(np.zeros(int(pruned.sum()),
                                                        np.float32))
  free = got['mask0'] & ~locked
  assert np.all(got['trained0'][free] != got['loaded0'][free])


def _conv_model(layer):
  inputs = K.Input((6, 6, 3))
  return K.Model(inputs, K.layers.Dense(2, name='out')(
      K.layers.Flatten()(layer(inputs))))


def _rnn_model(layer):
  inputs = K.Input((5, 3))
  return K.Model(inputs, K.layers.Dense(2, name='out')(layer(inputs)))


@pytest.mark.parametrize('build,layer', [
    (_conv_model, lambda: K.layers.SeparableConv2D(4, 3, name='layer')),
    (_conv_model, lambda: K.layers.DepthwiseConv2D(3, name='layer')),
    (_rnn_model, lambda: K.layers.LSTM(4, name='layer')),
    (_rnn_model, lambda: K.layers.GRU(4, name='layer')),
    (_rnn_model, lambda: K.layers.SimpleRNN(4, name='layer')),
], ids=['separable', 'depthwise', 'lstm', 'gru', 'simple_rnn'])
def test_masks_of_every_kernel_kind_are_saved_with_the_model(build, layer,
                                                             tmp_path):
  # Depthwise and pointwise kernels keep their constraints under other
  # attribute names; an RNN layer's are its cell's.
  K.utils.set_random_seed(1)
  model = build(layer())
  pruner = tk.Pruner(model, 'do_not_prune=[out]')
  pruner.update(sparsity=0.5)
  masks = pruner.masks()
  assert sorted(masks) and all(n.startswith('layer/') for n in masks)
  path = str(tmp_path / 'model.keras') if is_keras3(K) else str(
      tmp_path / 'model.h5')
  model.save(path)
  loaded = K.models.load_model(path)
  loaded.compile(K.optimizers.Adam(0.05), 'mse')
  inputs = np.random.RandomState(0).randn(
      16, *model.input_shape[1:]).astype(np.float32)
  loaded.fit(inputs, np.ones((16, 2), np.float32), epochs=2, verbose=0)
  weights = {'layer/' + n.split('/')[-1].split(':')[0]: np.asarray(v)
             for n, v in ((w.name if not is_keras3(K) else w.path, w)
                          for w in loaded.get_layer('layer').weights)}
  for name, keep in masks.items():
    assert not np.any(weights[name][~keep]), name
    assert np.all(weights[name][keep] != 0), name


def test_ema_after_load_model_keeps_locked_entries(tmp_path):
  """Fit, save .keras, load_model, fit again with EMA: the locked entries
  stay as they were locked."""
  if not has_ema(K):
    pytest.skip('%s %s optimizers have no use_ema (it came with Keras 2.11)'
                % (K.__name__, K.__version__))
  model = dense0_model(K)
  locked, values = lock_dense0(tk, model)['Dense0/kernel']
  model.compile(K.optimizers.Adam(0.05, clipnorm=0.1, use_ema=True), 'mse')
  x, y = dense0_data()
  model.fit(x, y, batch_size=16, epochs=2, verbose=0)
  _check_locks(model.get_layer('Dense0').kernel, locked, values)
  path = str(tmp_path / 'locked.keras')
  model.save(path)
  loaded = K.models.load_model(path)
  loaded.fit(x, y, batch_size=16, epochs=2, verbose=0)      # its own optimizer
  _check_locks(loaded.get_layer('Dense0').kernel, locked, values)
  loaded.compile(K.optimizers.Adam(0.05, clipnorm=0.1, use_ema=True), 'mse')
  loaded.fit(x, y, batch_size=16, epochs=2, verbose=0)      # a new one
  _check_locks(loaded.get_layer('Dense0').kernel, locked, values)


# Mixed precision.

@pytest.fixture
def mixed_float16():
  K.mixed_precision.set_global_policy('mixed_float16')
  yield
  K.mixed_precision.set_global_policy('float32')


def test_mixed_float16_keeps_the_float32_variable_exact(mixed_float16):
  del mixed_float16  # used for its policy
  model = dense0_model(K)
  locked, values = lock_dense0(tk, model)['Dense0/kernel']
  layer = model.get_layer('Dense0')
  assert layer.compute_dtype == 'float16'
  assert tf.as_dtype(layer.kernel.dtype) == tf.float32
  pruner = tk.Pruner(model, HPARAMS, weights=[('Dense0', 'kernel')])
  pruner.update(sparsity=0.5)
  before = np.array(layer.kernel)
  model.compile(K.optimizers.Adam(0.05), 'mse')     # loss-scaled by compile
  model.fit(*dense0_data(), batch_size=16, epochs=2, verbose=0)
  kernel = np.array(layer.kernel)
  assert kernel.dtype == np.float32
  _check_locks(kernel, locked, values)
  mask = pruner.masks()['Dense0/kernel']
  assert bits(kernel[~mask]) == bits(np.zeros(int((~mask).sum()), np.float32))
  free = mask & ~locked
  assert np.all(kernel[free] != before[free])


# MirroredStrategy on two logical CPU devices, against one device (in a
# process of its own: the CPU must be split before TensorFlow starts).

def test_mirrored_strategy_replicas_hold_the_same_masks_and_locks(tmp_path):
  out = str(tmp_path / 'mirrored.npz')
  run = _run(['mirrored', out])
  assert run.returncode == 0, run.stderr[-3000:]
  got = np.load(out)
  replicas, single, mask = got['replicas'], got['single'], got['mask']
  locked, values = got['locked'], got['values']
  assert len(replicas) == 2
  assert bits(replicas[0]) == bits(replicas[1])
  np.testing.assert_array_equal(mask, got['single_mask'])
  assert 0 < mask.sum() < mask.size                     # it pruned
  for kernel in list(replicas) + [single]:
    _check_locks(kernel, locked, values)
    assert bits(kernel[~mask]) == bits(np.zeros(int((~mask).sum()),
                                                np.float32))
  np.testing.assert_allclose(replicas[0], single, rtol=1e-5, atol=1e-6)


def _free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(('127.0.0.1', 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


@pytest.mark.slow
def test_multi_worker_mirrored_two_processes_match_one_device(tmp_path):
  if is_keras3(K):
    pytest.skip('Keras 3 fit does not run under MultiWorkerMirroredStrategy '
                '(PerReplica inputs cannot be converted: keras-team/keras'
                '#20585, tensorflow/tensorflow#72388); tested on Keras 2 and '
                'tf_keras')
  ports = _free_ports(2)
  cluster = {'worker': ['127.0.0.1:%d' % p for p in ports]}
  workers = []
  for i in range(2):
    config = json.dumps({'cluster': cluster,
                         'task': {'type': 'worker', 'index': i}})
    out = str(tmp_path / ('worker%d.npz' % i))
    log = open(str(tmp_path / ('worker%d.log' % i)), 'w')
    workers.append((out, log, subprocess.Popen(
        [sys.executable, WORKER, 'mwms', out], env=_env(TF_CONFIG=config),
        stdout=log, stderr=subprocess.STDOUT)))
  try:
    for _, _, process in workers:
      process.wait(timeout=TIMEOUT)
  finally:
    for _, log, process in workers:
      if process.poll() is None:
        process.kill()
        process.wait()
      log.close()
  for i, (_, _, process) in enumerate(workers):
    with open(str(tmp_path / ('worker%d.log' % i))) as f:
      assert process.returncode == 0, f.read()[-3000:]
  results = [np.load(out) for out, _, _ in workers]
  single = str(tmp_path / 'single.npz')
  run = _run(['mirrored', single])
  assert run.returncode == 0, run.stderr[-3000:]
  single = np.load(single)
  kernels = [k for r in results for k in r['replicas']]
  for result in results:
    np.testing.assert_array_equal(result['mask'], single['single_mask'])
  assert 0 < single['mask'].sum() < single['mask'].size
  for kernel in kernels:
    assert bits(kernel) == bits(kernels[0])
    _check_locks(kernel, single['locked'], single['values'])
  np.testing.assert_allclose(kernels[0], single['single'], rtol=1e-5,
                             atol=1e-6)


# BackupAndRestore after a killed fit.

def test_backup_and_restore_after_a_killed_fit_resumes_identically(tmp_path):
  from tests.support import keras_worker
  whole = str(tmp_path / 'whole.npz')
  keras_worker.backup(str(tmp_path / 'backup_whole'), whole, -1)   # here
  directory = str(tmp_path / 'backup')
  resumed = str(tmp_path / 'resumed.npz')
  killed = _run(['backup', directory, resumed, '2'])
  assert killed.returncode == -9, killed.stderr[-3000:]     # SIGKILL
  assert not os.path.exists(resumed)
  run = _run(['backup', directory, resumed, '-1'])
  assert run.returncode == 0, run.stderr[-3000:]
  a, b = np.load(whole), np.load(resumed)
  assert int(a['iterations']) == int(b['iterations']) == 16
  assert int(a['last']) == int(b['last'])
  np.testing.assert_array_equal(a['mask'], b['mask'])
  np.testing.assert_array_equal(a['locked'], b['locked'])
  assert bits(a['kernel']) == bits(b['kernel'])


def test_pruner_resume_catches_up_with_a_pruner_that_ran_every_step():
  model = dense0_model(K)
  lock_dense0(tk, model)
  ran = tk.Pruner(model, HPARAMS, weights=[('Dense0', 'kernel')])
  done = [s for s in range(1, 10) if ran.step(s)]
  assert done == [2, 4, 6, 8]
  restored = dense0_model(K, seed=5)                # other initial values
  lock_dense0(tk, restored)
  restored.set_weights(model.get_weights())           # what a restore does
  fresh = tk.Pruner(restored, HPARAMS, weights=[('Dense0', 'kernel')])
  fresh.resume(9)
  assert fresh.last_update_step == ran.last_update_step == 8
  np.testing.assert_array_equal(fresh.masks()['Dense0/kernel'],
                                ran.masks()['Dense0/kernel'])
  assert [s for s in range(10, 14) if fresh.step(s)] == [10, 12]
  fresh.resume(5)                                     # behind: left alone
  assert fresh.last_update_step == 12
