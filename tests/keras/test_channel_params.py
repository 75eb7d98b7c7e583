"""The Keras Pruner zeroes a removed channel's bias and batch norm with its
filter (`prune_channel_params`, on with a budget): the channel is exactly 0,
through training too; without the hparam they are left alone."""

import numpy as np
import pytest

from tests.support.keras_models import (bits, keras_module, residual_cnn,
                                        skip_unless_usable)

skip_unless_usable()

from tests.keras import flops_reference  # noqa: E402
import tf1prune.keras as tk  # noqa: E402

K = keras_module()
L = K.layers
COUPLED = 'granularity_map=[.*:coupled_filter]'
# The layer after which each kernel's output channels are read, and its
# batch norm.
_RESIDUAL = {'stem': 'stem_bn', 'b1': 'b1_bn', 'b2': 'b2_bn', 'dw': 'dw_bn',
             'head': 'head_bn'}


def _conv_bn_net():
  """8x8x3 -> conv 'a' (8, bias) -> BN -> ReLU -> conv 'b' (6) -> BN ->
  ReLU -> pool -> Dense 'logits'; random biases and batch norm vectors."""
  K.utils.set_random_seed(3)
  x = K.Input((8, 8, 3))
  h = L.Conv2D(8, 3, padding='same', name='a')(x)
  h = L.ReLU()(L.BatchNormalization(name='a_bn')(h))
  h = L.Conv2D(6, 3, padding='same', name='b')(h)
  h = L.ReLU()(L.BatchNormalization(name='b_bn')(h))
  model = K.Model(x, L.Dense(3, name='logits')(
      L.GlobalAveragePooling2D()(h)))
  rng = np.random.RandomState(4)
  for name in ('a', 'b', 'a_bn', 'b_bn'):
    for variable in model.get_layer(name).weights:
      if len(variable.shape) == 1:
        variable.assign(rng.uniform(0.5, 1.5, variable.shape))
  return model, {'a': 'a_bn', 'b': 'b_bn'}


def _nets():
  return [pytest.param(_conv_bn_net, id='conv_bn'),
          pytest.param(lambda: (residual_cnn(K), _RESIDUAL), id='residual')]


def _vectors(model, pairs):
  """{layer/weight: value} of the biases and batch norm vectors of `pairs`."""
  out = {}
  for layer_name, bn_name in pairs.items():
    for name in (layer_name, bn_name):
      for variable in model.get_layer(name).weights:
        short = variable.name.split('/')[-1].split(':')[0]
        if short in ('bias', 'gamma', 'beta'):
          out['%s/%s' % (name, short)] = variable.numpy()
  return out


def _removed(model, layer_name):
  """bool [C]: the output channels whose filters the layer's kernel lost."""
  layer = model.get_layer(layer_name)
  kernel = [v for v in layer.weights if 'kernel' in v.name][0].numpy()
  if type(layer).__name__ == 'DepthwiseConv2D':
    return ~kernel.any(axis=(0, 1, 3))
  return ~kernel.reshape(-1, kernel.shape[-1]).any(axis=0)


@pytest.mark.parametrize('make', _nets())
def test_a_removed_channel_is_exactly_zero(make):
  model, pairs = make()
  before = _vectors(model, pairs)
  pruner = tk.Pruner(model, COUPLED + ',prune_channel_params=true')
  pruner.update(sparsity=0.5)
  zeroed = dict(pruner.channel_params())
  expected = {}
  for layer_name, bn_name in pairs.items():
    if '%s/bias' % layer_name in before:
      expected['%s/bias' % layer_name] = 'bias'
    expected.update({bn_name + '/gamma': 'scale', bn_name + '/beta': 'offset'})
  assert zeroed == expected
  after = _vectors(model, pairs)
  x = np.random.RandomState(5).randn(2, *model.input_shape[1:]).astype(
      np.float32)
  for layer_name, bn_name in pairs.items():
    removed = _removed(model, layer_name)
    assert 0 < removed.sum() < removed.size, layer_name
    for name in [n for n in after if n.split('/')[0] in (layer_name,
                                                          bn_name)]:
      np.testing.assert_array_equal(after[name][removed], 0.0, err_msg=name)
      np.testing.assert_array_equal(after[name][~removed],
                                    before[name][~removed], err_msg=name)
    out = np.asarray(K.Model(model.inputs,
                             model.get_layer(bn_name).output)(x))
    assert bits(out[..., removed]) == bits(np.zeros_like(out[..., removed]))
    assert (out[..., ~removed] != 0).any(axis=(0, 1, 2)).all()


