"""Drop-in fidelity with contrib's model_pruning, on both stacks.

Tests that compare with real contrib run on TF 1.15 only (contrib is gone on
TF 2.x); the rest checks tf1prune's side on both stacks.
"""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

import tf1prune
from tf1prune.cli import strip_pruning_vars as strip_cli
from tests.support.graphs import read_graph_def, run_graph_def


def _contrib():
  """contrib's pruning and layers modules, or skip (they exist on TF 1.15)."""
  try:
    from tensorflow.contrib.model_pruning.python import pruning  # pylint: disable=g-import-not-at-top
    from tensorflow.contrib.model_pruning.python.layers import layers  # pylint: disable=g-import-not-at-top
  except ImportError:
    pytest.skip('contrib exists only on TF 1.15: the TF 2.x run checks our side')
  return pruning, layers


def _op_names(graph):
  return {(op.name, op.type) for op in graph.get_operations()}


# Contrib's CIFAR-10 example's model (cifar10_pruning.inference), scaled down:
# same scopes, same calls, 8x8 images.
def _cifar10_inference(pruning, images, batch):
  def variable(name, shape, stddev):
    with tf.device('/cpu:0'):
      return tf.get_variable(name, shape, tf.float32,
                             tf.truncated_normal_initializer(stddev=stddev))

  def biases(shape, value):
    with tf.device('/cpu:0'):
      return tf.get_variable('biases', shape, tf.float32,
                             tf.constant_initializer(value))

  with tf.variable_scope('conv1') as scope:
    kernel = variable('weights', [5, 5, 3, 8], 5e-2)
    conv = tf.nn.conv2d(images, pruning.apply_mask(kernel, scope),
                        [1, 1, 1, 1], padding='SAME')
    conv1 = tf.nn.relu(tf.nn.bias_add(conv, biases([8], 0.0)), name=scope.name)
  pool1 = tf.nn.max_pool(conv1, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                         padding='SAME', name='pool1')
  norm1 = tf.nn.lrn(pool1, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75,
                    name='norm1')
  with tf.variable_scope('conv2') as scope:
    kernel = variable('weights', [5, 5, 8, 8], 5e-2)
    conv = tf.nn.conv2d(norm1, pruning.apply_mask(kernel, scope),
                        [1, 1, 1, 1], padding='SAME')
    conv2 = tf.nn.relu(tf.nn.bias_add(conv, biases([8], 0.1)), name=scope.name)
  pool2 = tf.nn.max_pool(conv2, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                         padding='SAME', name='pool2')
  with tf.variable_scope('local3') as scope:
    reshape = tf.reshape(pool2, [batch, -1])
    weights = variable('weights', [reshape.get_shape().as_list()[1], 16], 0.04)
    local3 = tf.nn.relu(tf.matmul(reshape, pruning.apply_mask(weights, scope)) +
                        biases([16], 0.1), name=scope.name)
  with tf.variable_scope('softmax_linear') as scope:
    weights = variable('weights', [16, 10], 1 / 16.0)
    return tf.add(tf.matmul(local3, pruning.apply_mask(weights, scope)),
                  biases([10], 0.0), name=scope.name)


def _images(batch=2):
  return tf.constant(np.linspace(-1, 1, batch * 8 * 8 * 3).reshape(
      batch, 8, 8, 3), tf.float32)


# A scope-level partitioner.

def test_apply_mask_in_a_partitioned_scope_prunes_the_whole_weight():
  # contrib's testPartitionedVariableMasking, through the public API.
  with tf.variable_scope('', partitioner=tf.variable_axis_size_partitioner(40)):
    weights = tf.get_variable('weights',
                              initializer=tf.linspace(1.0, 100.0, 100))
    masked = tf1prune.apply_mask(weights, scope=tf.get_variable_scope())
  tf.train.get_or_create_global_step()
  update = tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
  assert [v.op.name for v in tf1prune.get_masks()] == ['mask']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    got = sess.run(masked)
  np.testing.assert_array_equal(got, np.where(np.arange(1, 101) > 50,
                                              np.arange(1, 101), 0))


