"""shrink_preview from a training session equals what strip_pruning_vars
--shrink then reports for its checkpoint (totals and stops)."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import strip_pruning_vars as strip_cli


def _mobile_block_net(rs):
  """A masked 3x3 conv, a masked 1x1 expand, a padded depthwise conv, a
  masked 1x1 project, a mean and logits; coupled filter pruning at 50% with
  the logits left whole. Returns the Pruning."""
  tf.train.get_or_create_global_step()
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  init = tf.random_normal_initializer(seed=1)
  bias = tf.random_uniform_initializer(0.1, 1.0, seed=2)
  net = tf1prune.masked_conv2d(x, 8, 3, stride=2, activation_fn=tf.nn.relu6,
                               weights_initializer=init,
                               biases_initializer=bias, scope='conv0')
  net = tf1prune.masked_conv2d(net, 16, 1, activation_fn=tf.nn.relu6,
                               weights_initializer=init,
                               biases_initializer=bias, scope='expand')
  kernel = tf.get_variable('depthwise/depthwise_weights', [3, 3, 16, 1],
                           initializer=init)
  net = tf.nn.relu6(tf.nn.depthwise_conv2d(net, kernel, [1] * 4, 'SAME') +
                    tf.get_variable('depthwise/biases', [16],
                                    initializer=bias))
  net = tf1prune.masked_conv2d(net, 8, 1, activation_fn=None,
                               weights_initializer=init,
                               biases_initializer=bias, scope='project')
  net = tf.reduce_mean(net, [1, 2])
  tf.identity(tf1prune.masked_fully_connected(
      net, 10, activation_fn=None, scope='logits'), name='y')
  return tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=1,pruning_frequency=1,'
      'granularity_map=[.*:coupled_filter],do_not_prune=[logits]'))


@pytest.mark.parametrize('objective', ['flops', 'params'])
def test_the_preview_is_what_the_strip_tool_then_reports(objective, tmp_path):
  with tf.Graph().as_default():
    pruning = _mobile_block_net(np.random.RandomState(0))
    step = tf.train.get_or_create_global_step()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.assign(step, 1))
      sess.run(pruning.mask_update_op())
      preview = tf1prune.shrink_preview(sess, ['y'], objective=objective)
      assert pruning.shrink_preview(sess, 'y', objective).to_dict() == \
          preview.to_dict()
      tf.train.Saver().save(sess, str(tmp_path / 'model.ckpt'),
                            global_step=step)
  out = tmp_path / 'out'
  strip_cli.main(['--checkpoint_dir', str(tmp_path), '--output_node_names',
                  'y', '--output_dir', str(out), '--shrink',
                  '--shrink_objective', objective, '--report_json',
                  str(tmp_path / 'report.json')])
  with open(str(tmp_path / 'report.json')) as f:
    exported = json.load(f)['shrink']
  expected = preview.to_dict()
  assert exported['totals'] == expected['totals']
  assert exported['stops'] == expected['stops']
  assert exported['layers'] == expected['layers']
  assert expected['totals']['flops_ratio'] < 0.8
  if objective == 'params':
    assert expected['stops']       # the padded map costs more than it saves
    assert {s['node'] for s in expected['stops']} == {'depthwise'}
  else:
    assert expected['stops'] == []


def test_the_preview_hook_writes_the_expected_ratios(tmp_path):
  with tf.Graph().as_default():
    pruning = _mobile_block_net(np.random.RandomState(0))
    step = tf.train.get_or_create_global_step()
    pruning.add_pruning_summaries()
    train = tf.assign_add(step, 1)
    hook = tf1prune.ShrinkPreviewHook(['y'], str(tmp_path), every_n_steps=2)
    with tf.train.MonitoredSession(hooks=[
        tf1prune.PruningHook(pruning), hook]) as sess:
      for _ in range(3):
        sess.run(train)
  scalars = {}
  for name in os.listdir(str(tmp_path)):
    for event in tf.train.summary_iterator(str(tmp_path / name)):
      for value in event.summary.value:
        scalars.setdefault(value.tag, []).append((event.step,
                                                  value.simple_value))
  flops = scalars['model_pruning_summaries/expected_flops_ratio']
  assert [s for s, _ in flops] == [1, 3]
  totals = hook.last_report.to_dict()['totals']
  assert flops[-1][1] == pytest.approx(totals['flops_ratio'], rel=1e-6)
  assert scalars['model_pruning_summaries/expected_params_ratio'][-1][1] == \
      pytest.approx(totals['params_ratio'], rel=1e-6)
  assert totals['flops_ratio'] < 1.0


def test_the_preview_names_an_unknown_output():
  with tf.Graph().as_default():
    _mobile_block_net(np.random.RandomState(0))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      with pytest.raises(ValueError, match=r"\['logit'\] are not in"):
        tf1prune.shrink_preview(sess, ['logit'])


def _batch_norm_net(is_training):
  """Two masked 3x3 convs with tf1prune.batch_norm and relu6, a mean, the
  logits; returns the logits."""
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  init = tf.random_normal_initializer(seed=1)
  params = {'is_training': is_training, 'scale': True}
  net = x
  for scope in ('conv1', 'conv2'):
    net = tf1prune.masked_conv2d(net, 8, 3, activation_fn=tf.nn.relu6,
                                 weights_initializer=init,
                                 normalizer_fn=tf1prune.batch_norm,
                                 normalizer_params=params, scope=scope)
  return tf1prune.masked_fully_connected(
      tf.reduce_mean(net, [1, 2]), 10, activation_fn=None, scope='logits')


def test_the_preview_refuses_training_batch_norms_and_takes_an_inference_copy():
  with tf.Graph().as_default():
    logits = _batch_norm_net(True)
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      inference = _batch_norm_net(False)
    step = tf.train.get_or_create_global_step()
    pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
        'target_sparsity=0.5,sparsity_function_end_step=1,'
        'granularity_map=[.*:coupled_filter],do_not_prune=[logits]'))
    update = pruning.mask_update_op()
    with pytest.raises(tf1prune.TrainingGraphError,
                       match=r"output_node_names \['logits/BiasAdd'\] read 2 "
                             r'batch norms in training form .*e\.g\. '
                             r'conv1/BatchNorm/FusedBatchNormV3 '
                             r'\(FusedBatchNormV3\).*reuse=True'):
      tf1prune.ShrinkPreviewHook([logits.op.name], '/nonexistent').begin()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.assign(step, 1))
      sess.run(update)
      with pytest.raises(tf1prune.TrainingGraphError) as error:
        tf1prune.shrink_preview(sess, [logits.op.name])
      assert [(op.node, op.kind) for op in error.value.ops] == [
          ('conv1/BatchNorm/FusedBatchNormV3', 'batch_norm'),
          ('conv2/BatchNorm/FusedBatchNormV3', 'batch_norm')]
      report = tf1prune.shrink_preview(sess, [inference.op.name])
      masks = dict(zip([w.op.name for w in tf1prune.get_weights()],
                       sess.run(tf1prune.get_masks())))
  kept = [int(masks[name].reshape(-1, 8).any(axis=0).sum())
          for name in ('conv1/weights', 'conv2/weights')]
  assert kept == [4, 4]
  assert [(layer.outputs_before, layer.outputs_after)
          for layer in report.layers] == [(8, 4), (8, 4), (10, 10)]
  assert report.stops == []
