"""Real tf_slim nets pruned by coupled filter groups, stripped and shrunk.

For resnet_v1_50's blocks with one unit each, and (slow) resnet_v1_50,
inception_v1 and vgg_16 (the last two at 224x224): masks at 50% by
`coupled_filter`, a checkpoint, `tf1prune.strip_checkpoint`,
`tf1prune.shrink_pb`; the shrunk graph must give
the outputs of the stripped one, with FLOPs within 5% of the ideal for the
mask. The ideal is computed from the stripped graph, not taken from the
shrink: a layer's output channel is dead when its filter is all zero, a
residual add keeps a channel any member keeps, a concat joins; each layer
ideally costs its FLOPs times its live input and output fractions.

The nets are built with their slim arg scopes (batch norm): on TF 2.x, where
`tf_slim.batch_norm` cannot be built, with `tf1prune.batch_norm` through
`tf1prune.graph.slim_compat.use_tf1prune_batch_norm()`.
"""

import contextlib

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from bench.shrink_resnet import resnet_v1_50_one_unit
from tests.support.flops import ideal_flops
from tests.support.graphs import read_graph, read_graph_def, run_graph_def
from tests.support.pruned_nets import prune_and_save

TF1 = tf.__version__.startswith('1.')


def _build(name):
  """Returns (images placeholder, output tensor) of the net under pruning_scope."""
  import tf_slim as slim
  from tf_slim.nets import inception_v1, resnet_v1, vgg
  nets = {
      'resnet_v1_50': (64, lambda x: resnet_v1.resnet_v1_50(
          x, 10, is_training=False)[0], resnet_v1.resnet_arg_scope),
      'resnet_v1_one_unit': (64, lambda x: resnet_v1_50_one_unit(x, 10),
                             resnet_v1.resnet_arg_scope),
      'inception_v1': (224, lambda x: inception_v1.inception_v1(
          x, 10, is_training=False)[0], inception_v1.inception_v1_arg_scope),
      'vgg_16': (224, lambda x: vgg.vgg_16(x, 10, is_training=False)[0],
                 None),
  }
  size, build, arg_scope = nets[name]
  images = tf.placeholder(tf.float32, [2, size, size, 3], name='images')
  # On TF 2.x tf_slim's batch_norm cannot be built: tf1prune's stands in.
  compat = (contextlib.nullcontext() if TF1
            else tf1prune.graph.slim_compat.use_tf1prune_batch_norm())
  with compat:
    scope = (slim.arg_scope(arg_scope()) if arg_scope is not None
             else contextlib.nullcontext())
    with scope, tf1prune.pruning_scope():
      logits = build(images)
  return images, logits


def _filters_kept(graph, report):
  """{layer op name: bool per output channel: its frozen filter is nonzero}."""
  kept = {}
  for layer in report.layers:
    op = graph.get_operation_by_name(layer.name)
    if op.type in ('Conv2D', 'MatMul'):
      tensor = op.inputs[1]
      while tensor.op.type == 'Identity':
        tensor = tensor.op.inputs[0]
      w = tf.make_ndarray(tensor.op.get_attr('value'))
      kept[op.name] = np.any(w.reshape(-1, w.shape[-1]) != 0, axis=0)
  return kept


@pytest.mark.parametrize('name', [
    'resnet_v1_one_unit',
    pytest.param('resnet_v1_50', marks=pytest.mark.slow),
    # tf_slim 1.1.0's inception_v1 and vgg_16 need 224x224 inputs (a VALID
    # 7x7 pool / fc6 conv); vgg_16 has 138M parameters: minutes and GBs.
    pytest.param('inception_v1', marks=pytest.mark.slow),
    pytest.param('vgg_16', marks=pytest.mark.slow)])
def test_coupled_pruned_net_shrinks_to_the_ideal_flops_with_equal_outputs(
    name, tmp_path):
  net = prune_and_save(lambda: _build(name), str(tmp_path))
  images, output = net.images, net.output
  assert len(net.groups) > 0
  stripped = str(tmp_path / 'stripped.pb')
  tf1prune.strip_checkpoint(str(tmp_path), [output], stripped)
  small = str(tmp_path / 'small.pb')
  report = tf1prune.shrink_pb(stripped, [output], small)
  big_graph = read_graph(stripped)
  shape = big_graph.get_tensor_by_name(images + ':0').get_shape().as_list()
  feed = {images + ':0': np.random.RandomState(1).uniform(
      0, 1, shape).astype(np.float32)}
  expected = run_graph_def(read_graph_def(stripped), feed, output + ':0')
  got = run_graph_def(read_graph_def(small), feed, output + ':0')
  scale = np.abs(expected).max()
  np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * scale)
  ideal = ideal_flops(big_graph, report,
                      _filters_kept(big_graph, report))
  assert report.flops_after < 0.75 * report.flops_before
  assert abs(report.flops_after - ideal) <= 0.05 * ideal, (
      'FLOPs after %d, ideal %d; stops: %s' % (
          report.flops_after, ideal, report.stops[:5]))
