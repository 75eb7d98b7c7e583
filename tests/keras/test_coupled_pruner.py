"""The Keras Pruner prunes coupled channel groups as the graph Pruning does:
the same small net built in both (a residual add, a depthwise conv, a
squeeze-and-excitation gate, a separable conv, a concat), the same weights
(Keras's own initializers) and hparams give the same masks, bit for bit,
and the same warnings."""

import contextlib
import logging

import numpy as np
import pytest
import tensorflow as tf

from tests.support.keras_models import keras_module, skip_unless_usable

skip_unless_usable()

import tf1prune  # noqa: E402
import tf1prune.keras as tk  # noqa: E402

K = keras_module()
L = K.layers
v1 = tf.compat.v1


def _keras_net(seed=0):
  """stem -> b1 -> b2, + stem; depthwise; SE gate; a separable conv and a
  1x1 conv concatenated; head; logits (the model's output)."""
  K.utils.set_random_seed(seed)
  x = K.Input((8, 8, 3), name='image')
  stem = L.Conv2D(8, 3, padding='same', name='stem')(x)
  h = L.Conv2D(4, 1, activation='relu', name='b1')(L.ReLU()(stem))
  h = L.Conv2D(8, 3, padding='same', name='b2')(h)
  h = L.ReLU()(L.Add()([stem, h]))
  h = L.DepthwiseConv2D(3, padding='same', activation='relu', name='dw')(h)
  s = L.GlobalAveragePooling2D()(h)
  s = L.Dense(4, activation='relu', name='se1')(s)
  s = L.Dense(8, activation='sigmoid', name='se2')(s)
  h = L.Multiply()([h, L.Reshape((1, 1, 8))(s)])
  a = L.SeparableConv2D(6, 3, padding='same', activation='relu',
                        name='sep')(h)
  b = L.Conv2D(5, 1, activation='relu', name='c1')(h)
  h = L.Conv2D(10, 1, activation='relu', name='head')(
      L.Concatenate()([a, b, h]))
  y = L.Dense(3, name='logits')(L.GlobalAveragePooling2D()(h))
  return K.Model(x, y)


_GROUPS = [
    ['stem/kernel', 'b2/kernel', 'DW', 'se2/kernel', 'sep/depthwise_kernel'],
    ['b1/kernel'], ['se1/kernel'], ['sep/pointwise_kernel'], ['c1/kernel'],
    ['head/kernel'], ['logits/kernel']]


def _weights(model):
  """{layer/short name: value} of every weight, in the model's order."""
  out = {}
  for layer in model.layers:
    for v in layer.weights:
      out['%s/%s' % (layer.name, v.name.split('/')[-1].split(':')[0])] = \
          v.numpy()
  return out


@contextlib.contextmanager
def _warnings():
  """The messages logged on TensorFlow's logger at WARNING and above."""
  records = []

  class Handler(logging.Handler):

    def emit(self, record):
      records.append(record.getMessage())

  handler = Handler(logging.WARNING)
  old = v1.logging.get_verbosity()
  v1.logging.set_verbosity(v1.logging.WARN)
  tf.get_logger().addHandler(handler)
  try:
    yield records
  finally:
    tf.get_logger().removeHandler(handler)
    v1.logging.set_verbosity(old)


def _graph_masks(values, names, hparams, locks=None, at_step=0):
  """(masks, warnings) of `tf1prune.Pruning` on the graph of the same net:
  the kernels masked in `names`' order, their values `values`, updated at
  global step `at_step`."""
  locks = locks or {}
  with _warnings() as records, tf.Graph().as_default():
    variables = {}
    for name in names + [n for n in values if n not in names]:
      variables[name] = v1.get_variable(name.replace(':', '_'),
                                        initializer=values[name])
    kernels = {}
    for name in names:
      kernels[name] = tf1prune.apply_mask(variables[name], name)
      if name in locks:
        kernels[name] = tf1prune.lock(kernels[name], **locks[name])

    def bias(x, layer):
      return tf.nn.bias_add(x, variables[layer + '/bias'])

    def conv(x, layer, relu=False):
      y = bias(tf.nn.conv2d(x, kernels[layer + '/kernel'], 1, 'SAME'),
               layer)
      return tf.nn.relu(y) if relu else y

    dw_name = [n for n in names if n.startswith('dw/')][0]
    x = v1.placeholder(tf.float32, [2, 8, 8, 3])
    stem = conv(x, 'stem')
    h = conv(conv(tf.nn.relu(stem), 'b1', True), 'b2')
    h = tf.nn.relu(stem + h)
    h = tf.nn.relu(bias(tf.nn.depthwise_conv2d(
        h, kernels[dw_name], [1, 1, 1, 1], 'SAME'), 'dw'))
    s = tf.reduce_mean(h, [1, 2])
    s = tf.nn.relu(bias(tf.matmul(s, kernels['se1/kernel']), 'se1'))
    s = tf.sigmoid(bias(tf.matmul(s, kernels['se2/kernel']), 'se2'))
    h = h * tf.reshape(s, [-1, 1, 1, 8])
    a = tf.nn.depthwise_conv2d(h, kernels['sep/depthwise_kernel'],
                               [1, 1, 1, 1], 'SAME')
    a = tf.nn.relu(bias(tf.nn.conv2d(a, kernels['sep/pointwise_kernel'], 1,
                                     'VALID'), 'sep'))
    b = conv(h, 'c1', True)
    h = conv(tf.concat([a, b, h], 3), 'head', True)
    tf.matmul(tf.reduce_mean(h, [1, 2]), kernels['logits/kernel'])
    step = v1.train.get_or_create_global_step()
    p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams),
                         global_step=step, sparsity=tf.constant(0.5))
    update = p.mask_update_op()
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      sess.run(tf1prune.capture_lock_values_op())
      sess.run(step.assign(at_step))
      sess.run(update)
      masks = dict((r.name, sess.run(r.mask) > 0)
                   for r in tf1prune.masked_weight_records())
  return masks, records


