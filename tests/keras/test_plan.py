"""One plan drives both backends: the graph `Pruning` and the Keras `Pruner`,
given the same hparams and the same weights, update on the same steps and
give the same masks and thresholds."""

import numpy as np
import pytest
import tensorflow as tf

from tests.support.keras_models import keras_module, skip_unless_usable

skip_unless_usable()

import tf1prune  # noqa: E402
import tf1prune.keras as tk  # noqa: E402

K = keras_module()
v1 = tf.compat.v1


def _keras_model(seed):
  """conv (3x3x3x8) -> flatten -> fc1 (128x10) -> fc2 (10x4), TF's init."""
  K.utils.set_random_seed(seed)
  return K.Sequential([
      K.Input((6, 6, 3)),
      K.layers.Conv2D(8, 3, name='conv'),
      K.layers.Flatten(name='flat'),
      K.layers.Dense(10, name='fc1'),
      K.layers.Dense(4, name='fc2')])


def _kernels(model):
  return {'%s/kernel' % l.name: l.kernel.numpy() for l in model.layers
          if hasattr(l, 'kernel')}


def _graph_run(kernels, hparams, steps):
  """Runs `Pruning.conditional_mask_update_op` at each step.

  Returns [(last_update_step, {name: mask}, {name: threshold})] per step.
  """
  with tf.Graph().as_default():
    step = v1.train.get_or_create_global_step()
    records = {}
    for name, value in sorted(kernels.items()):
      layer = name.split('/')[0]
      with v1.variable_scope(layer):
        w = v1.get_variable('kernel', initializer=value)
        tf1prune.apply_mask(w)
    for record in tf1prune.masked_weight_records():
      records[record.name] = record
    p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams),
                         global_step=step)
    update = p.conditional_mask_update_op()
    out = []
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      for s in steps:
        sess.run(v1.assign(step, s))
        sess.run(update)
        last, masks, thresholds = sess.run([
            p.last_update_step,
            {n: r.mask for n, r in records.items()},
            {n: r.threshold for n, r in records.items()}])
        out.append((int(last), {n: m > 0 for n, m in masks.items()},
                    thresholds))
  return out


@pytest.mark.parametrize('hparams', [
    # Global ranking of a filter-pruned conv with an element-pruned fc1, a
    # per-layer target and blocks for fc2.
    'begin_pruning_step=2,end_pruning_step=30,pruning_frequency=4,'
    'sparsity_function_begin_step=2,sparsity_function_end_step=20,'
    'target_sparsity=0.8,granularity_map=[conv:filter],'
    'global_pruning_groups=[conv|fc1],weight_sparsity_map=[fc2:0.5],'
    'block_dims_map=[fc2:2x2]',
    # Per layer: N:M, input channels, histogram thresholds.
    'pruning_frequency=3,sparsity_function_end_step=12,target_sparsity=0.5,'
    'initial_sparsity=0.1,granularity_map=[fc1:2of4,fc2:input_channel],'
    'threshold_method=histogram,nbins=64',
])
def test_same_plan_same_masks_on_a_graph_and_a_keras_model(hparams):
  model = _keras_model(seed=5)
  kernels = _kernels(model)
  steps = list(range(0, 34))
  expected = _graph_run(kernels, hparams, steps)
  pruner = tk.Pruner(model, hparams)
  assert sorted(pruner.weight_names) == sorted(kernels)
  assert pruner.plan.spec == tf1prune.PruningSpec.from_hparams(
      tf1prune.get_pruning_hparams().parse(hparams))
  updated = []
  for s, (last, masks, thresholds) in zip(steps, expected):
    if pruner.step(s):
      updated.append(s)
    assert pruner.last_update_step == last, s
    got = pruner.masks()
    for name in kernels:
      np.testing.assert_array_equal(got[name], masks[name],
                                    err_msg='%s at step %d' % (name, s))
      assert pruner.thresholds[name] == np.float32(thresholds[name]), (name, s)
  assert len(updated) >= 3
  final = pruner.masks()
  assert any(0 < m.mean() < 1 for m in final.values())
  for layer in model.layers:
    if hasattr(layer, 'kernel'):
      name = '%s/kernel' % layer.name
      np.testing.assert_array_equal(layer.kernel.numpy(),
                                    np.where(final[name], kernels[name], 0))


def test_same_plan_same_masks_with_a_given_sparsity_and_decay():
  # One update with threshold_decay and a given sparsity (not the schedule):
  # per-layer targets are scaled the same way by both.
  hparams = ('target_sparsity=0.6,threshold_decay=0.5,'
             'weight_sparsity_map=[fc1:0.9,conv:0.3]')
  model = _keras_model(seed=6)
  kernels = _kernels(model)
  with tf.Graph().as_default():
    step = v1.train.get_or_create_global_step()
    for name, value in sorted(kernels.items()):
      with v1.variable_scope(name.split('/')[0]):
        tf1prune.apply_mask(v1.get_variable('kernel', initializer=value))
    p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams),
                         global_step=step, sparsity=tf.constant(0.4))
    update = p.mask_update_op()
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      sess.run(update)
      expected = {r.name: sess.run(r.mask) > 0
                  for r in tf1prune.masked_weight_records()}
  pruner = tk.Pruner(model, hparams)
  pruner.update(sparsity=0.4)
  for name, mask in expected.items():
    np.testing.assert_array_equal(pruner.masks()[name], mask, err_msg=name)
  # NumPy: the k-th largest |w| at each weight's sparsity, averaged with the
  # old threshold 0 (decay 0.5); every |w| at or above it is kept.
  for name, sparsity in (('conv/kernel', 0.4 * 0.3 / 0.6),
                         ('fc1/kernel', 0.4 * 0.9 / 0.6), ('fc2/kernel', 0.4)):
    scores = np.abs(kernels[name]).ravel()
    keep = scores.size - int(np.round(scores.size * sparsity))
    threshold = np.float32(0.5) * np.sort(scores)[::-1][keep - 1]
    np.testing.assert_array_equal(expected[name].ravel(), scores >= threshold,
                                  err_msg=name)
    assert expected[name].sum() > keep
