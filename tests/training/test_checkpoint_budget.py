"""`prune_to_budget` and `prune_checkpoint --budget`: a checkpoint pruned
once to a budget, as its export then costs it."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import prune_checkpoint as cli
from tf1prune.export.checkpoint_prune import CheckpointPruneError
from tf1prune.training.checkpoint_budget import prune_to_budget


def _net():
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  bn = {'normalizer_fn': tf1prune.batch_norm,
        'normalizer_params': {'is_training': False, 'scale': True}}
  a = tf1prune.masked_conv2d(x, 16, 3, scope='a', **bn)
  b = tf1prune.masked_conv2d(a, 16, 3, scope='b', **bn)
  y = tf1prune.masked_fully_connected(tf.reduce_mean(b, [1, 2]), 10,
                                      activation_fn=None, scope='logits')
  return x, tf.identity(y, name='output')


def _checkpoint(directory):
  """Trains the net a step with momentum (slots), saves it."""
  with tf.Graph().as_default():
    x, y = _net()
    labels = tf.placeholder(tf.int64, [None])
    loss = tf.losses.sparse_softmax_cross_entropy(labels, y)
    step = tf.train.get_or_create_global_step()
    train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss, step)
    rs = np.random.RandomState(0)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for var in tf.global_variables():
        if var.op.name.endswith(('gamma', 'beta', 'moving_mean')):
          var.load(rs.uniform(0.5, 1.5, var.shape.as_list()), sess)
      sess.run(train, {x: rs.rand(4, 8, 8, 3), labels: [1, 2, 3, 4]})
      return tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                                   global_step=step)


def _read(prefix):
  reader = tf.train.NewCheckpointReader(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


@pytest.mark.parametrize('budget', ['flops:0.5', 'params:0.6'])
def test_the_pruned_checkpoint_exports_at_the_budget(budget, tmp_path):
  prefix = _checkpoint(str(tmp_path))
  result = prune_to_budget(prefix, str(tmp_path / 'pruned'), budget,
                           'budget_criterion=bn_scale')
  values = _read(result['checkpoint'])
  kind, ratio = budget.split(':')
  before, after = result['budget']['totals'][kind]
  assert after <= float(ratio) * before
  for scope in ('a', 'b'):
    mask = values[scope + '/mask']
    gone = ~mask.reshape(-1, mask.shape[-1]).any(axis=0)
    assert gone.any() and not gone.all()
    assert (values[scope + '/weights'][..., gone] == 0).all()
    assert (values[scope + '/weights/Momentum'][..., gone] == 0).all()
    for name in ('gamma', 'beta'):
      assert (values[scope + '/BatchNorm/' + name][gone] == 0).all()
      assert (values[scope + '/BatchNorm/' + name][~gone] != 0).all()
  assert values['logits/mask'].all()
  # The export, shrunk, costs what the report says, and stops nowhere.
  with tf.Graph().as_default():
    _net()
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, result['checkpoint'])
      shrink = tf1prune.shrink_preview(sess, ['output'])
  assert shrink.stops == []
  assert shrink.to_dict()['totals'][kind + '_after'] == after
  assert shrink.to_dict()['totals'][kind + '_before'] == before


def test_the_command_prunes_to_a_budget_and_prints_the_table(tmp_path,
                                                             capsys):
  prefix = _checkpoint(str(tmp_path))
  out = str(tmp_path / 'pruned')
  assert cli.main(['--checkpoint=' + prefix, '--output_dir=' + out,
                   '--budget=flops:0.5', '--hparams=budget_criterion=l1',
                   '--quiet']) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[-1] == 'wrote %s' % os.path.join(out, 'model.ckpt-1')
  assert lines[-2].startswith('budget flops:0.5: flops x0.5000 now '
                              'allowed, x0.')
  assert any(l.startswith('a/weights [3, 3, 3, 16]: zeros ') for l in lines)


@pytest.mark.parametrize('argv,message', [
    (['--budget=flops:0.5', '--sparsity=a:0.5'],
     '--budget prunes whole channels by itself: give it without --sparsity '
     'and --zero'),
    (['--hparams=budget_criterion=l1', '--sparsity=a:0.5'],
     '--hparams goes with --budget'),
])
def test_bad_flags_are_usage_errors(argv, message, tmp_path, capsys):
  assert cli.main(['--checkpoint=' + str(tmp_path), '--output_dir=' +
                   str(tmp_path / 'out')] + argv) == 2
  assert message in capsys.readouterr().err


def test_taylor_needs_training(tmp_path):
  prefix = _checkpoint(str(tmp_path))
  with pytest.raises(CheckpointPruneError, match='budget_criterion=taylor '
                     'ranks channels by the gradients of training steps'):
    prune_to_budget(prefix, str(tmp_path / 'out'), 'flops:0.5',
                    'budget_criterion=taylor')
  assert not os.path.exists(str(tmp_path / 'out'))


def test_a_budget_needs_the_meta_graph_and_masked_weights(tmp_path):
  prefix = _checkpoint(str(tmp_path))
  os.remove(prefix + '.meta')
  with pytest.raises(CheckpointPruneError, match=r"a budget needs the "
                     r"checkpoint's meta graph .*, and .*model.ckpt-1.meta "
                     r"is missing"):
    prune_to_budget(prefix, str(tmp_path / 'out'), 'flops:0.5')
  with tf.Graph().as_default():
    tf.Variable(tf.ones([3, 3]), name='w')
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      plain = tf.train.Saver().save(sess, str(tmp_path / 'plain' / 'm'))
  with pytest.raises(CheckpointPruneError, match='has no masked weights'):
    prune_to_budget(plain, str(tmp_path / 'out'), 'flops:0.5')


def test_a_budget_that_cannot_be_met_writes_nothing(tmp_path):
  prefix = _checkpoint(str(tmp_path))
  with pytest.raises(CheckpointPruneError, match='budget params:0.01 is below '
                     'what the pruned model can cost'):
    prune_to_budget(prefix, str(tmp_path / 'out'), 'params:0.01')
  assert not os.path.exists(str(tmp_path / 'out'))
