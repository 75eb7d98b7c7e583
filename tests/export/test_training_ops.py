"""No training-mode graph frozen by accident; the inference graph instead.

A tf-slim net with `slim.batch_norm` and `slim.dropout`, trained a few steps
with `is_training=True`: the strip refuses its graph (batch statistics and
dropout's random ops would make the `.pb` give other outputs per run and per
batch), and `inference_graph_def` / `write_inference_graph` freeze the
same model rebuilt with `is_training=False` with the training checkpoint.
"""

import contextlib
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

import tf1prune
from tf1prune.cli import strip_pruning_vars as strip_cli
from tf1prune.export.training_ops import training_ops
from tests.support.graphs import graph_def_session, read_graph_def

_OUTPUT = 'logits/BiasAdd'
_TF2 = not tf.__version__.startswith('1.')


def _slim_batch_norm():
  """On TF 2.x slim.batch_norm needs slim_compat (docs/exporting.md)."""
  if _TF2:
    return tf1prune.graph.slim_compat.use_tf1prune_batch_norm()
  return contextlib.contextmanager(lambda: (yield))()


def _net(is_training, fused):
  images = tf.placeholder(tf.float32, [None, 8, 8, 3], name='images')
  with _slim_batch_norm(), slim.arg_scope(
      [tf1prune.masked_conv2d], normalizer_fn=slim.batch_norm,
      normalizer_params={'is_training': is_training, 'fused': fused}):
    net = tf1prune.masked_conv2d(images, 8, 3, scope='conv1')
    net = slim.max_pool2d(net, 2)
    net = tf1prune.masked_conv2d(net, 8, 3, scope='conv2')
  net = slim.flatten(net)
  net = slim.dropout(net, 0.5, is_training=is_training, scope='dropout')
  return tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                         scope='logits')


def _images(n):
  return np.random.RandomState(n).rand(n, 8, 8, 3).astype(np.float32)


@pytest.fixture(scope='module', params=[True, False], ids=['fused', 'moments'])
def train_dir(request, tmp_path_factory):
  """A checkpoint of the net trained 3 steps in training mode, pruned 50%."""
  directory = str(tmp_path_factory.mktemp('train'))
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    logits = _net(True, request.param)
    labels = tf.constant(np.arange(4) % 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    step = tf.train.get_or_create_global_step()
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
      train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
          loss, global_step=step)
    prune = tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for _ in range(3):
        sess.run(train_op, {'images:0': _images(4)})
      sess.run(prune)
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                            global_step=step)
  return directory, request.param


def _run_pb(graph_def, *batches):
  """The output for each batch, run one after the other in one session."""
  with graph_def_session(graph_def) as sess:
    outs = [sess.run(_OUTPUT + ':0', {'images:0': b}) for b in batches]
  return outs[0] if len(outs) == 1 else outs


def _reference(train, images):
  """The inference net restored from the checkpoint, run in a session."""
  directory, fused = train
  with tf.Graph().as_default():
    logits = _net(False, fused)
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, tf.train.latest_checkpoint(directory))
      return sess.run(logits, {'images:0': images})


def test_strip_refuses_a_training_graph_and_says_how_to_export(train_dir,
                                                               tmp_path):
  path = str(tmp_path / 'm.pb')
  with pytest.raises(tf1prune.TrainingGraphError) as info:
    tf1prune.strip_checkpoint(train_dir[0], [_OUTPUT], path)
  message = str(info.value)
  assert 'is_training=False' in message
  assert 'inference_graph_def' in message
  assert 'allow_training_ops=True' in message
  kinds = sorted(set(op.kind for op in info.value.ops))
  assert kinds == ['batch_norm', 'random']
  # One batch norm per conv, one random op for the dropout.
  assert sum(op.kind == 'batch_norm' for op in info.value.ops) == 2
  assert [op.op for op in info.value.ops if op.kind == 'random'] == [
      'RandomUniform']
  assert os.listdir(str(tmp_path)) == []
  with pytest.raises(tf1prune.TrainingGraphError):
    tf1prune.graph_def_from_checkpoint(train_dir[0], [_OUTPUT])


def test_allowed_training_graph_is_what_the_check_is_for(train_dir, tmp_path):
  """The kept training ops do make outputs differ per run and per batch."""
  path = str(tmp_path / 'm.pb')
  tf1prune.strip_checkpoint(train_dir[0], [_OUTPUT], path,
                            allow_training_ops=True)
  graph_def = read_graph_def(path)
  assert len(training_ops(graph_def)) == 3
  images = _images(4)
  first, second, alone = _run_pb(graph_def, images, images, images[1:2])
  assert np.abs(first - second).max() > 1e-3
  assert np.abs(first[1:2] - alone).max() > 1e-3


