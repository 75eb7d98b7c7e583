"""tf1prune.keras.shrink_model: emptied filters physically removed, same outputs.

Models get weights from Keras's own initializers; filters are emptied by
zeroing them (coupled channels together) or by the Keras `Pruner`. Every
test compares the shrunk model's outputs with the unshrunk one's (to 1e-5 of
max|y|) and its parameters and FLOPs with a NumPy count of the kept channels.
"""

import json

import numpy as np
import pytest

from tests.support.checkout import ROOT
from tests.support.keras_models import (keras_module, same_outputs,
                                        skip_unless_usable)

skip_unless_usable()

import tf1prune.keras as tk  # noqa: E402

K = keras_module()
L = K.layers


def _zero_filters(layer, channels, weight='kernel'):
  """Zeroes output channels of a Dense / Conv2D (and their bias entries)."""
  for variable in layer.weights:
    name = variable.name.split('/')[-1].split(':')[0]
    value = variable.numpy().copy()
    if name in (weight, 'bias'):
      value[..., list(channels)] = 0.0
      variable.assign(value)


def _zeroed(model, zeroed):
  """`model` with the filters {layer name: [channels]} zeroed."""
  for name, channels in zeroed.items():
    _zero_filters(model.get_layer(name), channels)
  return model


def _random_batch_norms(model, seed):
  """Batch norm statistics and shifts away from their initial values."""
  rng = np.random.RandomState(seed)
  for layer in model.layers:
    if type(layer).__name__ == 'BatchNormalization':
      gamma, beta, mean, var = layer.get_weights()
      layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape),
                         rng.uniform(-0.5, 0.5, beta.shape),
                         rng.uniform(-0.3, 0.3, mean.shape),
                         rng.uniform(0.5, 2.0, var.shape)])


def _conv_cost(k, cin, cout, hw, bias=False, bn=False):
  params = k * k * cin * cout + (cout if bias else 0) + (4 * cout if bn else 0)
  return params, 2 * k * k * cin * cout * hw


def _totals(costs):
  return (sum(p for p, _ in costs), sum(f for _, f in costs))


# ---------------------------------------------------------------- ResNet ---

def _resnet(seed=0):
  K.utils.set_random_seed(seed)

  def conv_bn(x, filters, kernel, strides, name, relu=True):
    x = L.Conv2D(filters, kernel, strides=strides, padding='same',
                 use_bias=False, name=name)(x)
    x = L.BatchNormalization(name=name + '_bn')(x)
    return L.ReLU(name=name + '_relu')(x) if relu else x

  inputs = K.Input((8, 8, 3), name='image')
  stem = conv_bn(inputs, 8, 3, 1, 'stem')
  h = conv_bn(stem, 8, 3, 1, 'b1_conv1')
  h = conv_bn(h, 8, 3, 1, 'b1_conv2', relu=False)
  x = L.ReLU(name='b1_out')(L.Add(name='b1_add')([stem, h]))
  h = conv_bn(x, 12, 3, 2, 'b2_conv1')
  h = conv_bn(h, 16, 3, 1, 'b2_conv2', relu=False)
  short = conv_bn(x, 16, 1, 2, 'b2_short', relu=False)
  x = L.ReLU(name='b2_out')(L.Add(name='b2_add')([short, h]))
  x = L.GlobalAveragePooling2D(name='pool')(x)
  return K.Model(inputs, L.Dense(10, name='logits')(x))


_RESNET_ZEROED = {'stem': [1, 4, 6], 'b1_conv2': [1, 4, 6],
                  'b1_conv1': [0, 3], 'b2_conv1': [1, 2, 3, 9],
                  'b2_conv2': [2, 5, 7, 11], 'b2_short': [2, 5, 7, 11]}


def _resnet_cost(stream1, inner1, inner2, stream2):
  """NumPy count: params and FLOPs of the ResNet with these channel counts."""
  costs = [_conv_cost(3, 3, stream1, 64, bn=True),
           _conv_cost(3, stream1, inner1, 64, bn=True),
           _conv_cost(3, inner1, stream1, 64, bn=True),
           _conv_cost(3, stream1, inner2, 16, bn=True),
           _conv_cost(3, inner2, stream2, 16, bn=True),
           _conv_cost(1, stream1, stream2, 16, bn=True),
           (stream2 * 10 + 10, 2 * stream2 * 10)]
  return _totals(costs)


def test_resnet_loses_coupled_filters_and_keeps_its_outputs():
  model = _zeroed(_resnet(), _RESNET_ZEROED)
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 8, 3))
  assert report.stops == []
  assert (report.params_before, report.flops_before) == _resnet_cost(
      8, 8, 12, 16)
  assert (report.params_after, report.flops_after) == _resnet_cost(
      5, 6, 8, 12)
  assert report.params_after == small.count_params()
  assert report.params_before == model.count_params()
  assert small.get_layer('b2_short').filters == 12
  assert tuple(small.get_layer('b1_add').output.shape) == (None, 8, 8, 5)


def test_resnet_with_half_a_residual_group_zeroed_keeps_that_group():
  model = _resnet()
  _zero_filters(model.get_layer('b2_conv2'), [2, 5])   # b2_short keeps them
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 8, 3))
  assert small.get_layer('b2_conv2').filters == 16
  assert [(s.layer, s.channels) for s in report.stops] == [('b2_conv2', 2)]
  assert report.stops[0].reason == (
      'coupled with filters of b2_short that are not empty')
  assert report.params_after == report.params_before


def _trained_resnet():
  model = _zeroed(_resnet(), _RESNET_ZEROED)
  _random_batch_norms(model, 3)

  def shift(name):          # a batch norm's output for a zero input
    gamma, beta, mean, var = model.get_layer(name + '_bn').get_weights()
    eps = model.get_layer(name + '_bn').epsilon
    return beta - gamma * mean / np.sqrt(var + eps)

  relu = lambda v: np.maximum(v, 0.0)
  # Which removed channels are nonzero where a padded 3x3 conv reads them:
  stem = relu(shift('stem'))
  b1_out = relu(stem + shift('b1_conv2'))
  nonzero = {'b1_conv1': stem != 0, 'b2_conv1': b1_out != 0,
             'b1_conv2': relu(shift('b1_conv1')) != 0,
             'b2_conv2': relu(shift('b2_conv1')) != 0}
  readers = {'b1_conv1': 'stem', 'b2_conv1': 'stem', 'b1_conv2': 'b1_conv1',
             'b2_conv2': 'b2_conv1'}
  # {conv: bool per zeroed channel of the layer it reads}
  return model, {conv: nonzero[conv][_RESNET_ZEROED[r]]
                 for conv, r in readers.items()}


