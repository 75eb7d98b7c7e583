"""tf1prune.keras locks: bit-identical locked entries under every optimizer."""

import numpy as np
import pytest
import tensorflow as tf

from tests.support.keras_models import (
    bits, data, keras_module, skip_unless_usable, small_model)

skip_unless_usable()

import tf1prune.keras as tk  # noqa: E402

K = keras_module()

OPTIMIZERS = {
    'sgd_momentum': lambda k: k.optimizers.SGD(0.1, momentum=0.9),
    'sgd_nesterov_clipnorm': lambda k: k.optimizers.SGD(
        0.1, momentum=0.9, nesterov=True, clipnorm=0.5),
    'adam': lambda k: k.optimizers.Adam(0.05),
    'adam_clipvalue': lambda k: k.optimizers.Adam(0.05, clipvalue=0.01),
    'adam_ema': lambda k: k.optimizers.Adam(0.05, use_ema=True,
                                            ema_momentum=0.9),
    'adam_ema_overwrite': lambda k: k.optimizers.Adam(
        0.05, use_ema=True, ema_momentum=0.9, ema_overwrite_frequency=3),
    'adamw': lambda k: k.optimizers.AdamW(0.05, weight_decay=0.5),
    'rmsprop_global_clipnorm': lambda k: k.optimizers.RMSprop(
        0.05, momentum=0.5, global_clipnorm=1.0),
    'adagrad': lambda k: k.optimizers.Adagrad(0.5),
    'adadelta': lambda k: k.optimizers.Adadelta(1.0),
    'adamax': lambda k: k.optimizers.Adamax(0.05),
    'nadam': lambda k: k.optimizers.Nadam(0.05),
    'ftrl': lambda k: k.optimizers.Ftrl(0.5, l2_regularization_strength=0.1),
    'lion': lambda k: k.optimizers.Lion(0.01, weight_decay=0.1),
    'adafactor': lambda k: k.optimizers.Adafactor(0.5),
    'loss_scale_adam': lambda k: k.mixed_precision.LossScaleOptimizer(
        k.optimizers.Adam(0.05)),
    'lamb': lambda k: k.optimizers.Lamb(0.05),
}


def _optimizer(name):
  try:
    return OPTIMIZERS[name](K)
  except AttributeError as e:
    pytest.skip('%s %s has no such optimizer (%s)' % (K.__name__,
                                                      K.__version__, e))
  except TypeError as e:   # Keras 2.10: no use_ema (it came with 2.11)
    pytest.skip('%s %s has no such option (%s)' % (K.__name__, K.__version__,
                                                   e))


def _locked_model():
  """A model with three locks; returns (model, {weight: (locked, values)})."""
  model = small_model(K)
  dense = model.layers[0]
  kernel0 = np.array(dense.kernel)
  zero_mask = np.zeros((6, 5), bool)
  zero_mask[3, 1] = zero_mask[5, 4] = True
  tk.lock(model, dense, 'kernel', np.s_[0, :])                 # current
  tk.lock(model, dense, 'kernel', mask=zero_mask, value='zero')
  tk.lock(model, model.layers[1], 'bias', np.s_[1], value=2.5)
  locked = np.zeros((6, 5), bool)
  locked[0, :] = True
  locked |= zero_mask
  values = np.where(zero_mask, 0.0, kernel0).astype(np.float32)
  bias_locked = np.array([False, True, False])
  return model, {'kernel': (dense.kernel, locked, values),
                 'bias': (model.layers[1].bias, bias_locked,
                          np.full(3, 2.5, np.float32))}


def _check(expected, before=None):
  for name, (variable, locked, values) in expected.items():
    now = variable.numpy()
    assert bits(now[locked]) == bits(values[locked]), name
    if before is not None:
      free = ~locked
      assert np.all(now[free] != before[name][free]), (
          '%s: %d of %d unlocked entries did not train' % (
              name, int(np.sum(now[free] == before[name][free])),
              int(free.sum())))


@pytest.mark.parametrize('name', sorted(OPTIMIZERS))
def test_locked_entries_stay_bit_identical_through_fit(name):
  model, expected = _locked_model()
  before = {k: v[0].numpy() for k, v in expected.items()}
  model.compile(_optimizer(name), 'mse')
  x, y = data()
  model.fit(x, y, batch_size=8, epochs=3, verbose=0)
  _check(expected, before)


@pytest.mark.parametrize('name', ['sgd_momentum', 'adamw', 'adam_ema', 'ftrl'])
def test_locks_hold_in_a_custom_gradient_tape_loop(name):
  model, expected = _locked_model()
  before = {k: v[0].numpy() for k, v in expected.items()}
  optimizer = _optimizer(name)
  x, y = data()

  @tf.function
  def train_step(x, y):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))

  for _ in range(6):
    train_step(x, y)
  if getattr(optimizer, 'use_ema', False):
    optimizer.finalize_variable_values(model.trainable_variables)
    tk.apply_pins(model)   # documented: finalize outside fit, then re-pin
  _check(expected, before)


