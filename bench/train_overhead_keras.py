"""Benchmark (Keras side): tfmot's pruning step time over its unpruned twin.

    TF_USE_LEGACY_KERAS=1 /work/venvs/bench_keras/bin/python -m bench.train_overhead_keras --quick

The comparison point for `bench/train_overhead.py`: the same CIFAR-10 example
network in tf.keras (legacy Keras 2, the `tf-keras` package, which
tensorflow-model-optimization needs), every Conv2D and Dense layer wrapped in
`tfmot.sparsity.keras.prune_low_magnitude` with a `PolynomialDecay` schedule
like ours (0.5 -> 0.9 sparsity, reached at step 10**6, frequency 10), against
the same model unwrapped. Both are compiled alike (plain SGD, lr 0.01, sparse
softmax cross entropy from logits) and trained on one constant batch of
`[batch, 24, 24, 3]` tensors (no input pipeline).

One step is `model.train_on_batch(x, y)`: one compiled `tf.function` call, the
same path `model.fit` takes per batch. The pruned model's loop also calls the
`UpdatePruningStep` callback the way `fit` does (`set_model`,
`on_train_begin` once, `on_train_batch_begin/end` around every step); tfmot
advances its pruning step and runs its conditional mask update inside the
wrapped layers' `call`, so this is all `fit` would run. The two models
alternate inside each repeat (`inner` steps each); the ratio is the median of
the per-repeat ratios (`bench/_paired.py`), as in `train_overhead.py`.

Needs a venv of its own (Keras 2 and tfmot are benchmark-only extras; they
must not be mixed with the project's test venvs):

    python3.11 -m venv /work/venvs/bench_keras
    /work/venvs/bench_keras/bin/pip install tensorflow-cpu tf-keras tensorflow-model-optimization
    (bench/run_all --make-keras-venv does the same)

Results: bench/results/train_overhead_keras[_quick].json.
"""

import argparse
import os

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from bench._paired import (  # pylint: disable=wrong-import-position
    interleaved_samples, load_average, medians, paired_ratio)
from bench._timing import write_results  # pylint: disable=wrong-import-position

FREQUENCY = 10


def _lrn(x):
  return tf.nn.local_response_normalization(x, 4, bias=1.0, alpha=0.001 / 9.0,
                                            beta=0.75)


