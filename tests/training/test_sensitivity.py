"""`tf1prune.sensitivity`: which channels go for each fraction, the report,
the budget's limits from it, and the `tf1prune_sensitivity` command."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import sensitivity as cli
from tf1prune.training.sensitivity import SensitivityReport, limits


def _net(batch_norm=False):
  x = tf.constant(np.random.RandomState(0).rand(4, 6, 6, 3), tf.float32)
  params = ({'normalizer_fn': tf1prune.batch_norm,
             'normalizer_params': {'is_training': False, 'scale': True}}
            if batch_norm else {})
  a = tf1prune.masked_conv2d(x, 8, 3, scope='a', **params)
  b = tf1prune.masked_conv2d(a, 4, 3, scope='b', **params)
  return tf.reduce_mean(b)


def _gone(mask):
  """The output channels a mask removes."""
  return np.flatnonzero(~mask.reshape(-1, mask.shape[-1]).any(axis=0))


def test_each_fraction_removes_the_weakest_channels_of_one_group():
  _net()
  masks = tf1prune.get_masks()
  seen = []

  def metric(sess):
    values = sess.run(masks)
    seen.append([_gone(m).tolist() for m in values])
    return float(len(seen))

  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    weights = sess.run(tf1prune.get_weights())
    report = tf1prune.sensitivity(sess, metric, fractions=(0.25, 0.5))
    after = sess.run(masks)
  # l2: each weight's norms per channel over their mean, summed over the
  # weights that touch the channel (a's are a's filters and b's input rows).
  def normalized(w, axis):
    norms = np.sqrt((np.moveaxis(w, axis, -1) ** 2).reshape(
        -1, w.shape[axis]).sum(0))
    return norms / norms.mean()
  importance = [normalized(weights[0], 3) + normalized(weights[1], 2),
                normalized(weights[1], 3)]
  weakest = [np.argsort(n, kind='stable') for n in importance]
  assert seen == [
      [[], []],                                         # the baseline
      [sorted(weakest[0][:2].tolist()), []],            # a: 2 of 8 gone
      [sorted(weakest[0][:4].tolist()), []],            # a: 4 of 8
      [[], sorted(weakest[1][:1].tolist())],            # b: 1 of 4
      [[], sorted(weakest[1][:2].tolist())]]            # b: 2 of 4
  assert report.baseline == 1.0 and report.fractions == (0.25, 0.5)
  assert [(r.group, r.weights, r.channels, r.metrics) for r in report.rows] == [
      ('8 channels: a/weights', ('a/weights',), 8, (2.0, 3.0)),
      ('4 channels: b/weights', ('b/weights',), 4, (4.0, 5.0))]
  assert all(m.all() for m in after)     # every mask put back


def test_the_batch_norm_of_a_removed_channel_is_zero_while_measured():
  _net(batch_norm=True)
  gammas = [v for v in tf.global_variables() if v.op.name.endswith('gamma')]
  seen = []
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    before = sess.run(gammas)
    tf1prune.sensitivity(sess, lambda s: seen.append(s.run(gammas)) or 0.0,
                         'budget_criterion=bn_scale', fractions=(0.5,))
    after = sess.run(gammas)
  assert [int((g == 0).sum()) for g in seen[1]] == [4, 0]
  assert [int((g == 0).sum()) for g in seen[2]] == [0, 2]
  for b, a in zip(before, after):
    np.testing.assert_array_equal(a, b)


def test_the_report_saves_loads_and_gives_the_budget_its_limits(tmp_path):
  report = SensitivityReport(0.90, (0.25, 0.5, 0.75), [
      tf1prune.training.sensitivity.SensitivityRow(
          '8 channels: a/weights, c/weights', ('a/weights', 'c/weights'), 8,
          (0.895, 0.88, 0.5)),
      tf1prune.training.sensitivity.SensitivityRow(
          '4 channels: b/weights', ('b/weights',), 4, (0.7, 0.6, 0.5))])
  path = str(tmp_path / 'sensitivity.json')
  report.save(path)
  loaded = SensitivityReport.load(path)
  assert loaded.to_dict() == report.to_dict()
  assert limits(loaded, 0.01) == {'a/weights': 0.25, 'c/weights': 0.25,
                                  'b/weights': 0.0}
  assert limits(loaded, 0.05) == {'a/weights': 0.5, 'c/weights': 0.5,
                                  'b/weights': 0.0}
  text = loaded.format_table().splitlines()
  assert text[0].split() == ['group', 'channels', '25%', 'removed', '50%',
                             'removed', '75%', 'removed']
  assert text[-1].split() == ['baseline', '0.9000']
  with open(path, 'w') as f:
    f.write('{}')
  with pytest.raises(ValueError, match="budget_sensitivity='.*' is not a "
                     "sensitivity report"):
    SensitivityReport.load(path)


def test_a_budget_keeps_what_the_sensitivity_limits(tmp_path):
  _net()
  tf.train.get_or_create_global_step()
  path = str(tmp_path / 's.json')
  SensitivityReport(1.0, (0.25, 0.5, 0.75), [
      tf1prune.training.sensitivity.SensitivityRow(
          '8 channels: a/weights', ('a/weights',), 8, (1.0, 0.9, 0.8))
  ]).save(path)
  pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'budget=params:0.6,budget_sensitivity=%s,budget_max_drop=0.01,'
      'sparsity_function_end_step=1,pruning_frequency=1' % path))
  plan = pruning.budget_plan()
  # a may lose 25% (its metric fell only there by <= 0.01): 6 of 8 stay;
  # b is not in the report: no limit but the least every group keeps, 2.
  assert plan.floors.tolist() == [6, 2]
  update = pruning.mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    kept = [8 - len(_gone(m)) for m in sess.run(tf1prune.get_masks())]
  assert kept[0] >= 6


def _inference_checkpoint(directory):
  """A digits-shaped model with `images` and `logits`, saved with its meta
  graph, as cifar10_example.frozen exports one."""
  with tf.Graph().as_default():
    images = tf.placeholder(tf.float32, [None, 8, 8, 1], name='images')
    net = tf1prune.masked_conv2d(images, 8, 3, scope='conv1')
    net = tf.reduce_mean(net, [1, 2])
    tf.identity(tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                                scope='softmax_linear'),
                name='logits')
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return tf.train.Saver().save(sess, os.path.join(directory, 'model'))


def test_the_command_writes_the_report(tmp_path, capsys):
  prefix = _inference_checkpoint(str(tmp_path))
  assert cli.main(['--checkpoint=' + prefix, '--quiet',
                   '--metric=cifar10_example.frozen:test_accuracy',
                   '--output_dir=' + str(tmp_path), '--fractions=0.5']) == 0
  out = capsys.readouterr().out.splitlines()
  with open(str(tmp_path / 'sensitivity.json')) as f:
    data = json.load(f)
  assert [g['group'] for g in data['groups']] == ['8 channels: conv1/weights']
  assert data['fractions'] == [0.5] and 0.0 <= data['baseline'] <= 1.0
  assert out[0].split()[:3] == ['group', 'channels', '50%']
  assert 'wrote %s' % (tmp_path / 'sensitivity.json') in out


@pytest.mark.parametrize('argv,message', [
    (['--metric=nomodule'], "--metric must look like 'package.module:"
                            "function', got 'nomodule'"),
    (['--metric=json:no_such'], '--metric json:no_such: '),
    (['--metric=json:dumps', '--fractions=a'],
     "--fractions must be numbers in (0, 1), got 'a'"),
])
def test_bad_flags_are_usage_errors(argv, message, tmp_path, capsys):
  assert cli.main(['--checkpoint=' + str(tmp_path)] + argv) == 2
  assert message in capsys.readouterr().err
