"""GraphDefs that library calls return load and run on the other TF stack."""

import os
import subprocess

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune

_RUN = '''
import sys, numpy as np, tensorflow.compat.v1 as tf
tf.disable_eager_execution()
outputs = []
for path in sys.argv[2:]:
  graph_def = tf.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  with tf.Graph().as_default():
    tf.import_graph_def(graph_def, name='')
    with tf.Session() as sess:
      outputs.append(sess.run('logits/BiasAdd:0',
                              {'x:0': np.load(sys.argv[1])}))
np.save(sys.argv[1] + '.out.npy', np.stack(outputs))
'''


def _run(graph_def, feed):
  with tf.Graph().as_default():
    tf.import_graph_def(graph_def, name='')
    with tf.Session() as sess:
      return sess.run('logits/BiasAdd:0', {'x:0': feed})


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
  paths = []
  for name, graph_def in (('frozen', frozen), ('stripped', stripped),
                          ('shrunk', shrunk)):
    paths.append(str(tmp_path / (name + '.pb')))
    with open(paths[-1], 'wb') as f:
      f.write(graph_def.SerializeToString())
  np.save(str(tmp_path / 'x.npy'), feed)
  subprocess.check_call(
      [other_python, '-c', _RUN, str(tmp_path / 'x.npy')] + paths,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  got = np.load(str(tmp_path / 'x.npy.out.npy'))
  expected = _run(frozen, feed)
  for there in got:
    np.testing.assert_allclose(there, expected, rtol=0,
                               atol=1e-5 * np.abs(expected).max())
