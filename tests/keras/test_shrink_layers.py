"""The layers keras.applications use that the shrink goes through, as the
TF ops of the channel table: zero padding then max pooling of a constant,
nested Sequential and functional blocks, layer norm over the channels (a
stop that blocks its group), Dense on the channels of 4-D tensors,
Rescaling, Normalization, Cropping2D, UpSampling2D, a Conv2D whose groups
are its channels, maps given back by a transposed conv; and what it still
cannot pass is a stop that names the layer. Weights from Keras's own
initializers; outputs equal to 1e-5 of max|y|."""

import logging

import pytest
import tensorflow as tf

from tests.support.keras_models import (keras_module, same_outputs,
                                        skip_unless_usable)

skip_unless_usable()

import tf1prune.keras as tk  # noqa: E402

K = keras_module()
L = K.layers
_KERAS3 = K.__version__.startswith('3.')


def _zero_filters(layer, channels, bias=None):
  """Zeroes output channels of a kernel; `bias`: their bias values."""
  kernel = layer.kernel.numpy()
  kernel[..., list(channels)] = 0.0
  layer.kernel.assign(kernel)
  if bias is not None:
    b = layer.bias.numpy()
    b[list(channels)] = bias
    layer.bias.assign(b)


def _stem(relu=True, c2_activation=None):
  """image -> stem (8 filters; 0..2 empty, bias 0.5, -0.5, 0.5) -> [ReLU]
  -> ZeroPadding2D(1) -> MaxPooling2D(3, 2) -> c2 (3x3, SAME) -> pool ->
  logits."""
  K.utils.set_random_seed(0)
  x = K.Input((16, 16, 3), name='image')
  h = L.Conv2D(8, 3, padding='same', name='stem')(x)
  if relu:
    h = L.ReLU(name='relu')(h)
  h = L.ZeroPadding2D(1, name='pad')(h)
  h = L.MaxPooling2D(3, 2, name='pool')(h)
  h = L.Conv2D(4, 3, padding='same', activation=c2_activation, name='c2')(h)
  y = L.Dense(2, name='logits')(L.GlobalAveragePooling2D(name='gap')(h))
  model = K.Model(x, y)
  _zero_filters(model.get_layer('stem'), [0, 1, 2], [0.5, -0.5, 0.5])
  return model


def test_a_relu_constant_passes_zero_padding_and_max_pooling():
  """max(c, 0) = c over every window with a real position in it: the
  stem's empty filters (relu(0.5), relu(-0.5) = 0) are constants after
  the pool and go; the 3x3 c2 reads 0.5 through a ones channel."""
  model = _stem()
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (16, 16, 3))
  assert report.stops == []
  assert small.get_layer('stem').filters == 5
  assert small.get_layer('c2').kernel.shape[2] == 5 + 1    # the ones channel
  assert 'c2_shrink_ones' in [l.name for l in small.layers]


def test_a_negative_constant_after_zero_padding_and_max_pooling_is_a_map():
  """Without the ReLU, -0.5 padded with zeros and max pooled is 0 in the
  windows that touch the padding: a map. c2 has no activation: the map
  goes in a transposed conv of c2's output size (8x8x4) on a channel of
  ones; with a ReLU it cannot (the map, not the 0.5s), and the stop names
  the pool."""
  model = _stem(relu=False)
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (16, 16, 3))
  assert report.stops == []
  assert small.get_layer('stem').filters == 5
  names = [l.name for l in small.layers]
  assert 'c2_shrink_map' in names
  row = [r for r in report.layers if r.name == 'c2'][0]
  assert row.params_after == (9 * 5 * 4 + 4) + (5 + 1) + 8 * 8 * 4
  assert row.flops_after == 2 * (9 * 5 * 4 * 64 + 5 * 64 + 8 * 8 * 4)
  model = _stem(relu=False, c2_activation='relu')
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (16, 16, 3))
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('stem', 1, 'c2 reads the map that pool makes of a removed constant; '
       'only a layer without an activation takes it')]
  assert small.get_layer('stem').filters == 6


def test_nested_sequential_and_functional_blocks_are_followed():
  K.utils.set_random_seed(0)
  block = K.Sequential([K.Input((8, 8, 3)),
                        L.Conv2D(6, 3, padding='same', name='a'),
                        L.BatchNormalization(name='a_bn'),
                        L.ReLU(name='a_relu')], name='block')
  inner = K.Input((8, 8, 6))
  residual = L.Conv2D(6, 1, name='b')(inner)
  unit = K.Model(inner, L.Add(name='b_add')([inner, residual]), name='unit')
  x = K.Input((8, 8, 3), name='image')
  y = L.Dense(2, name='logits')(L.GlobalAveragePooling2D()(unit(block(x))))
  model = K.Model(x, y)
  _zero_filters(block.get_layer('a'), [1, 4])
  _zero_filters(unit.get_layer('b'), [1, 4])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 8, 3))
  assert report.stops == []
  assert not [l for l in small.layers if getattr(l, 'layers', None)]
  assert (small.get_layer('a').filters, small.get_layer('b').filters) == (4, 4)
  assert small.get_layer('logits').kernel.shape[0] == 4


def _convnext_block():
  """c1 -> LayerNormalization -> Dense 16 (gelu) -> Dense 8 -> + c1: the
  residual stream is normalized over its channels."""
  K.utils.set_random_seed(0)
  x = K.Input((6, 6, 3), name='image')
  c1 = L.Conv2D(8, 1, name='c1')(x)
  h = L.LayerNormalization(epsilon=1e-6, name='ln')(c1)
  h = L.Dense(16, activation='gelu', name='up')(h)
  h = L.Dense(8, name='down')(h)
  h = L.Add(name='add')([c1, h])
  return K.Model(x, L.Dense(2, name='logits')(L.GlobalAveragePooling2D()(h)))


