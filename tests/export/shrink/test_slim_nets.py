"""shrink_graph_def on real tf_slim nets with whole channel groups zeroed.

TF 1.15 only: on TF 2.x `tf_slim.batch_norm` cannot be built (see
test_through_ops.py for the same ops in hand-built graphs on both stacks).
The groups are set here by name (the group finder is tested elsewhere): the
residual stream of each resnet block (its shortcut and every conv3), every
other conv on its own; each group loses a random half of its channels.
"""

import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tests.support.graphs import run_graph_def
from tf1prune.export.shrink.rounds import shrink_graph_def

pytestmark = pytest.mark.skipif(
    not tf.__version__.startswith('1.'),
    reason='tf_slim.batch_norm does not build on TF 2.x (it imports '
    'tf_keras.legacy_tf_layers)')


def _group(name):
  """The coupled group of a conv's weights variable, by its scope."""
  stream = re.search(r'(block\d+)/unit_\d+/bottleneck_v1/(conv3|shortcut)/',
                     name)
  return stream.group(1) + '/stream' if stream else name


def _frozen(build, size, seed):
  """Builds, sets weights (half of every group zero), freezes; returns
  (frozen GraphDef, feed, {group: zeroed channels})."""
  x = tf.placeholder(tf.float32, [None, size, size, 3], name='x')
  tf.identity(build(x), name='y')
  rs = np.random.RandomState(seed)
  zeroed = {}
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for v in tf.global_variables():
      shape, name = v.shape.as_list(), v.op.name
      if name.endswith(('moving_variance', 'gamma')):
        value = rs.uniform(0.5, 1.5, shape)
      elif name.endswith(('moving_mean', 'beta', 'biases')):
        value = rs.randn(*shape) * 0.1
      elif name.endswith('weights'):
        value = rs.randn(*shape) * np.sqrt(2.0 / np.prod(shape[:-1]))
        if not re.search('logits|fc8', name, re.I):
          group = zeroed.setdefault(_group(name), rs.permutation(shape[-1])[
              :shape[-1] // 2])
          value[..., group] = 0.0
      else:
        continue
      v.load(value.astype(np.float32), sess)
    frozen = tf.graph_util.convert_variables_to_constants(
        sess, tf.get_default_graph().as_graph_def(), ['y'])
  return frozen, rs.randn(2, size, size, 3).astype(np.float32), zeroed


def _check(frozen, feed):
  small, report = shrink_graph_def(frozen, ['y'])
  expected = run_graph_def(frozen, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  # Ideal for this mask: every layer keeps half its inputs (but the first,
  # which reads the image) and half its outputs (but the logits).
  ideal = sum(l.flops_before * (1.0 if i == 0 else 0.5) *
              (1.0 if i == len(report.layers) - 1 else 0.5)
              for i, l in enumerate(report.layers))
  assert abs(report.flops_after / ideal - 1.0) < 0.05
  for i, layer in enumerate(report.layers):
    assert layer.outputs_after == (layer.outputs_before
                                   if i == len(report.layers) - 1
                                   else layer.outputs_before // 2)
  assert report.stops == []
  return report


def test_resnet_v1_50_shrinks_through_fused_batch_norm_adds_and_pads():
  from tf_slim.nets import resnet_v1
  import tf_slim as slim

  def build(x):
    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
      return resnet_v1.resnet_v1_50(x, 10, is_training=False)[0]

  frozen, feed, zeroed = _frozen(build, 64, 0)
  assert len([g for g in zeroed if g.endswith('/stream')]) == 4
  assert [n for n in frozen.node if n.op == 'FusedBatchNormV3']
  assert [n for n in frozen.node if n.op == 'Pad']
  report = _check(frozen, feed)
  assert len(report.layers) == 54


@pytest.mark.slow
def test_resnet_v1_50_with_unfused_batch_norm_shrinks_the_same():
  from tf_slim.nets import resnet_v1
  import tf_slim as slim

  def build(x):
    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
      with slim.arg_scope([slim.batch_norm], fused=False):
        return resnet_v1.resnet_v1_50(x, 10, is_training=False)[0]

  frozen, feed, _ = _frozen(build, 32, 1)
  assert [n for n in frozen.node if n.op == 'Rsqrt']
  _check(frozen, feed)


@pytest.mark.slow
def test_inception_v1_shrinks_through_concats():
  from tf_slim.nets import inception_v1
  import tf_slim as slim

  def build(x):
    with slim.arg_scope(inception_v1.inception_v1_arg_scope()):
      return inception_v1.inception_v1(x, 10, is_training=False)[0]

  frozen, feed, _ = _frozen(build, 224, 2)    # its 7x7 avg pool needs 224
  assert [n for n in frozen.node if n.op == 'ConcatV2']
  _check(frozen, feed)


@pytest.mark.slow
def test_vgg_16_shrinks():
  from tf_slim.nets import vgg
  import tf_slim as slim

  def build(x):
    with slim.arg_scope(vgg.vgg_arg_scope()):
      return vgg.vgg_16(x, 10, is_training=False)[0]

  frozen, feed, _ = _frozen(build, 224, 3)    # fc6 is a 7x7 VALID conv
  _check(frozen, feed)
