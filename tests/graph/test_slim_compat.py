"""Unchanged tf_slim.nets models under slim_compat.use_tf1prune_batch_norm().

Run as a module (`python -m tests.graph.test_slim_compat NAME...`, from the
checkout root) it prints the variables of those nets built on this stack
(slim's batch norm on TF 1.15, ours on 2.x).
"""

import functools
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim
from tf_slim.nets import alexnet, inception, resnet_v1, resnet_v2, vgg

import tf1prune
from tf1prune import slim_compat
from tests.support.checkout import ROOT

_TF1 = tf.__version__.startswith('1.')
_CLASSES = 5

# name: (model, arg scope, input size, batch, extra model arguments)
NETS = {
    'resnet_v1_50': (resnet_v1.resnet_v1_50, resnet_v1.resnet_arg_scope, 64, 2,
                     {}),
    'resnet_v2_50': (resnet_v2.resnet_v2_50, resnet_v2.resnet_arg_scope, 64, 2,
                     {}),
    'inception_v1': (inception.inception_v1, inception.inception_v1_arg_scope,
                     224, 1, {}),
    'inception_v2': (inception.inception_v2, inception.inception_v2_arg_scope,
                     64, 2, {}),
    'inception_v3': (inception.inception_v3, inception.inception_v3_arg_scope,
                     75, 2, {'create_aux_logits': False}),
    'vgg_16': (vgg.vgg_16, vgg.vgg_arg_scope, 224, 1, {}),
    'alexnet_v2': (alexnet.alexnet_v2, alexnet.alexnet_v2_arg_scope, 224, 1,
                   {}),
}
# Small nets from the same code, for the slower comparisons.
SMALL_NETS = {
    'small_resnet_v1': (resnet_v1.resnet_v1, resnet_v1.resnet_arg_scope, 32, 2,
                        {'blocks': [resnet_v1.resnet_v1_block(
                            'block1', base_depth=4, num_units=2, stride=2)]}),
    'small_resnet_v2': (resnet_v2.resnet_v2, resnet_v2.resnet_arg_scope, 32, 2,
                        {'blocks': [resnet_v2.resnet_v2_block(
                            'block1', base_depth=4, num_units=2, stride=2)]}),
}


def _build(name, is_training, images=None):
  """Builds net `name` in the default graph; returns (images, logits)."""
  model, arg_scope, size, batch, extra = dict(NETS, **SMALL_NETS)[name]
  extra = dict(extra)
  blocks = extra.pop('blocks', None)
  if blocks is not None:
    model = functools.partial(model, blocks=blocks, scope=name)
  if images is None:
    images = tf.placeholder(tf.float32, [batch, size, size, 3], name='images')
  with slim.arg_scope(arg_scope()):
    logits, _ = model(images, num_classes=_CLASSES, is_training=is_training,
                      **extra)
  return images, tf.reshape(logits, [-1, _CLASSES])


def _images(name, seed=0):
  _, _, size, batch, _ = dict(NETS, **SMALL_NETS)[name]
  return np.random.RandomState(seed).uniform(
      0, 1, [batch, size, size, 3]).astype(np.float32)


def _variables():
  return [[v.op.name, v.get_shape().as_list()] for v in tf.global_variables()]


@pytest.mark.parametrize('name', sorted(NETS))
def test_net_builds_and_runs_forward_in_training_and_inference(name):
  with slim_compat.use_tf1prune_batch_norm():
    images, train_logits = _build(name, True)
    train_updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      _, eval_logits = _build(name, False, images)
  assert slim.batch_norm is not tf1prune.batch_norm  # Restored on exit.
  norms = [v for v in tf.global_variables()
           if v.op.name.endswith('/moving_mean')]
  assert bool(norms) == name.startswith(('resnet', 'inception'))
  # Two updates per batch norm, from the training net only.
  assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2 * len(norms)
  assert len(train_updates) == 2 * len(norms)
  fused = [op for op in tf.get_default_graph().get_operations()
           if op.type == 'FusedBatchNormV3']
  assert len(fused) == 2 * len(norms)
  x = _images(name)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    before = sess.run(norms)
    evaluated = sess.run(eval_logits, {images: x})
    assert all(np.array_equal(a, b) for a, b in zip(before, sess.run(norms)))
    train = sess.run([train_logits] + train_updates, {images: x})[0]
    after = sess.run(norms)
  for out in (train, evaluated):
    assert out.shape == (NETS[name][3], _CLASSES)
    assert np.isfinite(out).all()
  assert not any(np.array_equal(a, b) for a, b in zip(before, after))


