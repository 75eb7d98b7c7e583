"""tf1prune.keras pruning and lottery tickets: exact masks, schedule, summaries."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.support.keras_models import (
    bits, data, keras_module, skip_unless_usable, small_model)

skip_unless_usable()

import tf1prune  # noqa: E402
import tf1prune.keras as tk  # noqa: E402

K = keras_module()


def _dense(values, units=None, read=False):
  """A Dense layer of kernel `values`; `read`: another layer reads it, so
  its units are not the model's outputs (which filter pruning keeps)."""
  values = np.asarray(values, np.float32)
  layers = [K.Input((values.shape[0],)),
            K.layers.Dense(values.shape[1], use_bias=False)]
  model = K.Sequential(layers + [K.layers.Dense(1)] * read)
  model.layers[0].kernel.assign(values)
  return model


def _graph_mask(values, hparams, sparsity):
  """The mask tf1prune.Pruning (graph mode) gives the same weight."""
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    w = tf.compat.v1.get_variable('layer/kernel', initializer=values)
    tf1prune.apply_mask(w, 'layer')
    p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams),
                         global_step=step, sparsity=tf.constant(sparsity))
    update = p.mask_update_op()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(update)
      return sess.run(tf1prune.get_masks()[0]) > 0


def test_weights_1_to_100_at_half_keep_exactly_the_50_largest():
  values = np.arange(1., 101.).reshape(10, 10)
  model = _dense(values)
  pruner = tk.Pruner(model)
  thresholds = pruner.update(sparsity=0.5)
  kernel = model.layers[0].kernel.numpy()
  np.testing.assert_array_equal(kernel, np.where(values > 50, values, 0))
  assert thresholds[pruner.weight_names[0]] == 51.0


def test_ties_are_kept_in_row_major_order():
  model = _dense(np.ones((4, 5)))
  tk.Pruner(model).update(sparsity=0.7)     # keep 20 - 14 = 6
  kernel = model.layers[0].kernel.numpy().ravel()
  np.testing.assert_array_equal(kernel, [1.] * 6 + [0.] * 14)


@pytest.mark.parametrize('hparams', [
    'block_height=2,block_width=3',
    'block_height=2,block_width=2,block_pooling_function=MAX',
    'granularity_map=[kernel:filter]',
    'granularity_map=[kernel:input_channel]',
    'granularity_map=[kernel:2of4]',
    'threshold_method=histogram',
])
def test_masks_equal_the_graph_api_masks(hparams):
  rng = np.random.RandomState(3)
  values = rng.normal(size=(8, 6)).astype(np.float32)
  values[2, 3] = values[5, 1]      # a tie
  model = _dense(values, read=True)
  pruner = tk.Pruner(model, hparams, weights=[(model.layers[0], 'kernel')])
  pruner.update(sparsity=0.6)
  expected = _graph_mask(values, hparams, 0.6)
  np.testing.assert_array_equal(pruner.masks()[pruner.weight_names[0]],
                                expected)
  np.testing.assert_array_equal(model.layers[0].kernel.numpy(),
                                np.where(expected, values, 0))


def test_conv_filter_granularity_equals_the_graph_api():
  rng = np.random.RandomState(4)
  model = K.Sequential([K.Input((6, 6, 3)), K.layers.Conv2D(8, 3),
                        K.layers.Flatten(), K.layers.Dense(1)])
  values = rng.normal(size=(3, 3, 3, 8)).astype(np.float32)
  model.layers[0].kernel.assign(values)
  pruner = tk.Pruner(model, 'granularity_map=[kernel:filter]',
                     weights=[(model.layers[0], 'kernel')])
  pruner.update(sparsity=0.5)
  expected = _graph_mask(values, 'granularity_map=[kernel:filter]', 0.5)
  np.testing.assert_array_equal(pruner.masks()[pruner.weight_names[0]],
                                expected)
  assert expected[0, 0, 0].sum() == 4


def test_weight_sparsity_map_and_do_not_prune_use_layer_slash_weight_names():
  model = small_model(K)
  first, second = [l.name for l in model.layers]
  pruner = tk.Pruner(model, 'weight_sparsity_map=[%s/kernel:0.8],'
                            'do_not_prune=[%s]' % (first, second))
  assert pruner.weight_names == ['%s/kernel' % first]
  pruner.update(step=100)
  assert np.count_nonzero(model.layers[0].kernel.numpy()) == 30 - 24
  assert np.count_nonzero(model.layers[1].kernel.numpy()) == 15