def test_resnet_with_trained_batch_norms_keeps_padded_constants_if_asked():
  """fold_borders=False: a removed channel that is a nonzero constant (relu
  of a batch norm's shift) stays where a 3x3 conv pads; the others go, their
  constants folded (stream 2 through the pool into the logits' bias)."""
  model, nonzero = _trained_resnet()
  small, report = tk.shrink_model(model, fold_borders=False)
  same_outputs(model, small, (8, 8, 3))
  stopped = {s.layer: s.channels for s in report.stops}
  stream1 = int((nonzero['b1_conv1'] | nonzero['b2_conv1']).sum())
  expected = {'stem': stream1, 'b1_conv2': stream1,
              'b1_conv1': int(nonzero['b1_conv2'].sum()),
              'b2_conv1': int(nonzero['b2_conv2'].sum())}
  assert stopped == {n: c for n, c in expected.items() if c}
  assert 0 < sum(expected.values()) < 12      # some go, some stay
  assert all('pads with zeros' in s.reason for s in report.stops)
  assert small.get_layer('b2_short').filters == 12
  assert (report.params_after, report.flops_after) == _resnet_cost(
      5 + stream1, 6 + expected['b1_conv1'], 8 + expected['b2_conv1'], 12)


def test_resnet_with_trained_batch_norms_shrinks_fully_with_ones_channels():
  """A padded conv reads the removed constants through one extra input
  channel of ones (a 1x1 conv with bias 1, concatenated): its zero padding
  gives the borders exactly."""
  model, nonzero = _trained_resnet()
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 8, 3))
  assert report.stops == []
  params, flops = _resnet_cost(5, 6, 8, 12)
  sizes = {'b1_conv1': (5, 6, 64, 64), 'b1_conv2': (6, 5, 64, 64),
           'b2_conv1': (5, 8, 64, 16), 'b2_conv2': (8, 12, 16, 16)}
  for conv, read in nonzero.items():
    cin, cout, hw_in, hw_out = sizes[conv]
    has_ones = '%s_shrink_ones' % conv in [l.name for l in small.layers]
    assert has_ones == read.any(), conv
    if has_ones:      # the ones conv (cin + 1) and one more input channel
      params += cin + 1 + 9 * cout
      flops += 2 * cin * hw_in + 2 * 9 * cout * hw_out
  assert sum(read.any() for read in nonzero.values()) >= 2
  assert (report.params_after, report.flops_after) == (params, flops)
  assert report.params_after == small.count_params()
  assert json.loads(json.dumps(report.to_dict()))['totals'][
      'params_after'] == params


def test_shrunk_model_saves_and_loads_as_plain_keras(tmp_path):
  model, _ = _trained_resnet()
  small = tk.strip_model(model, shrink=True)
  path = str(tmp_path / ('small.keras' if K.__version__.startswith('3')
                         else 'small.h5'))
  small.save(path)
  loaded = K.models.load_model(path)
  same_outputs(model, loaded, (8, 8, 3))
  assert loaded.count_params() == small.count_params() < model.count_params()


# ------------------------------------------------------ MobileNet v2 style ---

def _mobilenet_v2(seed=0):
  K.utils.set_random_seed(seed)

  def bn_relu6(x, name, relu=True):
    x = L.BatchNormalization(name=name + '_bn')(x)
    return L.ReLU(6.0, name=name + '_relu')(x) if relu else x

  def block(x, expand, out, strides, name):
    h = bn_relu6(L.Conv2D(expand, 1, use_bias=False, name=name + '_expand')(x),
                 name + '_expand')
    if strides == 2:
      h = L.ZeroPadding2D(((0, 1), (0, 1)), name=name + '_pad')(h)
    h = L.DepthwiseConv2D(3, strides=strides, use_bias=False,
                          padding='same' if strides == 1 else 'valid',
                          name=name + '_dw')(h)
    h = bn_relu6(h, name + '_dw')
    h = bn_relu6(L.Conv2D(out, 1, use_bias=False, name=name + '_project')(h),
                 name + '_project', relu=False)
    if strides == 1 and x.shape[-1] == out:
      h = L.Add(name=name + '_add')([x, h])
    return h

  inputs = K.Input((8, 8, 3), name='image')
  x = bn_relu6(L.Conv2D(8, 3, padding='same', use_bias=False,
                        name='stem')(inputs), 'stem')
  x = block(x, 24, 8, 1, 'b1')
  x = block(x, 24, 12, 2, 'b2')
  x = block(x, 36, 12, 1, 'b3')
  x = bn_relu6(L.Conv2D(32, 1, use_bias=False, name='head')(x), 'head')
  x = L.GlobalAveragePooling2D(name='pool')(x)
  return K.Model(inputs, L.Dense(5, name='logits')(x))


_MOBILENET_ZEROED = {'stem': [0, 5], 'b1_project': [0, 5],
                     'b1_expand': list(range(0, 24, 2)),
                     'b2_expand': list(range(0, 24, 3)),
                     'b2_project': [1, 4, 7], 'b3_project': [1, 4, 7],
                     'b3_expand': list(range(0, 36, 2)),
                     'head': list(range(16))}


def _mobilenet_cost(s1, e1, e2, s2, e3, head):
  costs = [_conv_cost(3, 3, s1, 64, bn=True),
           _conv_cost(1, s1, e1, 64, bn=True),
           (9 * e1 + 4 * e1, 2 * 9 * e1 * 64),
           _conv_cost(1, e1, s1, 64, bn=True),
           _conv_cost(1, s1, e2, 64, bn=True),
           (9 * e2 + 4 * e2, 2 * 9 * e2 * 16),
           _conv_cost(1, e2, s2, 16, bn=True),
           _conv_cost(1, s2, e3, 16, bn=True),
           (9 * e3 + 4 * e3, 2 * 9 * e3 * 16),
           _conv_cost(1, e3, s2, 16, bn=True),
           _conv_cost(1, s2, head, 16, bn=True),
           (head * 5 + 5, 2 * head * 5)]
  return _totals(costs)