def test_locks_survive_save_and_load_model(tmp_path):
  model, expected = _locked_model()
  model.compile(K.optimizers.Adam(0.05), 'mse')
  x, y = data()
  model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  path = str(tmp_path / 'locked.keras')
  model.save(path)
  loaded = K.models.load_model(path)
  assert sorted(tk.locked_entries(loaded)) == sorted(tk.locked_entries(model))
  for key, value in tk.locked_entries(model).items():
    np.testing.assert_array_equal(tk.locked_entries(loaded)[key], value)
  loaded.fit(x, y, batch_size=8, epochs=2, verbose=0)
  moved = {'kernel': (loaded.layers[0].kernel,) + expected['kernel'][1:],
           'bias': (loaded.layers[1].bias,) + expected['bias'][1:]}
  _check(moved)


def test_locks_survive_checkpoint_restore(tmp_path):
  model, expected = _locked_model()
  model.compile(K.optimizers.SGD(0.1, momentum=0.9), 'mse')
  x, y = data()
  model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  checkpoint = tf.train.Checkpoint(model=model)
  path = checkpoint.save(str(tmp_path / 'ckpt'))
  # The checkpoint holds the locked values.
  reader = tf.train.load_checkpoint(path)
  stored = [reader.get_tensor(key) for key, shape in
            tf.train.list_variables(path) if shape == [6, 5]]
  kernel, locked, values = expected['kernel']
  stored = [s for s in stored if bits(s) == bits(kernel.numpy())]
  assert len(stored) == 1     # the kernel (the other one is its momentum)
  assert bits(stored[0][locked]) == bits(values[locked])
  # Restoring into the locked model keeps the locks in force.
  model.set_weights([w + 1.0 for w in model.get_weights()])
  checkpoint.restore(path)
  _check(expected)
  model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  _check(expected)


def test_apply_pins_rewrites_locked_values_after_set_weights():
  model, expected = _locked_model()
  model.set_weights([w + 1.0 for w in model.get_weights()])
  tk.apply_pins(model)
  _check(expected)


def test_unlock_lets_entries_train_again():
  model, expected = _locked_model()
  tk.unlock(model, model.layers[0], 'kernel', ...)
  tk.unlock(model, model.layers[1], 'bias', ...)
  assert tk.locked_entries(model) == {}
  before = np.array(model.layers[0].kernel)
  model.compile(K.optimizers.Adam(0.05), 'mse')
  model.fit(*data(), batch_size=8, epochs=1, verbose=0)
  assert np.all(np.array(model.layers[0].kernel) != before)


def test_lock_values_number_array_and_layer_by_name():
  model = small_model(K)
  name = model.layers[0].name
  tk.lock(model, name, 'kernel', np.s_[:, 0], value=np.arange(6.))
  tk.lock(model, name, 'bias', ..., value=-1.5)
  kernel = np.array(model.layers[0].kernel)
  np.testing.assert_array_equal(kernel[:, 0], np.arange(6.))
  np.testing.assert_array_equal(np.array(model.layers[0].bias), [-1.5] * 5)


def test_a_constraint_the_weight_had_is_kept_and_applied_first():
  K.utils.set_random_seed(0)
  model = K.Sequential([K.Input((6,)), K.layers.Dense(
      5, kernel_constraint=K.constraints.NonNeg())])
  tk.lock(model, model.layers[0], 'kernel', np.s_[0, 0], value=-3.0)
  model.compile(K.optimizers.SGD(1.0), 'mse')
  model.fit(*data(outputs=5), batch_size=8, epochs=1, verbose=0)
  kernel = np.array(model.layers[0].kernel)
  assert kernel[0, 0] == -3.0
  assert (np.delete(kernel.ravel(), 0) >= 0).all()


# Errors: exact messages.

def _dense_model():
  return small_model(K)


def test_error_index_out_of_range():
  model = _dense_model()
  with pytest.raises(ValueError) as e:
    tk.lock(model, model.layers[0], 'kernel', np.s_[6, 0])
  name = model.layers[0].name
  assert str(e.value) == (
      'index=(6, 0) does not fit weight %s/kernel of shape [6, 5] (index 6 is '
      'out of bounds for axis 0 with size 6); use a NumPy index within the '
      'shape, such as np.s_[:, 0]' % name)


def test_error_mask_of_wrong_shape():
  model = _dense_model()
  with pytest.raises(ValueError) as e:
    tk.lock(model, model.layers[0], 'kernel', mask=np.ones((5, 6), bool))
  assert str(e.value) == (
      'mask= for weight %s/kernel must be a bool array of shape [6, 5], got '
      'dtype bool and shape [5, 6]; pass a bool NumPy array of exactly that '
      'shape' % model.layers[0].name)


def test_error_neither_index_nor_mask():
  model = _dense_model()
  with pytest.raises(ValueError) as e:
    tk.lock(model, model.layers[0], 'kernel')
  assert str(e.value) == (
      'weight %s/kernel needs index= (a NumPy index such as np.s_[:, 0], or '
      '... for every entry) or mask= (a bool array of shape [6, 5]); got '
      'neither' % model.layers[0].name)