def test_masked_fully_connected_in_a_partitioned_scope():
  with tf.variable_scope('model', partitioner=tf.fixed_size_partitioner(2)):
    y = tf1prune.masked_fully_connected(tf.ones([2, 4]), 6,
                                        activation_fn=None)
  assert [v.op.name for v in tf1prune.get_masks()] == [
      'model/fully_connected/mask']
  weights = tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf1prune.get_masks()[0].assign(np.eye(4, 6)))
    got = sess.run(y)
    parts = sess.run([w for w in weights if 'weights' in w.op.name])
  kernel = np.concatenate(parts, 0)
  np.testing.assert_allclose(got, np.ones([2, 4]).dot(kernel * np.eye(4, 6)),
                             rtol=1e-6)


def test_partitioned_scope_checkpoints_restore_both_ways(tmp_path):
  pruning, _ = _contrib()
  mask_value = (np.arange(100) % 3 == 0).astype(np.float32)
  for writer, reader in ((pruning, tf1prune), (tf1prune, pruning)):
    path = str(tmp_path / writer.__name__.replace('.', '_'))
    for lib in (writer, reader):
      with tf.Graph().as_default():
        with tf.variable_scope('', partitioner=tf.fixed_size_partitioner(4)):
          weights = tf.get_variable('weights',
                                    initializer=tf.linspace(1.0, 100.0, 100))
          masked = lib.apply_mask(weights, scope=tf.get_variable_scope())
        saver = tf.train.Saver()
        with tf.Session() as sess:
          if lib is writer:
            sess.run(tf.global_variables_initializer())
            mask = tf.get_collection('masks')[0]
            if isinstance(mask, tf.Variable):
              sess.run(mask.assign(mask_value))
            else:  # contrib's mask is partitioned like the weight
              sess.run([part.assign(piece) for part, piece in zip(
                  mask, np.split(mask_value, 4))])
            saver.save(sess, path)
          else:
            saver.restore(sess, path)
            np.testing.assert_array_equal(
                sess.run(masked), np.linspace(1, 100, 100) * mask_value)


# pruning_scope renames nothing.

def _tutorial_model(images):
  with tf.variable_scope('conv1') as scope:
    kernel = tf.get_variable('weights', [3, 3, 3, 4])
    conv = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], padding='SAME')
    net = tf.nn.relu(conv, name=scope.name)
  net = slim.conv2d(net, 4, 3, scope='conv2')
  with tf.variable_scope('softmax_linear') as scope:
    weights = tf.get_variable('weights', [8 * 8 * 4, 10])
    return tf.add(tf.matmul(slim.flatten(net), weights), 1.0, name=scope.name)


def test_pruning_scope_changes_no_op_name_of_the_model():
  graphs = []
  for patched in (False, True):
    with tf.Graph().as_default() as graph:
      if patched:
        with tf1prune.pruning_scope():
          logits = _tutorial_model(_images())
      else:
        logits = _tutorial_model(_images())
    graphs.append((graph, logits))
  (plain, plain_logits), (patched, patched_logits) = graphs
  assert patched_logits.op.name == plain_logits.op.name == (
      'softmax_linear/softmax_linear')
  # Every op of the model keeps its name and type; the only ops that go are
  # the TF 2.x reads of the raw weights the model no longer reads.
  gone = {(n, t) for n, t in _op_names(plain) - _op_names(patched)}
  assert all(t == 'ReadVariableOp' for _, t in gone), gone
  added = {n for n, _ in _op_names(patched) - _op_names(plain)}
  assert all(n.split('/')[1] in ('mask', 'threshold', 'weights')
             for n in added), added
  assert patched.get_operation_by_name('conv1/conv1').type == 'Relu'


# contrib's op names.

def test_cifar10_example_model_has_contribs_output_name():
  logits = _cifar10_inference(tf1prune, _images(), 2)
  assert logits.op.name == 'softmax_linear/softmax_linear_2'


def test_cifar10_example_op_names_equal_contribs():
  pruning, _ = _contrib()
  graphs = []
  for lib in (pruning, tf1prune):
    with tf.Graph().as_default() as graph:
      _cifar10_inference(lib, _images(), 2)
    graphs.append(graph)
  assert _op_names(graphs[0]) == _op_names(graphs[1])