def test_mobilenet_v2_shrinks_through_depthwise_and_residuals():
  model = _zeroed(_mobilenet_v2(), _MOBILENET_ZEROED)
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 8, 3))
  assert report.stops == []
  assert (report.params_before, report.flops_before) == _mobilenet_cost(
      8, 24, 24, 12, 36, 32)
  assert (report.params_after, report.flops_after) == _mobilenet_cost(
      6, 12, 16, 9, 18, 16)
  assert report.params_after == small.count_params()
  assert small.get_layer('b2_dw').get_config()['depth_multiplier'] == 1


def _trained_mobilenet_v2():
  # Batch norms for which the map of every removed channel still varies
  # after the depthwise conv's batch norm and ReLU6 (some clip a map to a
  # constant, which goes without a border map).
  model = _zeroed(_mobilenet_v2(), _MOBILENET_ZEROED)
  _random_batch_norms(model, 31)
  consts = {}
  for name in ('b1_expand', 'b2_expand', 'b3_expand'):
    gamma, shift, mean, var = model.get_layer(name + '_bn').get_weights()
    eps = model.get_layer(name + '_bn').epsilon
    const = np.clip(shift - gamma * mean / np.sqrt(var + eps), 0, 6)
    consts[name] = const[_MOBILENET_ZEROED[name]]
  return model, consts


def _varies_after_dw(model, block, const, size):
  """Whether the removed expand channels of `block` (constants `const`) vary
  over the positions after its SAME 3x3 depthwise conv, batch norm and
  ReLU6 (NumPy: each position sums the taps inside the image)."""
  kernel = model.get_layer(block + '_dw').get_weights()[0][
      :, :, _MOBILENET_ZEROED[block + '_expand'], 0]           # [3, 3, n]
  inside = np.pad(np.ones((size, size)), 1)
  taps = sum(inside[i:i + size, j:j + size, None] * kernel[i, j]
             for i in range(3) for j in range(3))          # [size, size, n]
  gamma, beta, mean, var = model.get_layer(block + '_dw_bn').get_weights()
  bn = model.get_layer(block + '_dw_bn')
  zeroed = _MOBILENET_ZEROED[block + '_expand']
  y = (const * taps - mean[zeroed]) / np.sqrt(var[zeroed] + bn.epsilon) * \
      gamma[zeroed] + beta[zeroed]
  y = np.clip(y, 0, 6).reshape(-1, len(zeroed))
  return (y != y[0]).any(axis=0)


def test_mobilenet_v2_padded_depthwise_keeps_nonzero_constants_if_asked():
  model, _ = _trained_mobilenet_v2()
  small, report = tk.shrink_model(model, fold_borders=False)
  same_outputs(model, small, (8, 8, 3))
  by_layer = {s.layer: s for s in report.stops}
  # relu6 of the expand layers' batch norm shift is a nonzero constant where
  # the shift is positive; the padded depthwise conv makes it vary, unless
  # its batch norm and ReLU6 clip the map to a constant.
  for name, size in (('b1_expand', 8), ('b3_expand', 4)):
    beta = model.get_layer(name + '_bn').get_weights()
    gamma, shift, mean, var = beta
    eps = model.get_layer(name + '_bn').epsilon
    const = np.clip(shift - gamma * mean / np.sqrt(var + eps), 0, 6)
    zeroed = _MOBILENET_ZEROED[name]
    varies = _varies_after_dw(model, name.split('_')[0], const[zeroed], size)
    nonzero = int(np.count_nonzero((const[zeroed] > 0) & varies))
    assert 0 < nonzero < len(zeroed)
    assert by_layer[name].channels == nonzero
    assert by_layer[name].reason.startswith(
        name.split('_')[0] + '_dw (depthwise) pads with zeros')
    assert small.get_layer(name).filters == 24 + 12 * (name == 'b3_expand') \
        - len(zeroed) + nonzero
  assert small.get_layer('head').filters == 16       # folded into the logits


def test_mobilenet_v2_border_patterns_of_padded_depthwise_are_rebuilt():
  """relu6(shift) of a removed expand channel, through the padded 3x3
  depthwise conv (SAME, or a ZeroPadding2D and VALID), its batch norm and
  ReLU6, reaches the 1x1 project conv as a border pattern: a 3x3 conv on a
  channel of ones adds it exactly."""
  model, consts = _trained_mobilenet_v2()
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 8, 3))
  names = [l.name for l in small.layers]
  for block, expand in (('b1', 24), ('b2', 24), ('b3', 36)):
    assert consts[block + '_expand'].any()
    assert small.get_layer(block + '_expand').filters == expand - len(
        _MOBILENET_ZEROED[block + '_expand'])
    assert block + '_project_shrink_border' in names
  # b2 pads with a ZeroPadding2D before a valid stride-2 depthwise conv: its
  # generator pads the ones the same way.
  assert 'b2_project_shrink_pad0' in names
  assert report.stops == []
  params, flops = _mobilenet_cost(6, 12, 16, 9, 18, 16)
  # A border map: a 1x1 conv of ones on the pattern's input (cin + 1) and a
  # 3x3 conv of it (9 x cout), at the input / output sizes.
  for cin, cout, hw_in, hw_out in ((12, 6, 64, 64), (16, 9, 64, 16),
                                   (18, 9, 16, 16)):
    params += cin + 1 + 9 * cout
    flops += 2 * cin * hw_in + 2 * 9 * cout * hw_out
  added_biases = sum(
      small.get_layer(l.name).filters for l in model.layers
      if type(l).__name__ == 'Conv2D' and not l.use_bias and
      small.get_layer(l.name).use_bias)
  assert (report.params_after, report.flops_after) == (
      params + added_biases, flops)
  assert report.params_after == small.count_params()


# ----------------------------------------------------------------- SE block ---

