"""What the Keras tests share: skips, the Keras under test, models, data.

The Keras tests run in an eager process of their own: `pytest tests/keras`
(tests/keras/conftest.py). The Keras they test is the one TensorFlow's
`tf.keras` stands for: Keras 3, or tf_keras when TF_USE_LEGACY_KERAS=1
(bin/run_tests runs them both ways).
"""

import os

import numpy as np
import pytest
import tensorflow as tf

TF2 = int(tf.__version__.split('.')[0]) >= 2
REASON_TF1 = ('tf1prune.keras needs TensorFlow 2.x (Keras 3 or tf_keras); '
              'this is TensorFlow %s' % tf.__version__)
REASON_GRAPH = ('the Keras tests need eager mode: run them in their own '
                'process, e.g. pytest tests/keras (bin/run_tests does)')


def skip_unless_usable():
  """Module-level skip for TF 1.x and for a graph-mode (mixed) run."""
  if not TF2:
    pytest.skip(REASON_TF1, allow_module_level=True)
  if not tf.executing_eagerly():
    pytest.skip(REASON_GRAPH, allow_module_level=True)


def keras_module():
  if os.environ.get('TF_USE_LEGACY_KERAS', '').lower() in ('1', 'true'):
    import tf_keras
    return tf_keras
  import keras
  return keras


def small_model(keras, seed=0):
  """Sequential: 6 inputs, Dense 5 (tanh), Dense 3; Keras's initializers."""
  keras.utils.set_random_seed(seed)
  return keras.Sequential([keras.Input((6,)),
                           keras.layers.Dense(5, activation='tanh'),
                           keras.layers.Dense(3)])


def data(n=32, inputs=6, outputs=3, seed=1):
  """`n` examples: float32 inputs and targets from N(0, 1)."""
  rng = np.random.RandomState(seed)
  return (rng.normal(size=(n, inputs)).astype(np.float32),
          rng.normal(size=(n, outputs)).astype(np.float32))


def bits(array):
  """The raw bytes of an array, for bit-exact comparison."""
  return np.ascontiguousarray(np.asarray(array)).tobytes()


def dense0_model(keras, seed=0, units=16):
  """Sequential: 30 inputs, Dense 'Dense0' (`units`, softsign, biases one),
  Dense 'out' (1, tanh): the model whose kernel the Keras lock tests pin."""
  keras.utils.set_random_seed(seed)
  return keras.Sequential([
      keras.Input((30,)),
      keras.layers.Dense(units, activation='softsign', name='Dense0',
                         bias_initializer='ones'),
      keras.layers.Dense(1, activation='tanh', name='out')])


def lock_dense0(tk, model):
  """Locks Dense0's kernel: column 13 at zero, row 2's first five at 1..5.

  Returns {'Dense0/kernel': (bool locked, float32 values)}.
  """
  tk.lock(model, 'Dense0', 'kernel', np.s_[:, 13], value='zero')
  pin = tk.lock(model, 'Dense0', 'kernel', np.s_[2, :5],
                value=[1., 2., 3., 4., 5.])
  return {'Dense0/kernel': (pin.locked.copy(), pin.values.copy())}


def dense0_data(n=64, seed=1):
  """`n` examples for `dense0_model`: 30 inputs, 1 target."""
  return data(n, 30, 1, seed)


def is_keras3(keras):
  return keras.__version__.startswith('3.')


def has_ema(keras):
  """Whether `keras.optimizers.Adam` takes use_ema (Keras 3, Keras 2.11+)."""
  try:
    keras.optimizers.Adam(0.01, use_ema=True)
    return True
  except (TypeError, ValueError):
    return False


def same_outputs(model, small, shape, seed=1):
  """Asserts that `small` computes `model`'s outputs (to 1e-5 of max|y|) on
  4 random inputs of `shape` (one example's)."""
  x = np.random.RandomState(seed).randn(*((4,) + shape)).astype(np.float32)
  y, y_small = np.asarray(model(x)), np.asarray(small(x))
  assert y.shape == y_small.shape
  err = float(np.abs(y - y_small).max())
  assert err <= 1e-5 * float(np.abs(y).max()), err


def residual_cnn(keras, seed=0, biases=True):
  """Functional: 16x16x3 -> conv 'stem' (16) -> BN -> ReLU; 'b1' (8) -> BN
  -> ReLU; 'b2' (16) -> BN, added to the stem; ReLU; depthwise 'dw' -> BN
  -> ReLU; 1x1 'head' (12, stride 2) -> BN -> ReLU; global pool; Dense
  'logits' (4). Keras's initializers; with `biases`, the convs after the
  stem have biases, and every bias and batch norm vector is set to random
  nonzero values (so that zeros are the pruner's)."""
  keras.utils.set_random_seed(seed)
  layers = keras.layers

  def bn(x, name):
    return layers.BatchNormalization(name=name + '_bn')(x)

  x = keras.Input((16, 16, 3))
  stem = layers.Conv2D(16, 3, padding='same', use_bias=False, name='stem')(x)
  stem = layers.ReLU()(bn(stem, 'stem'))
  h = layers.Conv2D(8, 3, padding='same', use_bias=biases, name='b1')(stem)
  h = layers.ReLU()(bn(h, 'b1'))
  h = layers.Conv2D(16, 3, padding='same', use_bias=biases, name='b2')(h)
  h = layers.ReLU()(layers.Add()([stem, bn(h, 'b2')]))
  h = layers.DepthwiseConv2D(3, padding='same', use_bias=biases,
                             name='dw')(h)
  h = layers.ReLU()(bn(h, 'dw'))
  h = layers.Conv2D(12, 1, strides=2, use_bias=biases, name='head')(h)
  h = layers.ReLU()(bn(h, 'head'))
  y = layers.Dense(4, name='logits')(layers.GlobalAveragePooling2D()(h))
  model = keras.Model(x, y)
  if biases:
    rng = np.random.RandomState(seed + 1)
    for layer in model.layers:
      for variable in layer.weights:
        short = variable.name.split('/')[-1].split(':')[0]
        if short in ('bias', 'gamma', 'beta', 'moving_mean'):
          variable.assign(rng.uniform(0.5, 1.5, variable.shape) *
                          rng.choice([-1.0, 1.0], variable.shape))
        elif short == 'moving_variance':
          variable.assign(rng.uniform(0.5, 1.5, variable.shape))
  return model