def test_the_zeros_hold_through_training_steps():
  model, pairs = _conv_bn_net()
  pruner = tk.Pruner(model, COUPLED + ',prune_channel_params=true,'
                            'sparsity_function_end_step=1,pruning_frequency=1')
  model.compile(K.optimizers.SGD(0.1, momentum=0.9), 'mse')
  x = np.random.RandomState(6).randn(8, 8, 8, 3).astype(np.float32)
  y = np.random.RandomState(7).randn(8, 3).astype(np.float32)
  model.fit(x, y, batch_size=2, epochs=2, verbose=0,
            callbacks=[tk.PruningCallback(pruner)])
  assert pruner.last_update_step == 8
  after = _vectors(model, pairs)
  for layer_name, bn_name in pairs.items():
    removed = _removed(model, layer_name)
    assert removed.sum() == removed.size // 2
    for name in ('%s/bias' % layer_name, bn_name + '/gamma',
                 bn_name + '/beta'):
      assert bits(after[name][removed]) == bits(
          np.zeros(int(removed.sum()), np.float32)), name


@pytest.mark.parametrize('hparams', [COUPLED, 'granularity_map=[a:filter]'])
def test_without_the_hparam_and_a_budget_they_are_left_alone(hparams):
  model, pairs = _conv_bn_net()
  before = _vectors(model, pairs)
  pruner = tk.Pruner(model, hparams)
  pruner.update(sparsity=0.5)
  assert pruner.channel_params() == []
  assert _removed(model, 'a').sum() == 4
  after = _vectors(model, pairs)
  for name in before:
    assert bits(after[name]) == bits(before[name]), name


def test_filter_pruning_zeroes_them_too():
  model, pairs = _conv_bn_net()
  pruner = tk.Pruner(model, 'granularity_map=[a:filter],'
                            'prune_channel_params=true')
  pruner.update(sparsity=0.5)
  assert dict(pruner.channel_params()) == {
      'a/bias': 'bias', 'a_bn/gamma': 'scale', 'a_bn/beta': 'offset'}
  removed = _removed(model, 'a')
  assert removed.sum() == 4
  for name, value in _vectors(model, {'a': 'a_bn'}).items():
    np.testing.assert_array_equal(value[removed], 0.0, err_msg=name)


@pytest.mark.parametrize('name', ['MobileNetV3Small', 'EfficientNetB0'])
def test_keras_applications_shrink_to_the_ideal_flops_of_the_mask(name):
  K.utils.set_random_seed(0)
  model = getattr(K.applications, name)(
      weights=None, input_shape=(32, 32, 3), classes=4,
      classifier_activation=None)
  pruner = tk.Pruner(model, COUPLED + ',prune_channel_params=true')
  pruner.update(sparsity=0.5)
  assert pruner.channel_params()
  small, report = tk.shrink_model(model)
  positive = np.random.RandomState(2).uniform(
      200, 255, (2, 32, 32, 3)).astype('float32')
  ideal = flops_reference.ideal_flops(model, positive)
  assert ideal < 0.75 * report.flops_before
  assert report.flops_after == ideal
  assert report.stops == []
  assert report.check and all(row.ok for row in report.check)
