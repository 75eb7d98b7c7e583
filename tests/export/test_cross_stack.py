"""GraphDefs that library calls return load and run on the other TF stack."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support.graphs import run_graph_def, run_in_process

def _filter_pruned_checkpoint(train_dir):
  """A conv net with half of conv1's filters pruned, saved in `train_dir`."""
  step = tf.train.get_or_create_global_step()
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  bias = tf.constant_initializer(0.25)
  net = tf1prune.masked_conv2d(x, 8, 3, biases_initializer=bias,
                               scope='conv1')
  net = tf1prune.masked_conv2d(net, 6, 3, biases_initializer=bias,
                               scope='conv2')
  net = tf.reshape(net, [-1, 8 * 8 * 6])
  tf1prune.masked_fully_connected(net, 4, activation_fn=None, scope='logits')
  hparams = tf1prune.get_pruning_hparams().parse(
      'granularity_map=[conv1:filter]')
  pruning = tf1prune.Pruning(hparams, global_step=step,
                             sparsity=tf.constant(0.5))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(pruning.mask_update_op())
    tf.train.Saver().save(sess, os.path.join(train_dir, 'model.ckpt'),
                          global_step=step)


@pytest.mark.parametrize('objective', ['flops', 'params'])
def test_library_graph_defs_made_here_run_under_the_other_tf(
    objective, tmp_path, other_python):
  train_dir = str(tmp_path / 'train')
  _filter_pruned_checkpoint(train_dir)
  frozen = tf1prune.graph_def_from_checkpoint(train_dir, ['logits/BiasAdd'])
  stripped = tf1prune.strip_pruning_vars_fn(frozen, ['logits/BiasAdd'])
  shrunk, report = tf1prune.shrink_graph_def(stripped, ['logits/BiasAdd'],
                                             objective=objective)
  assert report.layers[0].outputs_after == 4
  # conv2 pads: the shrunk graph has the border map added with its bias
  # (flops), or the extra ones channel (params).
  if objective == 'flops':
    assert any(n.name.endswith('/shrink_map/add') for n in shrunk.node)
  else:
    assert any(n.op == 'Fill' for n in shrunk.node)
  feed = np.random.RandomState(0).randn(2, 8, 8, 3).astype(np.float32)
  got = run_in_process(other_python, [frozen, stripped, shrunk], feed,
                       str(tmp_path), 'logits/BiasAdd:0')
  expected = run_graph_def(frozen, feed, 'logits/BiasAdd:0')
  for there in got:
    np.testing.assert_allclose(there, expected, rtol=0,
                               atol=1e-5 * np.abs(expected).max())