def test_error_layer_not_built():
  layer = K.layers.Dense(3, name='later')
  model = K.Sequential([layer])
  with pytest.raises(ValueError) as e:
    tk.lock(model, layer, 'kernel', ...)
  assert str(e.value) == (
      "layer 'later' is not built yet, so it has no weight 'kernel': build the "
      'model first (model.build(input_shape), or call it on a batch, or give '
      'it an Input) before locking or pruning')


def test_error_non_float_weight():

  class Counter(K.layers.Layer):

    def build(self, input_shape):
      self.count = self.add_weight(name='count', shape=(2,), dtype='int32',
                                   initializer='zeros', trainable=False)

    def call(self, x):
      return x

  layer = Counter(name='counter')
  model = K.Sequential([K.Input((2,)), layer])
  with pytest.raises(ValueError) as e:
    tk.lock(model, layer, 'count', ...)
  assert str(e.value) == ('weight counter/count has dtype int32; only '
                          'floating-point weights can be locked or pruned')


def test_error_unknown_weight_and_bad_value():
  model = _dense_model()
  name = model.layers[0].name
  with pytest.raises(ValueError) as e:
    tk.lock(model, name, 'gamma', ...)
  assert str(e.value) == ("layer %r has no weight 'gamma'; its weights are "
                          "['kernel', 'bias']" % name)
  with pytest.raises(ValueError) as e:
    tk.lock(model, name, 'kernel', ..., value='frozen')
  assert str(e.value) == ("lock value for weight %s/kernel must be 'current', "
                          "'zero', a number or an array, got 'frozen'" % name)


def test_error_layer_of_another_model_or_an_index():
  model = K.Sequential([K.Input((6,)), K.layers.Dense(5, name='hidden'),
                        K.layers.Dense(1, name='out')])
  other = K.Sequential([K.Input((6,)), K.layers.Dense(5, name='hidden')])
  for layer, got in ((other.layers[0], "the Dense 'hidden', which is not in "
                      'it (a layer of another model?)'),
                     (0, '0 (type int)')):
    with pytest.raises(ValueError) as e:
      tk.lock(model, layer, 'kernel', np.s_[:, 0], value='zero')
    assert str(e.value) == (
        'layer must be one of the layers of model %r or its name, got %s; '
        "pass model.layers[i] or one of the names ['hidden', 'out']"
        % (model.name, got))
  assert tk.locked_entries(model) == {} and tk.locked_entries(other) == {}


def test_error_model_that_is_not_a_model():
  with pytest.raises(ValueError) as e:
    tk.lock(None, 'dense', 'kernel', np.s_[:, 0], value='zero')
  assert str(e.value) == ('model must be a Keras model (the one the layer '
                          'trains in), got None (type NoneType)')


def test_a_layer_of_a_nested_model_is_found_by_its_name():
  inner = K.Sequential([K.Input((6,)), K.layers.Dense(5, name='inner_dense')],
                       name='inner')
  x = K.Input((6,))
  model = K.Model(x, K.layers.Dense(1, name='top')(inner(x)))
  tk.lock(model, 'inner_dense', 'kernel', np.s_[:, 0], value='zero')
  assert len(tk.locked_entries(model)) == 1
  np.testing.assert_array_equal(
      inner.layers[0].kernel.numpy()[:, 0], np.zeros(6, np.float32))


def test_error_weight_its_layer_updates_itself():
  model = K.Sequential([K.Input((6,)), K.layers.Dense(4),
                        K.layers.BatchNormalization(name='bn')])
  with pytest.raises(ValueError) as e:
    tk.lock(model, 'bn', 'moving_mean', np.s_[:2], value='zero')
  assert str(e.value) == (
      'weight bn/moving_mean is not trainable: its layer updates it itself '
      '(moving statistics), where no constraint applies, so a lock or mask on '
      "it would not hold; lock or prune the trainable weights ['gamma', "
      "'beta']")
  # A frozen layer's weights: nothing updates them, the lock is written.
  frozen = model.layers[0]
  frozen.trainable = False
  tk.lock(model, frozen, 'kernel', np.s_[0], value=2.0)
  assert np.all(np.asarray(frozen.kernel)[0] == 2.0)


def test_an_array_value_with_an_index_gives_the_indexed_entries():
  # On a square kernel [1..5] also broadcasts to the whole weight (as a
  # row): with an index it is still the column's values.
  model = K.Sequential([K.Input((5,)), K.layers.Dense(5, name='square')])
  tk.lock(model, 'square', 'kernel', np.s_[:, 2], value=[1., 2., 3., 4., 5.])
  kernel = np.asarray(model.layers[0].kernel)
  np.testing.assert_array_equal(kernel[:, 2], [1., 2., 3., 4., 5.])
  # With a mask (alone) the array is the whole weight's.
  rows = np.zeros((5, 5), bool)
  rows[0] = True
  tk.lock(model, 'square', 'kernel', mask=rows, value=np.arange(5.)[None])
  np.testing.assert_array_equal(np.asarray(model.layers[0].kernel)[0],
                                np.arange(5.))
