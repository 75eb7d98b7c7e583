"""Real tf_slim nets pruned by coupled filter groups, stripped and shrunk.

For resnet_v1_50, inception_v1 and vgg_16: masks at 50% by `coupled_filter`,
a checkpoint, `tf1prune.strip_checkpoint`, `tf1prune.shrink_pb`; the shrunk
graph must give the outputs of the stripped one, with FLOPs within 5% of the
ideal for the mask. The ideal is measured, not taken from the shrink: a
channel is dead when it is constant over the batch and every position of the
stripped graph run on random images (a pruned filter gives a constant after
its bias or batch norm); each layer ideally costs its FLOPs times its live
input and output fractions.

vgg_16 runs only with TF1PRUNE_LARGE_TESTS=1 (see its skip reason). Where the
current shrink stops (batch norm, residual adds, concats: issue 13 point 3)
the tests are expected failures, not strict.

On TF 1.15 the nets are built with their slim arg scopes (batch norm); on TF
2.x, where `tf_slim.batch_norm` cannot be built, without them (conv + bias).
"""

import contextlib
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune

TF1 = tf.__version__.startswith('1.')
LARGE = os.environ.get('TF1PRUNE_LARGE_TESTS') == '1'
SHRINK_STOPS = ('the shrink does not go through batch norm, residual adds and '
                'concats yet (tf1prune/export/_shrink*.py, issue 13 point 3)')


def _build(name):
  """Returns (images placeholder, output tensor) of the net under pruning_scope."""
  import tf_slim as slim
  from tf_slim.nets import inception_v1, resnet_v1, vgg
  nets = {
      'resnet_v1_50': (64, lambda x: resnet_v1.resnet_v1_50(
          x, 10, is_training=False)[0], resnet_v1.resnet_arg_scope),
      'inception_v1': (224, lambda x: inception_v1.inception_v1(
          x, 10, is_training=False)[0], inception_v1.inception_v1_arg_scope),
      'vgg_16': (224, lambda x: vgg.vgg_16(x, 10, is_training=False)[0],
                 None),
  }
  size, build, arg_scope = nets[name]
  images = tf.placeholder(tf.float32, [2, size, size, 3], name='images')
  scope = (slim.arg_scope(arg_scope()) if TF1 and arg_scope is not None
           else contextlib.nullcontext())
  with scope, tf1prune.pruning_scope():
    logits = build(images)
  return images, logits


def _randomize_normalization(sess, rs):
  """Gives biases and batch-norm variables non-trivial values."""
  for var in tf.global_variables():
    base = var.op.name.rsplit('/', 1)[-1]
    shape = var.get_shape().as_list()
    if base in ('biases', 'beta', 'moving_mean'):
      var.load(rs.normal(0, 0.1, shape).astype(np.float32), sess)
    elif base in ('gamma', 'moving_variance'):
      var.load(rs.uniform(0.5, 1.5, shape).astype(np.float32), sess)


def _prune_and_save(name, directory):
  images, logits = _build(name)
  step = tf.train.get_or_create_global_step()
  pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=1,'
      'granularity_map=[.*:coupled_filter],do_not_prune=[logits]'))
  update = pruning.mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    _randomize_normalization(sess, np.random.RandomState(0))
    sess.run(tf.assign(step, 1))
    sess.run(update)
    tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                          global_step=step)
  return images.op.name, logits.op.name, len(pruning.coupled_groups())


def _graph(path):
  graph_def = tf.GraphDef()
  with tf.io.gfile.GFile(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  graph = tf.Graph()
  with graph.as_default():
    tf.import_graph_def(graph_def, name='')
  return graph


def _dead_channels(values):
  """Channels of an NHWC / NC value constant over all other axes."""
  flat = values.reshape(-1, values.shape[-1])
  return np.all(flat == flat[:1], axis=0)


def _ideal_flops(graph, report, feed):
  """The FLOPs of the report's layers with every dead channel removed."""
  nodes = [graph.get_operation_by_name(l.name) for l in report.layers]

  def source(op):
    x = op.inputs[0]
    return x.op.inputs[0] if x.op.type in ('Pad', 'PadV2', 'MirrorPad') else x

  tensors = [source(op) for op in nodes] + [op.outputs[0] for op in nodes]
  with tf.Session(graph=graph) as sess:
    values = sess.run(tensors, feed)
  inputs, outputs = values[:len(nodes)], values[len(nodes):]
  total = 0.0
  for layer, x, y in zip(report.layers, inputs, outputs):
    live_in = 1.0 - _dead_channels(x).mean()
    live_out = 1.0 - _dead_channels(y).mean()
    total += layer.flops_before * live_in * live_out
  return total


def _run(graph, feed, output):
  with tf.Session(graph=graph) as sess:
    return sess.run(output + ':0', feed)


@pytest.mark.parametrize('name', [
    pytest.param('resnet_v1_50', marks=pytest.mark.xfail(
        strict=False, reason=SHRINK_STOPS)),
    pytest.param('inception_v1', marks=pytest.mark.xfail(
        strict=False, reason=SHRINK_STOPS)),
    pytest.param('vgg_16', marks=pytest.mark.skipif(
        not LARGE, reason='vgg_16 of tf_slim 1.1.0 needs 224x224 inputs (fc6 '
        'is a VALID 7x7 conv on pool5) and has 138M parameters: ~10 GB and '
        'minutes; set TF1PRUNE_LARGE_TESTS=1 to run it'))])
def test_coupled_pruned_net_shrinks_to_the_ideal_flops_with_equal_outputs(
    name, tmp_path):
  images, output, num_groups = _prune_and_save(name, str(tmp_path))
  assert num_groups > 0
  stripped = str(tmp_path / 'stripped.pb')
  tf1prune.strip_checkpoint(str(tmp_path), [output], stripped)
  small = str(tmp_path / 'small.pb')
  report = tf1prune.shrink_pb(stripped, [output], small)
  big_graph = _graph(stripped)
  shape = big_graph.get_tensor_by_name(images + ':0').get_shape().as_list()
  feed = {images + ':0': np.random.RandomState(1).uniform(
      0, 1, shape).astype(np.float32)}
  expected = _run(big_graph, feed, output)
  got = _run(_graph(small), feed, output)
  scale = np.abs(expected).max()
  np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * scale)
  ideal = _ideal_flops(big_graph, report, feed)
  assert report.flops_after < 0.75 * report.flops_before
  assert abs(report.flops_after - ideal) <= 0.05 * ideal, (
      'FLOPs after %d, ideal %d; stops: %s' % (
          report.flops_after, ideal, report.stops[:5]))