def build(pruned, batch, seed=0):
  """Returns the compiled model (pruned: tfmot-wrapped Conv2D/Dense)."""
  import tensorflow_model_optimization as tfmot  # pylint: disable=g-import-not-at-top
  keras = tf.keras
  tf.random.set_seed(seed)
  if pruned:
    schedule = tfmot.sparsity.keras.PolynomialDecay(
        initial_sparsity=0.5, final_sparsity=0.9, begin_step=0,
        end_step=1000000, frequency=FREQUENCY)

    def wrap(layer):
      return tfmot.sparsity.keras.prune_low_magnitude(
          layer, pruning_schedule=schedule)
  else:
    def wrap(layer):
      return layer
  normal = keras.initializers.TruncatedNormal
  const = keras.initializers.Constant
  model = keras.Sequential([
      keras.layers.InputLayer(input_shape=(24, 24, 3), batch_size=batch),
      wrap(keras.layers.Conv2D(64, 5, padding='same', activation='relu',
                               kernel_initializer=normal(stddev=5e-2),
                               bias_initializer=const(0.0), name='conv1')),
      keras.layers.MaxPool2D(3, 2, padding='same'),
      keras.layers.Lambda(_lrn),
      wrap(keras.layers.Conv2D(64, 5, padding='same', activation='relu',
                               kernel_initializer=normal(stddev=5e-2),
                               bias_initializer=const(0.1), name='conv2')),
      keras.layers.Lambda(_lrn),
      keras.layers.MaxPool2D(3, 2, padding='same'),
      keras.layers.Flatten(),
      wrap(keras.layers.Dense(384, activation='relu',
                              kernel_initializer=normal(stddev=0.04),
                              bias_initializer=const(0.1), name='local3')),
      wrap(keras.layers.Dense(192, activation='relu',
                              kernel_initializer=normal(stddev=0.04),
                              bias_initializer=const(0.1), name='local4')),
      wrap(keras.layers.Dense(10, kernel_initializer=normal(stddev=1 / 192.0),
                              bias_initializer=const(0.0),
                              name='softmax_linear')),
  ])
  model.compile(optimizer=keras.optimizers.SGD(0.01),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  return model


def run(batch, repeats, inner):
  """Measures and returns the result dict."""
  import tensorflow_model_optimization as tfmot  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(0)
  x = tf.constant(rng.randn(batch, 24, 24, 3).astype(np.float32))
  y = tf.constant(rng.randint(0, 10, size=batch).astype(np.int64))
  plain = build(False, batch)
  pruned = build(True, batch)
  callback = tfmot.sparsity.keras.UpdatePruningStep()
  callback.set_model(pruned)
  callback.on_train_begin()
  counter = [0]

  def plain_steps():
    for _ in range(inner):
      plain.train_on_batch(x, y)

  def pruned_steps():
    for _ in range(inner):
      callback.on_train_batch_begin(counter[0])
      pruned.train_on_batch(x, y)
      callback.on_train_batch_end(counter[0])
      counter[0] += 1

  samples = interleaved_samples({'unpruned': plain_steps,
                                 'pruned': pruned_steps},
                                repeats=repeats, warmup=1)
  per_step = {k: v / inner for k, v in medians(samples).items()}
  sparsities = {}
  for layer in pruned.layers:
    if hasattr(layer, 'pruning_vars'):
      for _, mask, _ in layer.pruning_vars:
        sparsities[layer.name] = float(1.0 - np.mean(mask.numpy()))
  steps = [int(layer.pruning_step.numpy()) for layer in pruned.layers
           if hasattr(layer, 'pruning_step')]
  import tf_keras  # pylint: disable=g-import-not-at-top
  return {
      'batch': batch, 'repeats': repeats, 'steps_per_repeat': inner,
      'pruning_frequency': FREQUENCY,
      'median_step_seconds': per_step,
      'ratio_pruned_to_unpruned': paired_ratio(samples, 'pruned', 'unpruned'),
      'ratio_spread': [float(min(np.array(samples['pruned']) /
                                 np.array(samples['unpruned']))),
                       float(max(np.array(samples['pruned']) /
                                 np.array(samples['unpruned'])))],
      'ratio_of_medians': per_step['pruned'] / per_step['unpruned'],
      'pruned_model_final': {'pruning_step': max(steps) if steps else None,
                             'mask_sparsities': sparsities},
      'versions': {'tensorflow_model_optimization': tfmot.__version__ if hasattr(
          tfmot, '__version__') else 'unknown', 'tf_keras': tf_keras.__version__},
  }


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='few steps, batch <= 32 (CI smoke run)')
  parser.add_argument('--batch', type=int, default=128,
                      help='batch size (--quick caps it at 32)')
  parser.add_argument('--repeats', type=int, default=31,
                      help='repeats of the full run (10 steps per candidate '
                      'each)')
  args = parser.parse_args(argv)
  load_before = load_average()
  if args.quick:
    result = run(min(args.batch, 32), repeats=3, inner=10)
  else:
    result = run(args.batch, repeats=args.repeats, inner=10)
  result['load_average_1min'] = [load_before, load_average()]
  print('median step (s): ' + '  '.join(
      '%s %.4f' % kv for kv in sorted(result['median_step_seconds'].items())))
  print('ratio pruned / unpruned: %.3f [%.2f-%.2f]' % (
      (result['ratio_pruned_to_unpruned'],) + tuple(result['ratio_spread'])))
  print('load average', result['load_average_1min'])
  print('pruned model after the run:', result['pruned_model_final'])
  path = write_results('train_overhead_keras_quick' if args.quick
                       else 'train_overhead_keras', result)
  print('wrote', path)


if __name__ == '__main__':
  main()