def test_cli_refuses_in_one_line_and_writes_nothing(train_dir, tmp_path,
                                                    capsys):
  out = str(tmp_path / 'export')
  status = strip_cli.main(['--checkpoint_dir=' + train_dir[0],
                           '--output_node_names=' + _OUTPUT,
                           '--output_dir=' + out])
  assert status == 1
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 1
  assert lines[0].startswith('strip_pruning_vars: error: the graph of outputs')
  assert '--allow_training_ops' in lines[0]
  assert not os.path.exists(out)
  status = strip_cli.main(['--checkpoint_dir=' + train_dir[0],
                           '--output_node_names=' + _OUTPUT,
                           '--output_dir=' + out, '--allow_training_ops'])
  assert status == 0
  assert os.listdir(out) == ['pruning_stripped.pb']


def test_inference_graph_def_is_the_restored_inference_net(train_dir):
  graph_def = tf1prune.inference_graph_def(
      lambda: _net(False, train_dir[1]), train_dir[0], [_OUTPUT])
  assert training_ops(graph_def) == []
  ops = set(n.op for n in graph_def.node)
  assert not ops & {'VariableV2', 'VarHandleOp', 'ReadVariableOp'}
  # Masks folded: each masked weight is a constant, no mask is left.
  assert sorted((n.name, n.op) for n in graph_def.node if 'mask' in n.name) == [
      (scope + '/weights/masked_weight', 'Const')
      for scope in ('conv1', 'conv2', 'logits')]
  images = _images(4)
  got = _run_pb(graph_def, images)
  np.testing.assert_allclose(got, _reference(train_dir, images), rtol=1e-5,
                             atol=1e-6)
  # The same images twice, and one image alone, give the same outputs.
  again, alone = _run_pb(graph_def, images, images[1:2])
  np.testing.assert_array_equal(got, again)
  np.testing.assert_allclose(alone, got[1:2], rtol=1e-5, atol=1e-6)


def test_write_inference_graph_streams_the_same_graph(train_dir, tmp_path):
  model_fn = lambda: _net(False, train_dir[1])
  path = str(tmp_path / 'inference.pb')
  report = tf1prune.write_inference_graph(model_fn, train_dir[0], [_OUTPUT],
                                          path)
  assert [layer.name for layer in report.layers] == ['conv1', 'conv2',
                                                     'logits']
  assert [layer.sparsity for layer in report.layers] == [0.5, 0.5, 0.5]
  graph_def = read_graph_def(path)
  expected = tf1prune.inference_graph_def(model_fn, train_dir[0], [_OUTPUT])
  assert graph_def == expected


def test_a_model_fn_still_in_training_mode_is_refused(train_dir, tmp_path):
  with pytest.raises(tf1prune.TrainingGraphError):
    tf1prune.inference_graph_def(lambda: _net(True, train_dir[1]),
                                 train_dir[0], [_OUTPUT])
  path = str(tmp_path / 'training.pb')
  with pytest.raises(tf1prune.TrainingGraphError):
    tf1prune.write_inference_graph(lambda: _net(True, train_dir[1]),
                                   train_dir[0], [_OUTPUT], path)
  assert not os.path.exists(path)
  # An expert keeps them with allow_training_ops, as with the strip.
  tf1prune.write_inference_graph(lambda: _net(True, train_dir[1]),
                                 train_dir[0], [_OUTPUT], path,
                                 allow_training_ops=True)
  assert os.path.getsize(path) > 0


def test_model_fn_must_be_callable(train_dir):
  with pytest.raises(ValueError, match='model_fn must be a function'):
    tf1prune.inference_graph_def(None, train_dir[0], [_OUTPUT])


def test_training_ops_in_function_bodies_are_found():
  @tf.function
  def noisy(x):
    return x + tf.random.uniform(tf.shape(x))

  with tf.Graph().as_default() as g:
    x = tf.placeholder(tf.float32, [2], name='x')
    noisy(x)
  found = training_ops(g.as_graph_def())
  assert [op.op for op in found] == ['RandomUniform']
  assert found[0].node.endswith('/random_uniform/RandomUniform')


def test_stateless_random_ops_and_inference_batch_norm_are_not_listed():
  with tf.Graph().as_default() as g:
    x = tf.placeholder(tf.float32, [1, 4, 4, 2], name='x')
    y, _, _ = tf.nn.fused_batch_norm(x, tf.ones([2]), tf.zeros([2]),
                                     mean=tf.zeros([2]), variance=tf.ones([2]),
                                     is_training=False)
    tf.identity(y + tf.random.stateless_uniform([1, 4, 4, 2], [1, 2]),
                name='y')
  assert training_ops(g.as_graph_def()) == []


@pytest.mark.parametrize('axes,listed', [
    ([0, 1, 2], True),      # batch norm's batch statistics
    ([0], True),
    ([-4, 1, 2], True),     # -4 is the batch axis of a rank-4 tensor
    ([1, 2, 3], False),     # layer norm over each example
    ([1, 2], False),        # instance norm
    ([-1], False),
])
def test_moments_are_batch_statistics_only_over_the_batch_axis(axes, listed):
  with tf.Graph().as_default() as g:
    x = tf.placeholder(tf.float32, [None, 4, 4, 2], name='x')
    mean, variance = tf.nn.moments(x, axes, keepdims=True)
    tf.identity((x - mean) * tf.rsqrt(variance + 1e-3), name='y')
  found = training_ops(g.as_graph_def())
  assert [(op.op, op.kind) for op in found] == (
      [('SquaredDifference', 'batch_norm')] if listed else [])