def test_global_pruning_groups_rank_two_layers_together():
  # Layer a holds 1..8, layer b 9..16: at 0.5 over the group the 8 smallest
  # of all 16 go, which are all of a's (per layer, each would keep half).
  model = K.Sequential([K.Input((2,)),
                        K.layers.Dense(4, use_bias=False, name='a'),
                        K.layers.Dense(2, use_bias=False, name='b')])
  model.get_layer('a').kernel.assign(np.arange(1., 9.).reshape(2, 4))
  model.get_layer('b').kernel.assign(np.arange(9., 17.).reshape(4, 2))
  tk.Pruner(model, 'global_pruning_groups=[.*kernel]').update(sparsity=0.5)
  assert not model.get_layer('a').kernel.numpy().any()
  np.testing.assert_array_equal(model.get_layer('b').kernel.numpy(),
                                np.arange(9., 17.).reshape(4, 2))


def test_step_follows_the_graph_predicate_and_schedule():
  model = _dense(np.arange(1., 101.).reshape(10, 10))
  pruner = tk.Pruner(model, 'begin_pruning_step=5,end_pruning_step=40,'
                            'pruning_frequency=10,sparsity_function_end_step=30')
  done = [s for s in range(0, 60) if pruner.step(s)]
  assert done == [10, 20, 30, 40]
  keep = 100 - int(round(100 * pruner.sparsity_at(40)))
  assert np.count_nonzero(model.layers[0].kernel.numpy()) == keep == 50