def _keras_masks(model, hparams, locks=None, at_step=0):
  """(masks, warnings) of the Keras `Pruner` at sparsity 0.5, at step
  `at_step`."""
  for name, (index, value) in (locks or {}).items():
    layer, weight = name.split('/', 1)
    tk.lock(model, layer, weight, index, value=value)
  with _warnings() as records:
    pruner = tk.Pruner(model, hparams)
    pruner.update(sparsity=0.5, step=at_step)
  return pruner, records


def _compare(hparams, locks=None, at_step=0):
  model = _keras_net()
  values = _weights(model)
  pruner, keras_warnings = _keras_masks(model, hparams, locks, at_step)
  graph_locks = dict((n, dict(index=i, value=v))
                     for n, (i, v) in (locks or {}).items())
  names = [n for n in values if n.split('/')[-1].endswith('kernel')]
  expected, graph_warnings = _graph_masks(values, names, hparams, graph_locks,
                                          at_step)
  masks = pruner.masks()
  assert sorted(masks) == sorted(
      n for n in expected if n in pruner.weight_names)
  for name, mask in masks.items():
    np.testing.assert_array_equal(mask, expected[name], err_msg=name)
  return model, pruner, masks, keras_warnings, graph_warnings


def _dw(model):
  return 'dw/' + [v.name.split('/')[-1].split(':')[0]
                  for v in model.get_layer('dw').weights
                  if 'kernel' in v.name][0]


def test_the_keras_groups_are_the_graph_groups():
  model = _keras_net()
  pruner = tk.Pruner(model, 'granularity_map=[.*:coupled_filter],'
                            'do_not_prune=[logits]')
  groups = [[m.name for m in item.group.members]
            for item in pruner.coupled_groups()]
  expected = [[_dw(model) if n == 'DW' else n for n in group]
              for group in _GROUPS[:-1]]
  assert groups == expected
  assert [item.group.num_units for item in pruner.coupled_groups()] == [
      8, 4, 4, 6, 5, 10]


@pytest.mark.parametrize('hparams', [
    'granularity_map=[.*:coupled_filter]',
    'granularity_map=[.*:coupled_filter],channel_group_min_channels=6,'
    'channel_group_multiple=4,channel_group_reduction=max,'
    'group_importance=l2',
    'granularity_map=[.*:coupled_filter],channel_group_reduction=mean,'
    'weight_sparsity_map=[b1/kernel:0.75,head/kernel:0.2]',
    'granularity_map=[.*:coupled_filter],do_not_prune=[logits],'
    'global_pruning_groups=[.*]',
    'granularity_map=[^(?!logits).*:coupled_filter,logits:coupled_filter]',
    'granularity_map=[.*:coupled_filter],do_not_prune=[b2]',
    'granularity_map=[^(?!head).*:coupled_filter,head:filter]',
])
def test_same_weights_same_hparams_same_masks_as_the_graph_api(hparams):
  model, pruner, masks, keras_warnings, graph_warnings = _compare(hparams)
  pruned = [n for n, m in masks.items() if not m.all()]
  assert pruned     # each case prunes something
  # The warnings name the same weights for the same reasons; the graph's
  # name the logits' tensor ('logits/...'), the Keras ones its layer.
  assert [w.split(' (nothing reads')[0] for w in keras_warnings] == [
      w.split(' (nothing reads')[0] for w in graph_warnings]
  if 'do_not_prune=[b2]' in hparams:
    assert keras_warnings[0].startswith(
        'coupled_filter: channel group [8 channels: stem/kernel, b2/kernel, '
        '%s, se2/kernel, sep/depthwise_kernel] has members not pruned with '
        'coupled_filter (b2/kernel: do_not_prune or another granularity)'
        % _dw(model))
    assert masks['stem/kernel'].all()
  guarded = any('stay dense: their output channels are the model\'s outputs'
                in w for w in keras_warnings)
  if 'logits/kernel' in masks:     # the model's outputs: dense unless named
    assert masks['logits/kernel'].all() == guarded
  assert guarded == (hparams.startswith('granularity_map=[.*:') and
                     'do_not_prune=[logits]' not in hparams)