def test_the_default_of_a_fed_placeholder_is_not_the_model():
  # A training input that picks a random batch feeds a PlaceholderWithDefault
  # the inference user feeds: the strip looks past it, but not past dropout.
  with tf.Graph().as_default() as g:
    data = tf.constant(np.arange(24, dtype=np.float32).reshape(4, 6))
    batch = tf.gather(data, tf.random.uniform([], 0, 4, dtype=tf.int32))
    x = tf.placeholder_with_default(batch[None], [None, 6], name='input')
    y = tf.identity(tf.matmul(x, tf.ones([6, 2])), name='y')
    tf.identity(tf.nn.dropout(y, rate=0.5), name='dropped')
  graph_def = g.as_graph_def()
  assert training_ops(graph_def, ['y']) == []
  assert [op.kind for op in training_ops(graph_def, ['dropped'])] == ['random']
  assert [op.op for op in training_ops(graph_def)] == ['RandomUniformInt',
                                                       'RandomUniform']


def test_an_input_pipeline_in_place_of_a_placeholder_is_refused(tmp_path):
  # A training script's model reads a tf.data iterator: frozen as it is, the
  # .pb would hold the data and take no input.
  directory = str(tmp_path / 'train')
  data = _images(6)
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    images = tf.data.Dataset.from_tensor_slices(data).repeat().batch(3)
    batch = tf.data.make_one_shot_iterator(images).get_next()
    logits = tf1prune.masked_fully_connected(
        tf.reshape(batch, [-1, 8 * 8 * 3]), 4, activation_fn=None,
        scope='logits')
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op())
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'))
  path = str(tmp_path / 'm.pb')
  with pytest.raises(tf1prune.TrainingGraphError) as info:
    tf1prune.strip_checkpoint(directory, [logits.op.name], path)
  assert [(op.op, op.kind) for op in info.value.ops] == [
      ('IteratorGetNext', 'input')]
  message = str(info.value)
  assert ('an input pipeline (a dataset iterator or queue) in place of an '
          'input placeholder, e.g. IteratorGetNext (IteratorGetNext); frozen '
          'as it is, the .pb reads its data from inside itself and takes no '
          'input. Export an inference graph: rebuild the model with '
          'is_training=False (on a placeholder input)') in message
  assert not os.path.exists(path)
  tf1prune.strip_checkpoint(directory, [logits.op.name], path,
                            allow_training_ops=True)
  assert os.path.exists(path)


def test_a_queue_is_an_input_and_a_fed_iterator_is_not():
  with tf.Graph().as_default() as g:
    queue = tf.FIFOQueue(4, [tf.float32], shapes=[[6]])
    tf.identity(queue.dequeue_many(2), name='from_queue')
    iterator = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensors(tf.ones([2, 6])).repeat())
    x = tf.placeholder_with_default(iterator.get_next(), [None, 6],
                                    name='input')
    tf.identity(x * 2.0, name='fed')
  graph_def = g.as_graph_def()
  assert [(op.op, op.kind) for op in training_ops(graph_def,
                                                  ['from_queue'])] == [
      ('QueueDequeueManyV2', 'input')]
  assert training_ops(graph_def, ['fed']) == []


def test_a_fed_dataset_with_random_augmentation_is_not_the_model(tmp_path):
  # The docs say a pipeline behind a placeholder_with_default passes; its
  # map function (a random flip) is a library function that the outputs do
  # not read: the strip does not take it for a random op of the model.
  directory = str(tmp_path / 'train')
  data = _images(6)
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    images = (tf.data.Dataset.from_tensor_slices(data)
              .map(tf.image.random_flip_left_right).repeat().batch(3))
    batch = tf.data.make_one_shot_iterator(images).get_next()
    x = tf.placeholder_with_default(batch, [None, 8, 8, 3], name='images')
    logits = tf1prune.masked_fully_connected(
        tf.reshape(x, [-1, 8 * 8 * 3]), 4, activation_fn=None, scope='logits')
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op())
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'))
  path = str(tmp_path / 'm.pb')
  tf1prune.strip_checkpoint(directory, [logits.op.name], path)
  assert os.path.exists(path)


def test_a_function_the_model_calls_is_still_scanned():
  with tf.Graph().as_default() as g:

    @tf.function
    def noisy(x):
      return tf.nn.dropout(x, rate=0.5)

    x = tf.placeholder(tf.float32, [None, 4], name='x')
    tf.identity(noisy(x), name='y')
  assert [op.kind for op in training_ops(g.as_graph_def(), ['y'])] == [
      'random']