def _se_net(seed=0):
  K.utils.set_random_seed(seed)
  inputs = K.Input((6, 6, 3), name='image')
  x = L.Conv2D(16, 3, padding='same', use_bias=False, name='conv')(inputs)
  x = L.Activation('swish', name='conv_swish')(
      L.BatchNormalization(name='conv_bn')(x))
  s = L.GlobalAveragePooling2D(name='se_pool')(x)
  s = L.Dense(4, activation='relu', name='se_squeeze')(s)
  s = L.Dense(16, activation='sigmoid', name='se_expand')(s)
  s = L.Reshape((1, 1, 16), name='se_reshape')(s)
  x = L.Multiply(name='se_gate')([x, s])
  x = L.Conv2D(8, 1, name='project')(x)
  x = L.Flatten(name='flatten')(x)
  return K.Model(inputs, L.Dense(3, name='logits')(x))


def test_se_block_gate_and_conv_lose_channels_together():
  model = _se_net()
  gated = [0, 3, 4, 9, 10, 15]
  _zero_filters(model.get_layer('conv'), gated)
  _zero_filters(model.get_layer('se_expand'), gated)
  _zero_filters(model.get_layer('se_squeeze'), [2])
  _zero_filters(model.get_layer('project'), [1, 6])
  _random_batch_norms(model, 7)
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 3))
  assert report.stops == []
  c, q, p = 10, 3, 6
  expected_after = _totals([
      _conv_cost(3, 3, c, 36, bn=True), (c * q + q, 2 * c * q),
      (q * c + c, 2 * q * c), _conv_cost(1, c, p, 36, bias=True),
      (36 * p * 3 + 3, 2 * 36 * p * 3)])
  assert (report.params_after, report.flops_after) == expected_after
  assert tuple(small.get_layer('se_reshape').output.shape) == (None, 1, 1, c)
  assert small.get_layer('logits').kernel.shape[0] == 36 * p


def test_se_gate_zeroed_on_one_side_only_is_a_stop():
  model = _se_net()
  _zero_filters(model.get_layer('conv'), [0, 3])      # se_expand keeps them
  _, report = tk.shrink_model(model)
  assert [(s.layer, s.channels) for s in report.stops] == [('conv', 2)]
  assert report.stops[0].reason == (
      'coupled with filters of se_expand that are not empty')


# ------------------------------------------------ Pruner, Sequential, misc ---

def test_pruner_filter_masks_shrink_a_sequential_model():
  K.utils.set_random_seed(0)
  model = K.Sequential([
      K.Input((10, 10, 2)),
      L.Conv2D(8, 3, activation='relu', bias_initializer='ones', name='c1'),
      L.BatchNormalization(name='bn'),
      L.MaxPooling2D(2, name='pool'),
      L.SeparableConv2D(6, 3, activation='relu', name='sep'),
      L.Flatten(name='flatten'),
      L.Dense(6, activation='tanh', bias_initializer='ones', name='fc'),
      L.Dense(2, name='out')])
  _random_batch_norms(model, 1)
  pruner = tk.Pruner(model, 'target_sparsity=0.5,do_not_prune=[out],'
                     'granularity_map=[c1:filter,sep:filter,fc:filter]')
  pruner.update(sparsity=0.5)
  small = tk.strip_model(model, shrink=True)
  _, report = tk.shrink_model(model)
  same_outputs(model, small, (10, 10, 2))
  kept = {name: int(np.any(pruner.masks()[name + '/' + w].reshape(
      -1, pruner.masks()[name + '/' + w].shape[-1]), axis=0).sum())
      for name, w in (('c1', 'kernel'), ('sep', 'pointwise_kernel'),
                      ('fc', 'kernel'))}
  assert kept == {'c1': 4, 'sep': 3, 'fc': 3}
  c1, sep, fc = kept['c1'], kept['sep'], kept['fc']
  params = (9 * 2 * c1 + c1) + 4 * c1 + (9 * c1 + c1 * sep + sep) + (
      4 * sep * fc + fc) + (fc * 2 + 2)
  flops = 2 * 9 * 2 * c1 * 64 + 2 * (9 * c1 + c1 * sep) * 4 + \
      2 * 4 * sep * fc + 2 * fc * 2
  assert (report.params_after, report.flops_after) == (params, flops)
  assert small.count_params() == params
  assert report.stops == []


def test_model_output_channels_stay_and_report_prints():
  K.utils.set_random_seed(0)
  model = K.Sequential([K.Input((4,)), L.Dense(6, name='a'),
                        L.Dense(3, name='b')])
  _zero_filters(model.get_layer('b'), [1])
  _zero_filters(model.get_layer('a'), [0, 1])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (4,))
  assert small.get_layer('b').units == 3
  assert small.get_layer('a').units == 4
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('b', 1, 'it is a model output')]
  assert str(report).splitlines() == [
      'layer  op     inputs  outputs    params     FLOPs',
      '-------------------------------------------------',
      'a      Dense  4 -> 4   6 -> 4  30 -> 20  48 -> 32',
      'b      Dense  6 -> 4   3 -> 3  21 -> 15  36 -> 24',
      '-------------------------------------------------',
      'total                          51 -> 35  84 -> 56',
      'params x0.686, FLOPs x0.667',
      'kept 1 empty filter(s) of b: it is a model output']
  assert report.to_dict()['totals']['params_after'] == 20 + 15


def test_shared_layer_raises_with_the_fix():
  dense = L.Dense(4, name='shared')
  x = K.Input((4,))
  model = K.Model(x, dense(dense(x)))
  with pytest.raises(ValueError) as e:
    tk.shrink_model(model)
  assert str(e.value) == (
      "layer 'shared' is called more than once (shared layers are not "
      "shrunk); give each call its own layer")


def test_a_fold_borders_that_is_no_bool_raises():
  x = K.Input((4,))
  model = K.Model(x, L.Dense(3, name='a')(x))
  with pytest.raises(TypeError) as e:
    tk.shrink_model(model, fold_borders='no')
  assert str(e.value) == "fold_borders must be True or False, got 'no'"


# ----------------------------------------------------- concat, depthwise x2 ---

