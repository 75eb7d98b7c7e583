"""Keras runs in a process of their own, for tests/keras/test_survival.py.

    python tests/support/keras_worker.py load OUT.npz FILE...  # check, train
    python tests/support/keras_worker.py backup DIR OUT.npz KILL_EPOCH
    python tests/support/keras_worker.py mwms OUT.npz      # TF_CONFIG set
    python tests/support/keras_worker.py mirrored OUT.npz  # 2 logical CPUs

`load` loads each saved locked model in a fresh process (only `import
tf1prune.keras` before `load_model`, as a user would), trains it with
`Adam(clipnorm=0.1, use_ema=True)` (plain Adam where the Keras has no EMA)
and writes its locked entries, mask and kernel after training. `backup`
trains `keras_models.dense0_model` with its locks, a Pruner and
`BackupAndRestore` into DIR; with KILL_EPOCH >= 0 it kills itself (SIGKILL)
in the middle of that epoch. `mwms` trains it under
`MultiWorkerMirroredStrategy` and writes what every replica holds;
`mirrored` does so under `MirroredStrategy` on two logical CPU devices and
then on one device. The Keras is the one tf.keras stands for.
"""

import os
import signal
import sys

import numpy as np
import tensorflow as tf

# The checkout root, for tests.support when run as a script.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from tests.support import keras_models  # noqa: E402
import tf1prune.keras as tk  # noqa: E402

K = keras_models.keras_module()
HPARAMS = ('pruning_frequency=2,sparsity_function_end_step=12,'
           'target_sparsity=0.5')


def _optimizer():
  if keras_models.has_ema(K):
    return K.optimizers.Adam(0.05, clipnorm=0.1, use_ema=True)
  return K.optimizers.Adam(0.05, clipnorm=0.1)


def load(out, paths):
  x, y = keras_models.dense0_data()
  results = {}
  for i, path in enumerate(paths):
    model = K.models.load_model(path, compile=False)
    layer = model.get_layer('Dense0')
    pin = layer.kernel_constraint
    results['locked%d' % i] = pin.locked
    results['values%d' % i] = pin.values
    results['mask%d' % i] = pin.mask
    results['loaded%d' % i] = np.array(layer.kernel)
    model.compile(_optimizer(), 'mse')
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    results['trained%d' % i] = np.array(layer.kernel)
  np.savez(out, **results)


class _Kill(K.callbacks.Callback):
  """SIGKILLs this process at batch 2 of epoch `epoch`."""

  def __init__(self, epoch):
    super(_Kill, self).__init__()
    self.epoch = epoch
    self.current = -1

  def on_epoch_begin(self, epoch, logs=None):
    self.current = epoch

  def on_train_batch_end(self, batch, logs=None):
    if self.current == self.epoch and batch == 2:
      sys.stdout.flush()
      os.kill(os.getpid(), signal.SIGKILL)


def backup(directory, out, kill_epoch):
  x, y = keras_models.dense0_data()
  model = keras_models.dense0_model(K)
  keras_models.lock_dense0(tk, model)
  model.compile(K.optimizers.Adam(0.05), 'mse')
  pruner = tk.Pruner(model, HPARAMS, weights=[('Dense0', 'kernel')])
  callbacks = [K.callbacks.BackupAndRestore(directory),
               tk.PruningCallback(pruner)]
  if kill_epoch >= 0:
    callbacks.append(_Kill(kill_epoch))
  model.fit(x, y, batch_size=16, epochs=4, verbose=0, shuffle=False,
            callbacks=callbacks)
  layer = model.get_layer('Dense0')
  np.savez(out, kernel=np.array(layer.kernel),
           mask=layer.kernel_constraint.mask,
           locked=layer.kernel_constraint.locked,
           last=np.array(pruner.last_update_step),
           iterations=np.array(int(model.optimizer.iterations.numpy())))


def _train(strategy):
  """(kernel of every replica, mask, locked, values) after 2 pruned epochs."""
  x, y = keras_models.dense0_data()
  with strategy.scope():
    model = keras_models.dense0_model(K)
    expected = keras_models.lock_dense0(tk, model)['Dense0/kernel']
    model.compile(K.optimizers.Adam(0.05), 'mse')
  pruner = tk.Pruner(model, HPARAMS, weights=[('Dense0', 'kernel')])
  # A dataset of global batches of 16: Keras splits each over the replicas
  # (Keras 3 cannot feed NumPy arrays to MultiWorkerMirroredStrategy).
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).with_options(
      options)
  model.fit(dataset, epochs=2, verbose=0,
            callbacks=[tk.PruningCallback(pruner)])
  kernel = model.get_layer('Dense0').kernel
  if keras_models.is_keras3(K):
    kernel = kernel.value      # the tf.Variable (here a MirroredVariable)
  replicas = [np.array(v) for v in strategy.experimental_local_results(kernel)]
  mask = model.get_layer('Dense0').kernel_constraint.mask
  return (np.stack(replicas), mask) + expected


def mwms(out):
  replicas, mask, _, _ = _train(tf.distribute.MultiWorkerMirroredStrategy())
  np.savez(out, replicas=replicas, mask=mask)


def mirrored(out):
  """MirroredStrategy on two logical CPUs, then one device; both results."""
  cpu = tf.config.list_physical_devices('CPU')[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  devices = [d.name for d in tf.config.list_logical_devices('CPU')]
  replicas, mask, locked, values = _train(
      tf.distribute.MirroredStrategy(devices))
  single, single_mask, _, _ = _train(
      tf.distribute.OneDeviceStrategy(devices[0]))
  np.savez(out, replicas=replicas, mask=mask, locked=locked, values=values,
           single=single[0], single_mask=single_mask)


def main(argv):
  mode = argv[1]
  if mode == 'load':
    load(argv[2], argv[3:])
  elif mode == 'backup':
    backup(argv[2], argv[3], int(argv[4]))
  elif mode == 'mwms':
    mwms(argv[2])
  elif mode == 'mirrored':
    mirrored(argv[2])
  else:
    raise ValueError('mode must be load, backup or mwms, got %r' % mode)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