def test_apply_mask_op_names_equal_contribs():
  pruning, _ = _contrib()
  graphs = []
  for lib in (pruning, tf1prune):
    with tf.Graph().as_default() as graph:
      with tf.variable_scope('a') as scope:
        w = tf.get_variable('weights', [4, 3])
        lib.apply_mask(w, scope)
        lib.apply_mask(tf.get_variable('w2', [3]), 'b')
        lib.apply_mask(tf.get_variable('w3', [3]), scope.name)
        tf.identity(w, name='a')
        tf.identity(w, name='b')
    graphs.append(graph)
  assert _op_names(graphs[0]) == _op_names(graphs[1])


@pytest.mark.parametrize('layer', ['conv', 'fc'])
def test_layer_op_and_variable_names_equal_contribs(layer):
  _, layers = _contrib()
  graphs = []
  for lib in (layers, tf1prune):
    with tf.Graph().as_default() as graph:
      if layer == 'conv':
        net = lib.masked_conv2d(_images(), 4, 3, scope='conv1')
        lib.masked_conv2d(net, 4, 3, stride=2, padding='VALID')
      else:
        net = lib.masked_fully_connected(tf.ones([2, 5]), 3, scope='fc1')
        lib.masked_fully_connected(net, 3)
        lib.masked_fully_connected(tf.ones([2, 4, 5]), 3)
    graphs.append(graph)
  assert _op_names(graphs[0]) == _op_names(graphs[1])
  assert ({v.op.name for v in graphs[0].get_collection('variables')} ==
          {v.op.name for v in graphs[1].get_collection('variables')})


@pytest.mark.parametrize('cell', ['MaskedBasicLSTMCell', 'MaskedLSTMCell'])
@pytest.mark.parametrize('kind', ['dynamic', 'static'])
def test_lstm_cell_op_and_variable_names_equal_contribs(cell, kind):
  _contrib()
  from tensorflow.contrib.model_pruning.python.layers import rnn_cells  # pylint: disable=g-import-not-at-top
  graphs = []
  for lib in (rnn_cells, tf1prune):
    with tf.Graph().as_default() as graph:
      x = tf.zeros([2, 3, 3])
      if kind == 'static':
        tf.nn.static_rnn(getattr(lib, cell)(4), tf.unstack(x, axis=1),
                         dtype=tf.float32)
      else:
        tf.nn.dynamic_rnn(getattr(lib, cell)(4), x, dtype=tf.float32)
    graphs.append(graph)
  # The masked kernel is computed once outside the while loop in tf1prune
  # (contrib: at every step), so only the loop's Enter ops differ.
  ops = [{o for o in _op_names(g) if o[1] != 'Enter'} for g in graphs]
  assert ops[0] == ops[1]
  assert ([v.op.name for v in graphs[0].get_collection('variables')] ==
          [v.op.name for v in graphs[1].get_collection('variables')])


def _save_cifar10_checkpoint(directory):
  logits = _cifar10_inference(tf1prune, tf.placeholder_with_default(
      _images(), [2, 8, 8, 3], name='images'), 2)
  tf.train.get_or_create_global_step()
  update = tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    expected = sess.run(logits)
    tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'))
  return expected


def test_contribs_readme_strip_command_works_on_a_tf1prune_graph(tmp_path,
                                                                 capsys):
  expected = _save_cifar10_checkpoint(str(tmp_path))
  status = strip_cli.main([
      '--checkpoint_dir=%s' % tmp_path,
      '--output_node_names=softmax_linear/softmax_linear_2',
      '--output_dir=%s' % (tmp_path / 'out'), '--filename=pruning_stripped.pb'])
  assert status == 0, capsys.readouterr().err
  graph_def = read_graph_def(str(tmp_path / 'out' / 'pruning_stripped.pb'))
  assert not [n.name for n in graph_def.node
              if n.name.endswith(('/mask', '/threshold'))]
  assert {n.op for n in graph_def.node
          if n.name.endswith('masked_weight')} == {'Const'}  # weight * mask
  got = run_graph_def(graph_def, None, 'softmax_linear/softmax_linear_2:0')
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


# Thresholds of the weight's dtype.