def test_concat_and_depth_multiplier_map_channels_at_offsets():
  K.utils.set_random_seed(0)
  inputs = K.Input((6, 6, 4), name='image')
  a = L.Conv2D(6, 1, activation='relu', name='a')(inputs)
  b = L.Conv2D(4, 3, padding='same', activation='relu', name='b')(inputs)
  cat = L.Concatenate(name='cat')([a, b])                  # 10 channels
  d = L.DepthwiseConv2D(3, depth_multiplier=2, name='dw')(cat)   # 20, 4x4
  act = ('hard_swish' if hasattr(K.activations, 'hard_swish') else
         'relu6' if hasattr(K.activations, 'relu6') else 'tanh')
  d = L.Activation(act, name='act')(d)
  e = L.Conv2D(5, 1, name='e')(d)
  y = L.Dense(3, name='logits')(L.GlobalMaxPooling2D(name='pool')(e))
  model = K.Model(inputs, y)
  for layer in (model.get_layer('a'), model.get_layer('b')):
    bias = layer.bias.numpy()
    layer.bias.assign(np.random.RandomState(2).uniform(-1, 1, bias.shape))
  _zero_filters(model.get_layer('a'), [1, 4])
  _zero_filters(model.get_layer('b'), [0])
  kernel = model.get_layer('e').kernel.numpy()
  kernel[..., 2] = 0.0
  model.get_layer('e').kernel.assign(kernel)              # e's filter 2
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 4))
  assert report.stops == []
  # dw is valid-padded: removed constants pass it as constants.
  assert tuple(small.get_layer('cat').output.shape) == (None, 6, 6, 7)
  assert tuple(small.get_layer('dw').output.shape) == (None, 4, 4, 14)
  params = (4 * 4 + 4) + (9 * 4 * 3 + 3) + (9 * 14 + 14) + (14 * 4 + 4) + (
      4 * 3 + 3)
  flops = 2 * (4 * 4 * 36 + 9 * 4 * 3 * 36 + 9 * 14 * 16 + 14 * 4 * 16 +
               4 * 3)
  assert (report.params_after, report.flops_after) == (params, flops)


def test_docs_example_runs():
  """docs/keras.md's "A smaller Keras model" gives the output it shows (on
  Keras 3; tests/keras/test_docs.py runs the page on every stack)."""
  import contextlib
  import io
  import os
  if K.__name__ != 'keras' or not K.__version__.startswith('3'):
    pytest.skip('the docs example uses Keras 3 (import keras)')
  with open(os.path.join(ROOT, 'docs', 'keras.md')) as f:
    text = f.read()
  section = text.split('## A smaller Keras model')[1].split('\n## ')[0]
  code = section.split('```python\n')[1].split('```')[0]
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(code, 'docs/keras.md', 'exec'), {})   # pylint: disable=exec-used
  lines = out.getvalue().splitlines()
  assert lines[-4] == 'params x0.484, FLOPs x0.550'
  assert float(lines[-1].split(': ')[1]) < 1e-5


def test_keras_layer_view_reads_the_one_channel_table():
  """Every Keras layer class and activation the shrink passes stands for a
  row of tf1prune.channels' table; softmax stops there with its reason."""
  from tf1prune.channels import RULES
  from tf1prune.keras.shrink.layer_calls import (ACTIVATION_OPS, KERAS_OPS,
                                                 OP_TYPES)
  from tf1prune.keras.shrink.layer_ops import ACTIVATIONS
  for name, op in list(OP_TYPES.items()) + list(ACTIVATION_OPS.items()):
    assert op in RULES, (name, op)
    assert (RULES[op].kind == 'stop') == (name in ('softmax', 'log_softmax',
                                                   'Softmax'))
  for name, op in KERAS_OPS.items():     # Keras 3 ops: element-wise rows
    steps = ACTIVATIONS.get(op, [[(op,)]]) if op != 'clip' else [
        [('Minimum',), ('Maximum',)]]
    for step in steps[0]:
      assert RULES[step[0]].kind == 'elementwise', (name, op)
  x = K.Input((4,), name='x')
  h = L.Dense(6, name='h')(x)
  y = L.Dense(3, name='y')(L.Activation('softmax', name='sm')(h))
  model = K.Model(x, y)
  _zero_filters(model.get_layer('h'), [2])
  _, report = tk.shrink_model(model)
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('h', 1, 'read by sm: softmax mixes all channels')]


def _expand_convs(model):
  # Keras 3 names them 'block_1_expand', Keras 2's MobileNetV3
  # 'expanded_conv_1/expand'.
  return [l for l in model.layers if type(l).__name__ == 'Conv2D' and
          l.name.replace('/', '_').endswith('_expand')]


def _all_halved_expands_go(model, expands):
  """Shrinks a 32x32 model whose `expands` had half their filters zeroed:
  every one goes, nothing stops, outputs equal."""
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (32, 32, 3))
  assert report.stops == []
  for layer in expands:
    assert small.get_layer(layer.name).filters == layer.filters // 2
  assert report.params_after == small.count_params()
  assert report.flops_after < 0.75 * report.flops_before


def test_keras_applications_mobilenet_v2_with_half_its_expand_filters():
  """Keras's own MobileNetV2 (ZeroPadding2D + VALID depthwise convs for the
  stride-2 blocks, SAME ones elsewhere, ReLU(6.), softmax output), batch
  norms away from their initial values, half of every expand conv's filters
  zeroed: every one goes, nothing stops, outputs equal."""
  K.utils.set_random_seed(0)
  model = K.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35,
                                     weights=None, classes=4)
  _random_batch_norms(model, 10)
  expands = _expand_convs(model)
  for layer in expands:
    _zero_filters(layer, range(0, layer.filters, 2))
  _all_halved_expands_go(model, expands)


# ----------------------------------------------- Keras ops, stops, sizes ---

_KERAS3 = hasattr(K, 'ops')


def _ops():
  """The element-wise ops of this Keras: `keras.ops` (Keras 3 makes each
  call an operation node), else TF functions (Keras 2 and tf_keras wrap
  each call in a TFOpLambda layer that records its numbers and `axis=`)."""
  if _KERAS3:
    return K.ops
  import tensorflow as tf
  return tf