def test_layer_norm_over_the_channels_blocks_its_group_and_stops():
  """The Pruner leaves the normalized stream dense (the norm's mean is
  added to every channel: as a TF graph's layer norm, the group is
  blocked) and prunes the Dense between; the shrink removes those units
  (gelu of the bias, folded into `down`), and keeps emptied stream
  channels: the layer norm mixes them."""
  model = _convnext_block()
  records = []

  class Handler(logging.Handler):

    def emit(self, record):
      records.append(record.getMessage())

  handler = Handler(logging.WARNING)
  old = tf.compat.v1.logging.get_verbosity()
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
  tf.get_logger().addHandler(handler)
  try:
    pruner = tk.Pruner(model, 'granularity_map=[.*:coupled_filter],'
                              'do_not_prune=[logits]')
  finally:
    tf.get_logger().removeHandler(handler)
    tf.compat.v1.logging.set_verbosity(old)
  assert [str(item.group) for item in pruner.coupled_groups()] == [
      '16 channels: up/kernel']
  assert records == [
      'coupled_filter: channel group [8 channels: c1/kernel, down/kernel '
      '(blocked: added to ln/Mean, which no masked weight produces (in '
      'ln/Sub))] is blocked (added to ln/Mean, which no masked weight '
      'produces (in ln/Sub)); its weights stay dense']
  pruner.update(sparsity=0.5)
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 3))
  assert report.stops == []
  assert small.get_layer('up').units == 8
  assert small.get_layer('down').kernel.shape == (8, 8)
  model = _convnext_block()
  _zero_filters(model.get_layer('c1'), [2, 5])
  _zero_filters(model.get_layer('down'), [2, 5])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 3))
  reason = ('read by ln: a Mean over the channel axis mixes the channels: '
            'Mean is not among the ops the shrink passes on that axis')
  assert sorted((s.layer, s.channels, s.reason) for s in report.stops) == [
      ('c1', 2, reason), ('down', 2, reason)]


def test_rescaling_normalization_cropping_upsampling_pass_constants():
  K.utils.set_random_seed(0)
  x = K.Input((8, 8, 3), name='image')
  h = L.Rescaling(1.0 / 255, offset=-0.5, name='rescale')(x)
  h = L.Normalization(mean=[0.1, 0.2, 0.3], variance=[1.0, 2.0, 4.0],
                      name='norm')(h)
  h = L.Conv2D(8, 3, activation='relu', name='a')(h)            # 6x6
  h = L.Cropping2D(((1, 0), (0, 1)), name='crop')(h)          # 5x5
  h = L.UpSampling2D(2, name='up')(h)                          # 10x10
  h = L.Conv2D(4, 1, name='b')(h)
  model = K.Model(x, L.Dense(2, name='logits')(L.Flatten()(h)))
  _zero_filters(model.get_layer('a'), [0, 3, 7], [0.3, 0.2, -1.0])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (8, 8, 3))
  assert report.stops == []
  assert small.get_layer('a').filters == 5
  assert small.get_layer('b').kernel.shape == (1, 1, 5, 4)
  assert [l.name for l in small.layers if '_shrink_' in l.name] == []


def test_a_conv2d_whose_groups_are_its_channels_is_a_depthwise_conv():
  """ConvNeXt's depthwise convs are Conv2D(groups=channels): a removed
  channel takes its filter along, groups shrink with it."""
  K.utils.set_random_seed(0)
  x = K.Input((6, 6, 3), name='image')
  h = L.Conv2D(8, 1, name='c1')(x)
  h = L.Conv2D(8, 3, groups=8, name='dw')(h)              # VALID: constants
  h = L.Conv2D(4, 1, name='c2')(h)
  model = K.Model(x, L.Dense(2, name='logits')(L.Flatten()(h)))
  _zero_filters(model.get_layer('c1'), [1, 6], [0.4, -0.2])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 3))
  assert report.stops == []
  config = small.get_layer('dw').get_config()
  assert (config['groups'], config['filters']) == (6, 6)
  assert small.get_layer('dw').kernel.shape == (3, 3, 1, 6)
  row = [r for r in report.layers if r.name == 'dw'][0]
  assert row.flops_after == 2 * 9 * 6 * 16


def test_a_layer_the_shrink_cannot_pass_is_a_stop_that_names_it():
  K.utils.set_random_seed(0)
  x = K.Input((6, 6, 4), name='image')
  h = L.Conv2D(6, 1, name='c1')(x)
  h = L.Permute((2, 1, 3), name='swap')(h)
  model = K.Model(x, L.Conv2D(2, 1, name='c2')(h))
  _zero_filters(model.get_layer('c1'), [0])
  small, report = tk.shrink_model(model)
  same_outputs(model, small, (6, 6, 4))
  assert [(s.layer, s.channels, s.reason) for s in report.stops] == [
      ('c1', 1, 'read by swap: Permute is not a layer the shrink knows (it '
       'keeps the channels of its inputs)')]


@pytest.mark.skipif(not _KERAS3, reason='Keras 3 names inputs input_layer')
def test_an_automatically_named_input_keeps_its_name():
  x = K.Input((4,))
  model = K.Model(x, L.Dense(3)(L.Dense(5)(x)))
  small, _ = tk.shrink_model(model)
  assert small.layers[0].name == model.layers[0].name
  assert small.layers[0].name.startswith('input_layer')