@pytest.mark.parametrize('dtype', [tf.float16, tf.float32, tf.float64])
def test_threshold_has_the_weight_dtype_and_pruning_runs(dtype):
  values = np.arange(1, 21).reshape(4, 5)
  weights = tf.get_variable('fc/weights', initializer=tf.constant(values, dtype))
  with tf.variable_scope('fc'):
    masked = tf1prune.apply_mask(weights)
  tf.train.get_or_create_global_step()
  spec = tf1prune.get_pruning_hparams().parse('threshold_decay=0.5')
  update = tf1prune.Pruning(spec, sparsity=tf.constant(0.75)).mask_update_op()
  threshold = tf1prune.get_thresholds()[0]
  assert threshold.dtype.base_dtype == dtype
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    got, t = sess.run([masked, threshold])
  # The threshold used is 0.5 * 0 (old) + 0.5 * 16 (the top-25% cut) = 8.
  assert t == 8.0
  np.testing.assert_array_equal(got, np.where(values >= 8, values, 0))


def _dtype_graph(lib, layers=None):
  """fc16 (float16) and fc64 (float64) masked weights, built by `lib`."""
  masked = []
  for name, dtype in (('fc16', tf.float16), ('fc64', tf.float64)):
    with tf.variable_scope(name) as scope:
      w = tf.get_variable('weights', initializer=tf.constant(
          np.arange(1, 13).reshape(3, 4), dtype))
      masked.append(lib.apply_mask(w, scope))
  return masked


def test_float16_float64_checkpoints_restore_between_contrib_and_tf1prune(
    tmp_path):
  pruning, _ = _contrib()
  mask = (np.arange(12).reshape(3, 4) % 2).astype(np.float32)
  for writer, reader in ((pruning, tf1prune), (tf1prune, pruning)):
    path = str(tmp_path / writer.__name__.replace('.', '_'))
    for lib in (writer, reader):
      with tf.Graph().as_default():
        masked = _dtype_graph(lib)
        masks, thresholds = (tf.get_collection('masks'),
                             tf.get_collection('thresholds'))
        assert [t.dtype.base_dtype for t in thresholds] == [tf.float16,
                                                             tf.float64]
        saver = tf.train.Saver()
        with tf.Session() as sess:
          if lib is writer:
            sess.run(tf.global_variables_initializer())
            sess.run([m.assign(mask.astype(m.dtype.base_dtype.as_numpy_dtype))
                      for m in masks] +
                     [t.assign(2.5) for t in thresholds])
            saver.save(sess, path)
          else:
            saver.restore(sess, path)
            for value in sess.run(masked):
              np.testing.assert_array_equal(
                  value, np.arange(1, 13).reshape(3, 4) * mask)
            assert sess.run(thresholds) == [2.5, 2.5]


# The strip tool's defaults and its error for an unknown node.

def test_strip_defaults_are_contribs():
  args = strip_cli.parse_args(['--checkpoint_dir=d', '--output_node_names=y'])
  assert (args.output_dir, args.filename) == ('/tmp', 'pruning_stripped.pb')
  args = strip_cli.parse_args(['--checkpoint_dir=d', '--output_node_names=y',
                               '--output_dir=/x', '--filename=sub/m.pb'])
  assert (args.output_dir, args.filename) == ('/x/sub', 'm.pb')
  args = strip_cli.parse_args(['--checkpoint_dir=d', '--output_node_names=y',
                               '--output_dir=/x', '--filename=/abs/m.pb'])
  assert (args.output_dir, args.filename) == ('/abs', 'm.pb')


def test_strip_writes_into_a_directory_given_in_filename(tmp_path, capsys):
  _save_cifar10_checkpoint(str(tmp_path))
  assert strip_cli.main([
      '--checkpoint_dir', str(tmp_path),
      '--output_node_names=softmax_linear/softmax_linear_2',
      '--output_dir', str(tmp_path), '--filename', 'export/model.pb']) == 0
  assert os.path.getsize(str(tmp_path / 'export' / 'model.pb')) > 0
  capsys.readouterr()


def test_unknown_output_node_lists_the_nearest_names(tmp_path, capsys):
  _save_cifar10_checkpoint(str(tmp_path))
  assert strip_cli.main([
      '--checkpoint_dir', str(tmp_path),
      '--output_node_names=softmax_linear/softmax_linear_3',
      '--output_dir', str(tmp_path / 'out')]) == 1
  err = capsys.readouterr().err
  assert "'softmax_linear/softmax_linear_3' not found" in err
  assert ('nearest existing names: softmax_linear/softmax_linear_2' in err), err
  assert not os.path.exists(str(tmp_path / 'out'))