def _conv_op_conv(between, zeroed=(1, 3, 5)):
  """x -> Conv2D c1 (8 filters, biases away from 0) -> `between` -> 3x3
  SAME Conv2D c2; c1's filters `zeroed` emptied."""
  K.utils.set_random_seed(0)
  x = K.Input((6, 6, 3))
  c1 = L.Conv2D(8, 1, bias_initializer=K.initializers.RandomNormal(
      stddev=0.5, seed=2), name='c1')
  y = L.Conv2D(4, 3, padding='same', name='c2')(between(c1(x)))
  return _zeroed(K.Model(x, y), {'c1': list(zeroed)})


def _hard_silu(h):
  if _KERAS3:
    return K.ops.hard_silu(h)
  return h * _ops().nn.relu6(h + 3.0) / 6.0


@pytest.mark.parametrize('name', ['x + 3', '1 - x', '6 / (|x| + 1)',
                                  'maximum(x, 0.5)', 'relu6', 'hard_silu',
                                  'leaky_relu', 'clip', 'hard swish (V3)',
                                  'x * sigmoid(x)', 'cast'])
def test_keras_ops_with_numbers_pass_their_channels(name):
  ops = _ops()
  nn = ops if _KERAS3 else ops.nn
  clip = ops.clip if _KERAS3 else ops.clip_by_value
  between = {
      'x + 3': lambda h: h + 3.0,
      '1 - x': lambda h: 1.0 - h,
      '6 / (|x| + 1)': lambda h: 6.0 / (ops.abs(h) + 1.0),
      'maximum(x, 0.5)': lambda h: ops.maximum(h, 0.5),
      'relu6': nn.relu6,
      'hard_silu': _hard_silu,
      'leaky_relu': lambda h: nn.leaky_relu(h, 0.3),
      'clip': lambda h: clip(h, -1.0, 1.0),
      'hard swish (V3)': lambda h: h * (L.ReLU(6.0)(h + 3.0) * (1.0 / 6.0)),
      'x * sigmoid(x)': lambda h: h * ops.sigmoid(h),
      # Keras 2 records tf.cast's dtype as an argument: no operand.
      'cast': lambda h: ops.cast(h, 'float32' if _KERAS3 else ops.float32),
  }[name]
  model = _conv_op_conv(between)
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 3))
  assert report.stops == []
  assert small.get_layer('c1').filters == 5
  # A removed channel is now the op of 0; where that is not 0, the padded c2
  # reads it through one extra channel of ones.
  removed = float(np.asarray(between(ops.zeros((1, 1, 1, 8))))[0, 0, 0, 1])
  assert small.get_layer('c2').kernel.shape[2] == 5 + (removed != 0.0)


def test_keras_ops_that_mix_or_take_arrays_keep_the_channels():
  ops = _ops()
  softmax = ops.softmax if _KERAS3 else ops.nn.softmax
  mean = ops.mean if _KERAS3 else ops.reduce_mean
  cases = [
      (lambda h: h * np.arange(8, dtype=np.float32),
       'the Keras op Multiply takes an array besides the tensor; only '
       'numbers pass'),
      (softmax, 'the Keras op Softmax is not one the shrink goes through'
       if _KERAS3 else 'the TF op tf.nn.softmax is not one the shrink goes '
       'through'),
      # A squeeze-and-excitation gate of ops: the mean over H, W mixes them.
      (lambda h: h * L.Dense(8, activation='sigmoid', name='g')(
          mean(h, axis=[1, 2]))[:, None, None, :],
       'the Keras op Mean is not one the shrink goes through' if _KERAS3
       else 'the TF op tf.math.reduce_mean is not one the shrink goes '
       'through')]
  for between, reason in cases:
    model = _conv_op_conv(between)
    small, report = tk.shrink_model(model)
    same_outputs(model, small, (6, 6, 3))
    stop, = report.stops
    assert (stop.layer, stop.channels) == ('c1', 3)
    assert stop.reason.startswith('read by ') and stop.reason.endswith(
        ': ' + reason)
    assert small.get_layer('c1').filters == 8


def test_multi_head_attention_called_on_query_and_value_is_a_stop():
  K.utils.set_random_seed(0)
  x = K.Input((10, 16))
  q = L.Dense(16, name='q')(x)
  v = L.Dense(16, name='v')(x)
  h = L.MultiHeadAttention(2, 4, name='mha')(q, v)
  model = _zeroed(K.Model(x, L.Dense(3, name='c')(h)), {'q': [1, 4]})
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (10, 16))
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('q', 2, 'read by mha: MultiHeadAttention is not a layer the shrink '
       'knows (it keeps the channels of its inputs)')]
  assert small.get_layer('q').units == 16


def test_keras_applications_mobilenet_v3_small_through_its_keras_ops():
  """MobileNetV3Small builds its hard sigmoid from Keras ops (`x + 3.0`,
  `* (1 / 6)`; TFOpLambda layers on Keras 2). Half of every expand conv's
  filters zeroed, with the matching filters of the squeeze-and-excitation
  conv that gates them (the gate ties them): every one goes, nothing stops,
  logits equal."""
  K.utils.set_random_seed(0)
  model = K.applications.MobileNetV3Small(
      input_shape=(32, 32, 3), alpha=0.75, weights=None, classes=4,
      classifier_activation=None)
  names = set(l.name for l in model.layers)
  expands = _expand_convs(model)
  assert len(expands) == 10
  for layer in expands:
    half = range(0, layer.filters, 2)
    _zero_filters(layer, half)
    prefix = layer.name[:-len('expand')]
    for gate in ('squeeze_excite_conv_1', 'squeeze_excite/Conv_1'):
      if prefix + gate in names:
        _zero_filters(model.get_layer(prefix + gate), half)
  _all_halved_expands_go(model, expands)


def test_a_depthwise_softmax_keeps_the_channels():
  K.utils.set_random_seed(0)
  x = K.Input((6, 6, 3))
  h = L.Conv2D(6, 1, name='c1')(x)
  h = L.DepthwiseConv2D(3, activation='softmax', name='dw')(h)
  model = _zeroed(K.Model(x, L.Conv2D(4, 1, name='c2')(h)), {'c1': [0, 5]})
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 3))
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('c1', 2, 'the activation of dw: softmax mixes all channels')]