def test_resnet_variables_match_the_other_stack(other_python):
  """The same variable names and shapes as slim's on TF 1.15 (or ours on 2.x)."""
  names = ['resnet_v1_50']
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run(
      [other_python, '-m', 'tests.graph.test_slim_compat'] + names,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
      timeout=600)
  assert proc.returncode == 0, proc.stderr.decode()[-3000:]
  there = json.loads(proc.stdout.decode().strip().splitlines()[-1])
  assert there == _net_variables(names)


def _net_variables(names):
  """{name: [[variable, shape], ...]} with slim's batch norm where it runs."""
  result = {}
  for name in names:
    with tf.Graph().as_default():
      if _TF1:
        _build(name, True)
      else:
        with slim_compat.use_tf1prune_batch_norm():
          _build(name, True)
      result[name] = _variables()
  return result


@pytest.mark.skipif(not _TF1,
                    reason="tf_slim's batch_norm cannot be built on TF 2.x")
@pytest.mark.parametrize('name', sorted(SMALL_NETS))
def test_same_outputs_and_updates_as_slim_batch_norm(name):
  """Same weights, same input: slim's and ours agree, training and inference."""
  x = _images(name, seed=1)
  results = []
  values = None
  for ours in (False, True):
    with tf.Graph().as_default():
      if ours:
        with slim_compat.use_tf1prune_batch_norm():
          images, train_logits = _build(name, True)
          with tf.variable_scope(tf.get_variable_scope(), reuse=True):
            _, eval_logits = _build(name, False, images)
      else:
        images, train_logits = _build(name, True)
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):
          _, eval_logits = _build(name, False, images)
      updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
      variables = tf.global_variables()
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        if values is None:
          values = sess.run(variables)
        else:
          for var, value in zip(variables, values):
            var.load(value, sess)
        train = sess.run([train_logits] + updates, {images: x})[0]
        evaluated = sess.run(eval_logits, {images: x})
        results.append((_variables(), train, evaluated, sess.run(variables)))
  theirs, ours = results
  assert ours[0] == theirs[0]
  np.testing.assert_array_equal(ours[1], theirs[1])
  np.testing.assert_array_equal(ours[2], theirs[2])
  for a, b in zip(ours[3], theirs[3]):
    np.testing.assert_array_equal(a, b)


if __name__ == '__main__':
  tf.disable_eager_execution()
  print(json.dumps(_net_variables(sys.argv[1:])))


_MOBILENET_LIKE = '''
import tf_slim as slim
V2_DEF = dict(defaults={
    (slim.conv2d,): {'normalizer_fn': slim.batch_norm},
    (slim.batch_norm,): {'center': True, 'scale': True}})
'''


def _import_mobilenet_like(name):
  """A module that keeps `slim.batch_norm` in a module-level dict when it is
  imported, as tf-slim's MobileNet v2/v3 nets do."""
  module = types.ModuleType(name)
  sys.modules[name] = module
  exec(_MOBILENET_LIKE, module.__dict__)   # pylint: disable=exec-used
  return module


def _build_with(defs):
  images = tf.zeros([2, 8, 8, 3])
  conv = defs['defaults'][(slim.conv2d,)]
  norm = defs['defaults'][(slim.batch_norm,)]
  return slim.conv2d(images, 4, 3, normalizer_fn=conv['normalizer_fn'],
                     normalizer_params=norm, scope='conv1')


def test_a_module_that_captured_slim_batch_norm_before_the_context_is_named(
    tf_warnings):
  name = 'test_mobilenet_like_outside'
  try:
    outside = _import_mobilenet_like(name)
    with slim_compat.use_tf1prune_batch_norm():
      pass
  finally:
    del sys.modules[name]
  (warning,) = [m for m in tf_warnings if 'batch_norm' in m]
  assert warning.startswith(
      "%s.V2_DEF hold tf-slim's own batch_norm, taken when they were "
      "imported" % name)
  assert 'Import these modules inside use_tf1prune_batch_norm()' in warning
  assert "No module named 'tf_keras'" in warning
  held = outside.V2_DEF['defaults'][(slim.conv2d,)]['normalizer_fn']
  assert held is not tf1prune.batch_norm


def test_a_module_imported_inside_the_context_uses_tf1prune_batch_norm(
    tf_warnings):
  name = 'test_mobilenet_like_inside'
  try:
    with slim_compat.use_tf1prune_batch_norm():
      inside = _import_mobilenet_like(name)
      _build_with(inside.V2_DEF)
  finally:
    del sys.modules[name]
  assert not [m for m in tf_warnings if 'batch_norm' in m]
  assert inside.V2_DEF['defaults'][(slim.conv2d,)][
      'normalizer_fn'] is tf1prune.batch_norm
  assert sorted(v.op.name for v in tf.global_variables()) == [
      'conv1/BatchNorm/beta', 'conv1/BatchNorm/gamma',
      'conv1/BatchNorm/moving_mean', 'conv1/BatchNorm/moving_variance',
      'conv1/weights']