def test_callback_prunes_in_fit_keeps_pruned_entries_zero_and_writes_summaries(
    tmp_path):
  model = small_model(K)
  model.compile(K.optimizers.Adam(0.05), 'mse')
  pruner = tk.Pruner(model, 'pruning_frequency=2,sparsity_function_end_step=8,'
                            'target_sparsity=0.6')
  log_dir = str(tmp_path / 'logs')
  callbacks = [tk.PruningCallback(pruner, log_dir=log_dir)]
  if _has_tensorboard():
    callbacks.append(K.callbacks.TensorBoard(log_dir))
  model.fit(*data(), batch_size=8, epochs=3, verbose=0, callbacks=callbacks)
  assert pruner.last_update_step == 12
  for name, mask in pruner.masks().items():
    layer = model.get_layer(name.split('/')[0])
    kernel = layer.kernel.numpy()
    assert mask.sum() == mask.size - round(mask.size * 0.6)
    assert bits(kernel[~mask]) == bits(np.zeros(int((~mask).sum()), np.float32))
    assert np.all(kernel[mask] != 0)
  tags = {}
  for path in glob.glob(os.path.join(log_dir, 'train', 'events.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        array = tf.make_ndarray(value.tensor)
        if array.dtype.kind != 'f':
          continue   # Keras 2's TensorBoard also writes the model config.
        tags.setdefault(value.tag, []).append((event.step, float(array)))
  assert tags['model_pruning_summaries/sparsity'][-1] == (12, np.float32(0.6))
  assert tags['model_pruning_summaries/last_mask_update_step'][-1] == (12, 12)
  first = pruner.weight_names[0]
  assert tags['model_pruning_summaries/%s/mask/sparsity' % first][-1] == (
      12, pytest.approx(1 - 12 / 30.))
  if _has_tensorboard():
    assert 'epoch_loss' in tags    # TensorBoard's own scalars, same directory


def _has_tensorboard():
  try:
    import tensorboard  # noqa: F401
    return True
  except ImportError:
    return False


def test_step_in_a_custom_loop():
  model = small_model(K)
  optimizer = K.optimizers.SGD(0.1, momentum=0.9)
  pruner = tk.Pruner(model, 'pruning_frequency=1,sparsity_function_end_step=3')
  x, y = data()
  for _ in range(5):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    pruner.step(int(optimizer.iterations.numpy()))
  assert np.count_nonzero(model.layers[0].kernel.numpy()) == 30 - 15
  assert np.count_nonzero(model.layers[1].kernel.numpy()) == 15 - round(7.5)


def test_locked_entries_keep_their_mask_value():
  model = _dense(np.arange(1., 101.).reshape(10, 10))
  tk.lock(model, model.layers[0], 'kernel', np.s_[0, 0])      # value 1.0
  tk.Pruner(model).update(sparsity=0.5)
  kernel = model.layers[0].kernel.numpy()
  assert kernel[0, 0] == 1.0 and np.count_nonzero(kernel) == 51


def test_pruner_errors():
  with pytest.raises(ValueError) as e:
    tk.Pruner(small_model(K), 'target_sparsity=1.5')
  assert 'target_sparsity' in str(e.value) and '1.5' in str(e.value)
  unbuilt = K.Sequential([K.layers.Dense(3, name='later')])
  with pytest.raises(ValueError) as e:
    tk.Pruner(unbuilt, weights=[('later', 'kernel')])
  assert str(e.value).startswith("layer 'later' is not built yet")
  with pytest.raises(ValueError) as e:
    tk.Pruner(small_model(K), weights=['dense'])
  assert str(e.value) == (
      'weights= must be a list of (layer or layer name, weight name) pairs, '
      "e.g. [('dense', 'kernel')]; got the entry 'dense'")


def test_do_not_prune_entry_matching_no_weight_warns_as_graph_mode(
    tf_warnings):
  inputs = K.Input((8,))
  hidden = K.layers.Dense(8, name='fc')(inputs)
  model = K.Model(inputs, K.layers.Dense(3, name='logits')(hidden))
  tk.Pruner(model, 'do_not_prune=[Logits]')
  assert [m for m in tf_warnings if 'match no masked weight' in m] == [
      "do_not_prune entries ['Logits'] match no masked weight (fc/kernel, "
      'logits/kernel); regexes are case-sensitive: ignoring case, Logits '
      'matches logits/kernel']
  tk.Pruner(model, 'do_not_prune=[logits]')
  assert len([m for m in tf_warnings if 'match no masked weight' in m]) == 1


@pytest.mark.parametrize('sparsity', [1.5, 1.0, -0.1])
def test_update_rejects_a_sparsity_outside_0_to_1(sparsity):
  model = _dense(np.arange(1., 101.).reshape(10, 10))
  pruner = tk.Pruner(model)
  with pytest.raises(ValueError) as e:
    pruner.update(sparsity=sparsity)
  assert str(e.value) == ('sparsity must be in [0, 1), got %r: the fraction of '
                          'each weight to prune, e.g. 0.9' % sparsity)
  assert np.count_nonzero(model.layers[0].kernel.numpy()) == 100


def test_n_of_m_on_inputs_not_a_multiple_of_m_is_an_error_naming_the_weight():
  inputs = K.Input((8, 8, 3))
  hidden = K.layers.Conv2D(8, 3, name='conv1')(inputs)
  model = K.Model(inputs, K.layers.Dense(10)(K.layers.Flatten()(hidden)))
  with pytest.raises(ValueError) as e:
    tk.Pruner(model, 'granularity_map=[conv1:2of4]')
  assert str(e.value) == (
      '2:4 sparsity groups axis -2 of conv1/kernel (shape [3, 3, 3, 8]) by 4, '
      'but 3 is not a multiple of 4; use another granularity for this weight')


# Lottery tickets.

def _optimizer_variables(model):
  """Keras 3 and the Keras 2.11+ optimizers: a list; OptimizerV2: a method."""
  variables = model.optimizer.variables
  return list(variables() if callable(variables) else variables)


def test_lottery_rewinds_weights_and_optimizer_state():
  model = small_model(K)
  model.compile(K.optimizers.Adam(0.05), 'mse')
  ticket = tk.LotteryTicket(model)
  ticket.snapshot()
  init = [w.copy() for w in model.get_weights()]
  optimizer_init = [v.numpy().copy() for v in _optimizer_variables(model)]
  model.fit(*data(), batch_size=8, epochs=2, verbose=0)
  trained = model.layers[0].kernel.numpy()
  ticket.prune(0.5)
  ticket.rewind()
  masks = ticket.masks()
  mask = masks['%s/kernel' % model.layers[0].name]
  top = np.abs(trained).ravel().argsort(kind='stable')[::-1][:15]
  expected = np.zeros(30, bool)
  expected[top] = True
  np.testing.assert_array_equal(mask.ravel(), expected)
  kernel = model.layers[0].kernel.numpy()
  assert bits(kernel[mask]) == bits(init[0][mask])
  assert bits(kernel[~mask]) == bits(np.zeros(15, np.float32))
  assert bits(model.layers[0].bias.numpy()) == bits(init[1])
  for variable, value in zip(_optimizer_variables(model), optimizer_init):
    assert bits(variable.numpy()) == bits(value)


def test_lottery_rounds_only_shrink_masks_and_hit_exact_counts():
  model = small_model(K)
  model.compile(K.optimizers.SGD(0.1), 'mse')
  ticket = tk.LotteryTicket(model)
  ticket.snapshot()
  previous = None
  for r in range(1, 4):
    model.fit(*data(), batch_size=8, epochs=1, verbose=0)
    sparsity = tk.round_sparsity(r, 0.4)
    ticket.prune(sparsity)
    ticket.rewind()
    masks = ticket.masks()
    for name, mask in masks.items():
      assert mask.sum() == mask.size - round(mask.size * sparsity)
      if previous is not None:
        assert not (mask & ~previous[name]).any()
    previous = masks


def test_late_rewinding_restores_the_step_k_optimizer_state():
  model = small_model(K)
  model.compile(K.optimizers.SGD(0.1, momentum=0.9), 'mse')
  x, y = data()
  model.fit(x, y, batch_size=8, epochs=1, verbose=0)      # 4 steps
  ticket = tk.LotteryTicket(model)
  ticket.snapshot()
  state = [v.numpy().copy() for v in _optimizer_variables(model)]
  model.fit(x, y, batch_size=8, epochs=2, verbose=0)
  ticket.prune(0.3)
  ticket.rewind()
  assert int(model.optimizer.iterations.numpy()) == 4
  for variable, value in zip(_optimizer_variables(model), state):
    assert bits(variable.numpy()) == bits(value)


def test_rewind_before_snapshot_is_a_clear_error():
  ticket = tk.LotteryTicket(small_model(K))
  with pytest.raises(ValueError) as e:
    ticket.rewind()
  assert str(e.value) == ('LotteryTicket.rewind: no snapshot yet; call '
                          'snapshot() after building the model (or at the '
                          'rewind step)')


def test_weights_sharing_a_short_name_are_named_by_their_path():
  # MultiHeadAttention holds four kernels, Bidirectional two LSTMs' worth.
  K.utils.set_random_seed(2)
  inputs = K.Input((5, 8))
  attention = K.layers.MultiHeadAttention(2, 4, name='mha')(inputs, inputs)
  both = K.layers.Bidirectional(K.layers.LSTM(3), name='bi')(attention)
  model = K.Model(inputs, K.layers.Dense(1, name='head')(both))
  pruner = tk.Pruner(model, 'do_not_prune=[head]')
  kernels = ['mha/%s/kernel' % n for n in ('query', 'key', 'value',
                                           'attention_output')]
  lstms = ['bi/%s_lstm/lstm_cell/kernel' % n for n in ('forward', 'backward')]
  assert pruner.weight_names == kernels + lstms
  pruner.update(sparsity=0.5)
  for name, keep in pruner.masks().items():
    assert keep.mean() == 0.5, name
  variables = {v.name if not hasattr(v, 'path') else v.path: v
               for v in model.weights}
  for name, keep in pruner.masks().items():
    value, = [np.asarray(v) for path, v in variables.items()
              if path.split(':')[0].endswith(name)]
    assert not np.any(value[~keep]) and np.all(value[keep] != 0), name
  with pytest.raises(ValueError) as e:
    tk.lock(model, 'mha', 'kernel', ...)
  assert str(e.value) == (
      "layer 'mha' has 4 weights named 'kernel'; name one by its path below "
      "the layer: ['query/kernel', 'key/kernel', 'value/kernel', "
      "'attention_output/kernel']")
  tk.lock(model, 'mha', 'key/kernel', np.s_[0], value=1.5)
  assert sorted(tk.locked_entries(model)) == ['mha/key/kernel']