def test_a_coupled_group_keeps_the_same_channels_in_every_member():
  _, _, masks, _, _ = _compare('granularity_map=[.*:coupled_filter],'
                               'do_not_prune=[logits]')
  kept = masks['stem/kernel'][0, 0, 0]
  assert kept.sum() == 4
  model = _keras_net()
  dw = _dw(model)
  np.testing.assert_array_equal(masks['b2/kernel'][0, 0, 0], kept)
  np.testing.assert_array_equal(masks['se2/kernel'][0], kept)
  # Depthwise kernels are pruned on their input channels (axis 2).
  np.testing.assert_array_equal(masks[dw][0, 0, :, 0], kept)
  np.testing.assert_array_equal(masks['sep/depthwise_kernel'][0, 0, :, 0],
                                kept)


def test_a_locked_kept_entry_keeps_its_unit_as_in_graph_mode():
  model = _keras_net()
  values = _weights(model)
  # The stem filter that scores lowest (by the sum of the group's l1 norms)
  # is kept by a lock on one of its b2 entries.
  dw = _dw(model)
  scores = sum(np.abs(values[n]).reshape(-1, 8).sum(0) for n in (
      'stem/kernel', 'b2/kernel', 'se2/kernel'))
  scores = scores + np.abs(values[dw]).sum(axis=(0, 1, 3)) + np.abs(
      values['sep/depthwise_kernel']).sum(axis=(0, 1, 3))
  lowest = int(np.argmin(scores))
  locks = {'b2/kernel': (np.s_[0, 0, 0, lowest], 'current')}
  _, _, masks, _, _ = _compare('granularity_map=[.*:coupled_filter],'
                               'do_not_prune=[logits]', locks)
  assert masks['stem/kernel'][0, 0, 0, lowest]
  assert masks['stem/kernel'][0, 0, 0].sum() == 4


def test_filter_pruning_of_depthwise_kernels_says_it_keeps_them(caplog):
  model = _keras_net()
  _, warnings = _keras_masks(model, 'granularity_map=[.*:filter],'
                                    'do_not_prune=[logits]')
  dw = _dw(model)
  assert ('filter: %s, sep/depthwise_kernel are depthwise kernels of one '
          'filter each (depth_multiplier 1), which filter pruning keeps: '
          'they stay dense. coupled_filter prunes them with the channels '
          'they read.' % dw) in warnings


@pytest.mark.parametrize('budget', [
    'flops:0.5', 'params:0.5', 'flops:0.3,budget_criterion=l1',
    'flops:0.5,channel_group_min_channels=3,channel_group_multiple=2',
    'flops:0.4,budget_normalization=max,budget_cost_exponent=1',
    'flops:0.5,budget_normalization=none,do_not_prune=[b1]',
    'flops:0.4,granularity_map=[logits:coupled_filter]',
])
def test_a_budget_gives_the_masks_of_the_graph_api(budget):
  hparams = 'budget=%s,sparsity_function_end_step=4' % budget
  model, pruner, masks, keras_warnings, graph_warnings = _compare(
      hparams, at_step=3)
  assert [w.split(' (nothing reads')[0] for w in keras_warnings] == [
      w.split(' (nothing reads')[0] for w in graph_warnings]
  plan = pruner.budget_plan()
  kept = plan.current()
  assert 0 < kept.sum() < kept.size
  allowed = 1.0 - (1.0 - float(budget.split(',')[0].split(':')[1])) * (
      1.0 - 0.25 ** 3)
  assert pruner.cost_ratio <= allowed


def test_a_budget_keeps_a_locked_unit_as_the_graph_api_does():
  hparams = 'budget=flops:0.3,sparsity_function_end_step=4'
  _, pruner, masks, _, _ = _compare(hparams, at_step=4)
  removed = int(np.flatnonzero(~masks['stem/kernel'][0, 0, 0])[0])
  locks = {'b2/kernel': (np.s_[0, 0, 0, removed], 'current')}
  _, _, masks, _, _ = _compare(hparams, locks, at_step=4)
  assert masks['stem/kernel'][0, 0, 0, removed]