@pytest.mark.skipif(not hasattr(L.Dense, 'enable_lora'),
                    reason='this Keras has no LoRA')
def test_a_lora_layer_keeps_its_channels_and_its_lora_weights():
  # Its base kernel's filters 1 and 4 are zero, not its kernel + a @ b.
  K.utils.set_random_seed(0)
  x = K.Input((6,))
  a = L.Dense(8, activation='relu', name='a')
  model = K.Model(x, L.Dense(3, name='b')(a(x)))
  a.enable_lora(2)
  a.lora_kernel_b.assign(np.random.RandomState(3).randn(2, 8))
  _zero_filters(a, [1, 4])
  from tf1prune.keras.shrink.layer_view import LayerView
  view = LayerView(model)
  assert [view.why(n) for n in view.walk_order() if n.call.layer is a] == [
      'LoRA is enabled on it (its kernel is the kernel plus lora_kernel_a @ '
      'lora_kernel_b)']
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6,))
  assert small.get_layer('a').units == 8 and report.stops == []


def test_a_model_of_any_image_size_shrinks_with_flops_unknown():
  K.utils.set_random_seed(0)
  x = K.Input((None, None, 3))
  h = L.Conv2D(6, 3, activation='relu', name='c1')(x)
  h = L.DepthwiseConv2D(3, padding='same', name='dw')(h)
  model = _zeroed(K.Model(x, L.Conv2D(4, 3, name='c2')(h)), {'c1': [0, 3]})
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (9, 7, 3))
  assert small.get_layer('c1').filters == 4
  assert report.flops_before is None and report.flops_after is None
  assert report.to_dict()['totals']['flops_ratio'] is None
  assert report.params_after == small.count_params()


def test_dict_outputs_stay_a_dict():
  K.utils.set_random_seed(0)
  x = K.Input((6, 6, 3))
  h = L.Conv2D(6, 3, activation='relu', name='c1')(x)
  f = L.Conv2D(4, 3, name='c2')(h)
  logit = L.Dense(2, name='d')(L.Flatten()(f))
  model = _zeroed(K.Model(x, {'feat': f, 'logit': logit}), {'c1': [0, 5]})
  small, _ = tk.shrink_model(model)
  data = np.random.RandomState(1).randn(2, 6, 6, 3).astype(np.float32)
  y, y_small = model(data), small(data)
  assert sorted(y_small) == ['feat', 'logit']
  for key in y:
    np.testing.assert_allclose(np.asarray(y_small[key]), np.asarray(y[key]),
                               rtol=0, atol=1e-5 * float(np.abs(y[key]).max()))
  assert small.get_layer('c1').filters == 4


def _other_conv_cases():
  """(name, layer, input shape, empty filters, FLOPs of the layer)."""
  cases = [
      ('grouped', L.Conv2D(8, 3, groups=2, name='grouped'), (6, 6, 4),
       'a grouped Conv2D (groups=2) is not shrunk', 2 * 4 * 4 * 3 * 3 * 2 * 8)]
  if _KERAS3:     # Keras 2's Conv2D on a CPU runs channels_last only
    cases.append(
        ('first', L.Conv2D(8, 3, data_format='channels_first', name='first'),
         (4, 6, 6), 'a channels_first Conv2D is not shrunk (only '
         'channels_last layers are)', 2 * 4 * 4 * 3 * 3 * 4 * 8))
  return cases


def _flat_model(conv, shape, name, empty=(1, 4, 6)):
  """x -> `conv` (its filters `empty` zeroed) -> Flatten -> Dense fc."""
  K.utils.set_random_seed(0)
  x = K.Input(shape)
  h = L.Flatten()(conv(x))
  model = K.Model(x, L.Dense(2, name='fc')(h))
  axis = -2 if name == 'deconv' else -1
  kernel = conv.kernel.numpy()
  index = [slice(None)] * kernel.ndim
  index[axis] = list(empty)
  kernel[tuple(index)] = 0.0
  conv.kernel.assign(kernel)
  return model, h


def test_other_convolutions_are_stops_with_their_flops_counted():
  """A grouped and a channels_first Conv2D: their empty filters stay, a
  stop names them and why; their FLOPs are 2 x kernel size x output
  positions."""
  for name, conv, shape, reason, flops in _other_conv_cases():
    model, h = _flat_model(conv, shape, name)
    small, report = tk.shrink_model(model)
    same_outputs(model, small, shape)
    assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
        (name, 3, reason)], name
    row = report.layers[0]
    assert (row.name, row.outputs_before, row.outputs_after) == (name, 8, 8)
    assert row.inputs_before == row.inputs_after == 4
    assert row.flops_before == row.flops_after == flops, name
    fc = int(np.prod(h.shape[1:])) * 2 * 2
    assert report.flops_before == report.flops_after == flops + fc


def test_conv1d_and_conv2d_transpose_lose_their_empty_filters():
  """Their empty filters (a transposed conv's kernel is [kh, kw, out, in])
  go with the Dense rows that read them; FLOPs are 2 x kernel size x output
  positions, a transposed conv's x input positions."""
  cases = [
      ('conv1d', L.Conv1D(8, 3, padding='same', name='conv1d'), (16, 4),
       lambda out: 2 * 16 * 3 * 4 * out, 16),
      ('deconv', L.Conv2DTranspose(8, 3, strides=2, padding='same',
                                   name='deconv'), (8, 8, 4),
       lambda out: 2 * 8 * 8 * 3 * 3 * 4 * out, 16 * 16)]
  for name, conv, shape, flops, positions in cases:
    model, _ = _flat_model(conv, shape, name)
    small, report = tk.shrink_model(model)
    same_outputs(model, small, shape)
    assert report.stops == [], name
    row = report.layers[0]
    assert (row.name, row.outputs_before, row.outputs_after) == (name, 8, 5)
    assert (row.flops_before, row.flops_after) == (flops(8), flops(5))
    assert report.flops_after == flops(5) + 2 * positions * 5 * 2
    assert small.get_layer('fc').kernel.shape[0] == positions * 5
    assert report.params_after == small.count_params()


def test_a_removed_constant_whose_ones_channel_costs_more_stays():
  """c1's one empty filter (its bias, 0.7, a constant) read by the padded
  3x3 c2: its ones channel (a 1x1 conv over c1's 7 kept filters, 3x3 taps
  per filter of c2) costs more FLOPs than the filter and c2's rows on it;
  it stays, a stop says so. Three empty filters go (test above)."""
  model = _conv_op_conv(lambda h: h, zeroed=(1,))
  bias = model.get_layer('c1').bias
  bias.assign(np.where(np.arange(8) == 1, 0.7, bias.numpy()))
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 3))
  extra = 2 * (7 * 36 + 9 * 4 * 36)          # ones conv, ones channel
  saved = 2 * 36 * (3 + 9 * 4)              # c1's filter, c2's rows
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('c1', 1, 'c2 pads with zeros: the ones channel that would give it '
       'what the removed constants gave costs more FLOPs (%d) than removing '
       'them saves (%d)' % (extra, saved))]
  assert small.get_layer('c1').filters == 8
  assert report.flops_after == report.flops_before
  assert report.params_after == report.params_before == small.count_params()


def test_a_removed_constant_whose_border_map_costs_more_stays():
  """expand -> BN (shift 0.5) -> ReLU6 -> SAME depthwise -> BN -> ReLU6 ->
  1x1 project, one expand filter empty: the border map of the depthwise
  conv (a 1x1 conv of ones over its 31 kept inputs, a 3x3 conv to the 16
  project filters) costs more FLOPs than that filter, its depthwise taps
  and project's row on it; it stays, and the model is no bigger."""
  K.utils.set_random_seed(0)
  x = K.Input((32, 32, 16))
  h = L.Conv2D(32, 1, name='expand')(x)
  h = L.ReLU(6.)(L.BatchNormalization(name='bn0')(h))
  h = L.DepthwiseConv2D(3, padding='same', name='dw')(h)
  h = L.ReLU(6.)(L.BatchNormalization(name='bn1')(h))
  h = L.Conv2D(16, 1, name='project')(h)
  model = K.Model(x, L.Dense(4, name='out')(L.GlobalAveragePooling2D()(h)))
  bn = model.get_layer('bn0')
  gamma, beta, mean, var = bn.get_weights()
  bn.set_weights([gamma, beta + 0.5, mean, var])
  # bn1's shift keeps the depthwise conv's map above 0, so ReLU6 keeps it
  # a map (clipped to 0 everywhere it would be a constant, which goes).
  bn = model.get_layer('bn1')
  gamma, beta, mean, var = bn.get_weights()
  bn.set_weights([gamma, beta + 1.0, mean, var])
  _zero_filters(model.get_layer('expand'), [0])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (32, 32, 16))
  positions = 32 * 32
  extra = 2 * positions * (31 + 9 * 16)
  saved = 2 * positions * (16 + 9 + 16)     # expand, dw, project
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('expand', 1, 'dw pads with zeros: the border map that would give '
       'project what the removed constants gave costs more FLOPs (%d) than '
       'removing them saves (%d)' % (extra, saved))]
  assert report.flops_after == report.flops_before
  assert report.params_after == report.params_before == small.count_params()


def test_two_padded_convs_reading_one_removed_constant_share_its_saving():
  """c1's empty filter (bias 0.7) is read by two padded 3x3 convs: each
  ones channel (51 FLOPs a position: a 1x1 conv over 15 filters, 9 taps x 4)
  is under the whole saving (73: the filter, 9 x 4 rows of each conv) but
  both together are over it. Each conv gets half the saving: it stays."""
  K.utils.set_random_seed(0)
  x = K.Input((6, 6, 1))
  c1 = L.Conv2D(16, 1, name='c1', activation='relu')
  h = c1(x)
  y = L.Concatenate()([L.Conv2D(4, 3, padding='same', name='c2')(h),
                       L.Conv2D(4, 3, padding='same', name='c3')(h)])
  model = K.Model(x, y)
  kernel, bias = c1.get_weights()
  kernel[..., 1], bias[1] = 0.0, 0.7
  c1.set_weights([kernel, bias])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 1))
  extra, saved = 2 * 36 * 51, 2 * 36 * 73 // 2
  assert [(s.layer, s.reason) for s in report.stops] == [
      ('c1', 'c2 pads with zeros: the ones channel that would give it what '
       'the removed constants gave costs more FLOPs (%d) than removing them '
       'saves (%d)' % (extra, saved))]
  assert report.flops_after == report.flops_before
  assert report.params_after == report.params_before == small.count_params()


def test_a_recurrent_stop_has_no_empty_filters_and_no_conv_flops():
  """An LSTM's unit reads its recurrent kernel and bias too: zero columns
  of its input kernel are no empty filters. A ConvLSTM2D counts 0 FLOPs,
  as other recurrent layers do."""
  K.utils.set_random_seed(0)
  x = K.Input((5, 3))
  lstm = L.LSTM(4, name='lstm')
  model = K.Model(x, L.Dense(2, name='fc')(lstm(x)))
  kernel = lstm.get_weights()[0]
  kernel[:, :2] = 0.0
  lstm.set_weights([kernel] + lstm.get_weights()[1:])
  _, report = tk.shrink_model(model)
  assert [s.layer for s in report.stops] == []
  x = K.Input((2, 6, 6, 1))
  h = L.ConvLSTM2D(2, 3, padding='same', name='clstm')(x)
  model = K.Model(x, L.Dense(2, name='fc')(L.Flatten()(h)))
  _, report = tk.shrink_model(model)
  assert [(r.name, r.flops_before) for r in report.layers] == [
      ('clstm', 0), ('fc', 2 * 72 * 2)]


def test_a_separable_conv1d_keeps_its_empty_filters_with_a_stop():
  K.utils.set_random_seed(0)
  x = K.Input((8, 3))
  conv = L.SeparableConv1D(6, 3, name='c')
  model = K.Model(x, L.Dense(2, name='fc')(L.Flatten()(conv(x))))
  depthwise, pointwise, bias = conv.get_weights()
  pointwise[..., [1, 3, 5]] = 0.0
  conv.set_weights([depthwise, pointwise, bias])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 3))
  assert [(s.layer, s.channels) for s in report.stops] == [('c', 3)]
