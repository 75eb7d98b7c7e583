"""tf1prune.batch_norm: NumPy references, slim's names and numbers, checkpoints.

Run as a module (`python -m tests.graph.test_batch_norm THEIRS OURS`, from the
checkout root) it is the other stack's half of the cross-version checkpoint
test: it restores the checkpoint in THEIRS and writes one into OURS.
"""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

import tf1prune
from tests.support.checkout import ROOT
from tests.support.graphs import control_flow

_TF1 = tf.__version__.startswith('1.')
_EPS = 0.001
_DECAY = 0.9


def _data(shape, seed=0):
  return np.random.RandomState(seed).uniform(-2, 3, shape).astype(np.float32)


def _params(channels):
  ramp = np.arange(channels, dtype=np.float32)
  return dict(beta=0.5 - 0.25 * ramp, gamma=1.5 + 0.5 * ramp,
              moving_mean=0.1 * ramp - 0.2, moving_variance=2.0 + ramp)


def _initializers(params):
  return {k: tf.constant_initializer(v) for k, v in params.items()}


def _reference(x, params, data_format, training, fused, center, scale,
               weights=None):
  """NumPy (float64): output and the moving statistics after one update."""
  x64 = x.astype(np.float64)
  axis = 1 if data_format == 'NCHW' else x.ndim - 1
  axes = tuple(i for i in range(x.ndim) if i != axis)
  shape = [1] * x.ndim
  shape[axis] = x.shape[axis]
  p = {k: v.astype(np.float64) for k, v in params.items()}
  if weights is None:
    mean, var = x64.mean(axes), x64.var(axes)
  else:
    w = weights.reshape([-1] + [1] * (x.ndim - 1)).astype(np.float64)
    w = np.broadcast_to(w, x.shape)
    mean = (w * x64).sum(axes) / w.sum(axes)
    var = (w * (x64 - mean.reshape(shape)) ** 2).sum(axes) / w.sum(axes)
  use_mean, use_var = (mean, var) if training else (p['moving_mean'],
                                                     p['moving_variance'])
  y = (x64 - use_mean.reshape(shape)) / np.sqrt(use_var.reshape(shape) + _EPS)
  if scale:
    y = y * p['gamma'].reshape(shape)
  if center:
    y = y + p['beta'].reshape(shape)
  n = x.size // x.shape[axis]
  stat_var = var * n / (n - 1) if fused else var
  moving = (p['moving_mean'], p['moving_variance'])
  if training:
    moving = (moving[0] - (moving[0] - mean) * (1 - _DECAY),
              moving[1] - (moving[1] - stat_var) * (1 - _DECAY))
  return y, moving


def _build_and_run(fn, x, params, is_training, steps=1, **kwargs):
  """Builds `fn` in a new graph; runs output + update ops `steps` times."""
  with tf.Graph().as_default() as g:
    kwargs = {k: tf.constant(v) if isinstance(v, np.ndarray) else v
              for k, v in kwargs.items()}
    training = is_training
    if is_training == 'tensor':
      training = tf.placeholder_with_default(True, [], name='is_training')
    y = fn(tf.constant(x), decay=_DECAY, is_training=training,
           param_initializers=_initializers(params), **kwargs)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    moving = [v for v in tf.global_variables() if 'moving_' in v.op.name and
              '/moving_mean/' not in v.op.name]
    variables = [(v.op.name, v.get_shape().as_list())
                 for v in tf.global_variables()]
    collections = {key: sorted(v.op.name for v in g.get_collection(key))
                   for key in (tf.GraphKeys.MODEL_VARIABLES,
                               tf.GraphKeys.TRAINABLE_VARIABLES,
                               tf.GraphKeys.MOVING_AVERAGE_VARIABLES)}
    graph_def = g.as_graph_def()
    op_types = set(node.op for node in graph_def.node)
    for function in graph_def.library.function:  # tf.cond on TF 2.x
      op_types.update(node.op for node in function.node_def)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      outputs = []
      for _ in range(steps):
        outputs.append(sess.run([y] + updates)[0])
      moving_values = sess.run(moving)
  return dict(y=outputs, moving=moving_values, variables=variables,
              collections=collections, n_updates=len(updates),
              op_types=op_types)


_GRID = list(itertools.product(
    [None, False],                         # fused
    ['NHWC', 'NCHW'],                      # data_format
    [True, False, 'tensor'],               # is_training
    [tf.GraphKeys.UPDATE_OPS, None],       # updates_collections
))


def _skip_unsupported(fused, data_format):
  if _TF1 and fused is None and data_format == 'NCHW':
    pytest.skip('TF 1.15 has no CPU kernel for the fused NCHW batch norm '
                '(slim fails there the same way)')


def _grid_id(case):
  fused, data_format, training, updates = case
  return 'fused=%s-%s-training=%s-updates=%s' % (fused, data_format, training,
                                                  updates)


@pytest.mark.parametrize('case', _GRID, ids=_grid_id)
@pytest.mark.parametrize('rank', [2, 4])
def test_batch_norm_matches_numpy_reference(case, rank):
  fused, data_format, training, updates = case
  _skip_unsupported(fused, data_format)
  shape = [6, 3] if rank == 2 else ([3, 3, 4, 5] if data_format == 'NHWC'
                                    else [3, 5, 4, 3])
  if rank == 2 and data_format == 'NCHW':
    shape = [6, 3]
  x = _data(shape)
  channels = shape[1] if data_format == 'NCHW' else shape[-1]
  params = _params(channels)
  got = _build_and_run(tf1prune.batch_norm, x, params, training, fused=fused,
                       data_format=data_format, updates_collections=updates,
                       scale=True)
  is_fused = fused is None
  want_y, want_moving = _reference(x, params, data_format, bool(training),
                                   is_fused, center=True, scale=True)
  np.testing.assert_allclose(got['y'][0], want_y, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got['moving'][0], want_moving[0], rtol=1e-6,
                             atol=1e-6)
  np.testing.assert_allclose(got['moving'][1], want_moving[1], rtol=1e-6)
  assert ('FusedBatchNormV3' in got['op_types']) == is_fused
  expected_updates = 2 if training and updates is not None else 0
  assert got['n_updates'] == expected_updates


@pytest.mark.parametrize('fused', [None, False])
@pytest.mark.parametrize('updates', [tf.GraphKeys.UPDATE_OPS, None])
def test_tensor_is_training_with_reference_variables_and_control_flow_v2(
    fused, updates):
  # `enable_control_flow_v2()` on TF 1.15, `disable_resource_variables()` on
  # TF 2.x: a cond traced as a function cannot assign to the moving
  # statistics, so they are built as Switch and Merge.
  def with_reference_variables(*args, **kwargs):
    with tf.variable_scope(tf.get_variable_scope(), use_resource=False):
      return tf1prune.batch_norm(*args, **kwargs)

  x = _data([3, 3, 4, 5])
  params = _params(5)
  with control_flow(v2=True):
    got = _build_and_run(with_reference_variables, x, params, 'tensor',
                         fused=fused, updates_collections=updates, scale=True)
    assert tf.control_flow_v2_enabled()
  want_y, want_moving = _reference(x, params, 'NHWC', True, fused is None,
                                   center=True, scale=True)
  np.testing.assert_allclose(got['y'][0], want_y, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got['moving'][0], want_moving[0], rtol=1e-6,
                             atol=1e-6)
  np.testing.assert_allclose(got['moving'][1], want_moving[1], rtol=1e-6)
  assert {'VariableV2', 'Switch'} <= got['op_types']


@pytest.mark.parametrize('center,scale', [(True, False), (False, True),
                                          (False, False)])
def test_center_and_scale_select_beta_and_gamma(center, scale):
  x = _data([4, 3])
  params = _params(3)
  got = _build_and_run(tf1prune.batch_norm, x, params, True, center=center,
                       scale=scale)
  want_y, _ = _reference(x, params, 'NHWC', True, True, center, scale)
  np.testing.assert_allclose(got['y'][0], want_y, rtol=1e-5, atol=1e-5)
  names = [name for name, _ in got['variables']]
  assert names == (['BatchNorm/beta'] * center + ['BatchNorm/gamma'] * scale +
                   ['BatchNorm/moving_mean', 'BatchNorm/moving_variance'])


def test_variables_collections_and_trainability():
  got = _build_and_run(tf1prune.batch_norm, _data([2, 4, 4, 3]), _params(3),
                       True, scale=True)
  assert got['variables'] == [('BatchNorm/gamma', [3]), ('BatchNorm/beta', [3]),
                              ('BatchNorm/moving_mean', [3]),
                              ('BatchNorm/moving_variance', [3])]
  assert got['collections'] == {
      tf.GraphKeys.MODEL_VARIABLES: ['BatchNorm/beta', 'BatchNorm/gamma',
                                     'BatchNorm/moving_mean',
                                     'BatchNorm/moving_variance'],
      tf.GraphKeys.TRAINABLE_VARIABLES: ['BatchNorm/beta', 'BatchNorm/gamma'],
      tf.GraphKeys.MOVING_AVERAGE_VARIABLES: []}


def test_variables_collections_dict_and_outputs_collections():
  x = tf.zeros([2, 3])
  y = tf1prune.batch_norm(x, scale=True, scope='bn',
                          variables_collections={'gamma': ['g'],
                                                 'moving_mean': ['m']},
                          outputs_collections='outs')
  assert [v.op.name for v in tf.get_collection('g')] == ['bn/gamma']
  assert [v.op.name for v in tf.get_collection('m')] == ['bn/moving_mean']
  assert tf.get_collection('outs') == [y]


def test_zero_debias_moving_mean_after_three_steps():
  x = _data([5, 2])
  params = _params(2)
  got = _build_and_run(tf1prune.batch_norm, x, params, True, steps=3,
                       zero_debias_moving_mean=True)
  mean = x.astype(np.float64).mean(0)
  biased = np.zeros(2)
  for _ in range(3):
    biased -= (biased - mean) * (1 - _DECAY)
  np.testing.assert_allclose(got['moving'][0], biased / (1 - _DECAY ** 3),
                             rtol=1e-5)
  names = [name for name, _ in got['variables']]
  assert names[-2:] == ['BatchNorm/BatchNorm/moving_mean/biased',
                        'BatchNorm/BatchNorm/moving_mean/local_step']


def test_batch_weights_give_weighted_moments():
  x = _data([6, 3])
  weights = np.array([1, 2, 0, 1, 3, 1], np.float32)
  params = _params(3)
  got = _build_and_run(tf1prune.batch_norm, x, params, True,
                       batch_weights=weights, scale=True)
  want_y, want_moving = _reference(x, params, 'NHWC', True, False, True, True,
                                   weights=weights)
  np.testing.assert_allclose(got['y'][0], want_y, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got['moving'][1], want_moving[1], rtol=1e-5)


def test_adjustment_applies_in_training_only():
  x = _data([4, 2])
  params = _params(2)
  adjust = lambda shape: (tf.constant([2.0, 3.0]), tf.constant([1.0, -1.0]))
  for training in (True, False):
    got = _build_and_run(tf1prune.batch_norm, x, params, training, scale=True,
                         adjustment=adjust)
    normalized, _ = _reference(x, params, 'NHWC', training, False, False, False)
    if training:
      normalized = normalized * [2.0, 3.0] + [1.0, -1.0]
    want = normalized * params['gamma'] + params['beta']
    np.testing.assert_allclose(got['y'][0], want, rtol=1e-5, atol=1e-5)


def test_activation_fn_is_applied():
  x = _data([4, 3])
  params = _params(3)
  got = _build_and_run(tf1prune.batch_norm, x, params, False,
                       activation_fn=tf.nn.relu, scale=True)
  want, _ = _reference(x, params, 'NHWC', False, True, True, True)
  np.testing.assert_allclose(got['y'][0], np.maximum(want, 0), rtol=1e-5,
                             atol=1e-6)


def test_reuse_shares_the_variables():
  x = tf.zeros([2, 4, 4, 3])
  tf1prune.batch_norm(x, scale=True, scope='bn')
  tf1prune.batch_norm(x, scale=True, scope='bn', reuse=True, is_training=False)
  assert len(tf.global_variables()) == 4


def test_normalizer_fn_of_conv_layers_under_arg_scope():
  images = tf.zeros([2, 8, 8, 3])
  with slim.arg_scope([tf1prune.batch_norm], decay=0.5, scale=True):
    with slim.arg_scope([tf1prune.masked_conv2d, slim.conv2d],
                        normalizer_fn=tf1prune.batch_norm):
      tf1prune.masked_conv2d(images, 4, 3, scope='masked')
      slim.conv2d(images, 4, 3, scope='plain')
  names = [v.op.name for v in tf.global_variables()]
  for layer in ('masked', 'plain'):
    for var in ('gamma', 'beta', 'moving_mean', 'moving_variance'):
      assert '%s/BatchNorm/%s' % (layer, var) in names
    assert '%s/biases' % layer not in names
  decays = {}  # update name scope -> the constants in it
  for op in tf.get_default_graph().get_operations():
    if '/AssignMovingAvg' in op.name and op.type == 'Const':
      scope = op.name[:op.name.index('/AssignMovingAvg')]
      decays.setdefault(scope, set()).add(
          float(tf.get_static_value(op.outputs[0])))
  assert sorted(decays) == ['masked/BatchNorm', 'plain/BatchNorm']
  assert all(0.5 in values for values in decays.values())


def test_renorm_raises_not_implemented():
  with pytest.raises(NotImplementedError, match='renorm=True'):
    tf1prune.batch_norm(tf.zeros([2, 3]), renorm=True)


def test_bad_arguments_raise_value_error():
  with pytest.raises(ValueError, match="data_format must be 'NHWC' or 'NCHW', "
                     "got 'NCW'"):
    tf1prune.batch_norm(tf.zeros([2, 3]), data_format='NCW')
  with pytest.raises(ValueError, match='known channel dimension'):
    tf1prune.batch_norm(tf.placeholder(tf.float32, [2, None]))
  with pytest.raises(ValueError, match='known rank >= 2'):
    tf1prune.batch_norm(tf.zeros([3]))


# --- Same names and numbers as tf_slim's batch_norm (TF 1.15 only). ---------

needs_slim_bn = pytest.mark.skipif(
    not _TF1, reason="tf_slim's batch_norm cannot be built on TF 2.x")


@needs_slim_bn
@pytest.mark.parametrize('case', _GRID, ids=_grid_id)
@pytest.mark.parametrize('rank', [2, 4])
@pytest.mark.parametrize('scale', [False, True])
def test_same_as_slim_batch_norm(case, rank, scale):
  fused, data_format, training, updates = case
  _skip_unsupported(fused, data_format)
  shape = [6, 3] if rank == 2 else ([3, 3, 4, 5] if data_format == 'NHWC'
                                    else [3, 5, 4, 3])
  x = _data(shape, seed=1)
  channels = shape[1] if data_format == 'NCHW' else shape[-1]
  kwargs = dict(fused=fused, data_format=data_format, scale=scale,
                updates_collections=updates, steps=2)
  params = _params(channels)
  ours = _build_and_run(tf1prune.batch_norm, x, params, training, **kwargs)
  theirs = _build_and_run(slim.batch_norm, x, params, training, **kwargs)
  assert ours['variables'] == theirs['variables']
  assert ours['collections'] == theirs['collections']
  assert ours['n_updates'] == theirs['n_updates']
  assert (('FusedBatchNormV3' in ours['op_types']) ==
          ('FusedBatchNormV3' in theirs['op_types']))
  for a, b in zip(ours['y'] + ours['moving'], theirs['y'] + theirs['moving']):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@needs_slim_bn
def test_same_as_slim_with_zero_debias_and_batch_weights():
  x = _data([6, 3], seed=2)
  params = _params(3)
  for kwargs in (dict(zero_debias_moving_mean=True),
                 dict(zero_debias_moving_mean=True, fused=False),
                 dict(batch_weights=np.array([1., 2, 0, 1, 3, 1], np.float32))):
    ours = _build_and_run(tf1prune.batch_norm, x, params, True, steps=3,
                          **kwargs)
    theirs = _build_and_run(slim.batch_norm, x, params, True, steps=3,
                            **kwargs)
    assert ours['variables'] == theirs['variables']
    for a, b in zip(ours['y'] + ours['moving'],
                    theirs['y'] + theirs['moving']):
      np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


# --- Checkpoints between TF 1.15's slim.batch_norm and ours on TF 2.x. ------

def _checkpoint_model(training):
  """Three batch norms (fused, unfused in place, zero-debiased rank 2).

  Built with tf_slim's batch_norm on TF 1.15 and with ours on TF 2.x.
  """
  bn = slim.batch_norm if _TF1 else tf1prune.batch_norm
  images = tf.placeholder(tf.float32, [4, 3, 3, 2], name='images')
  net = bn(images, scale=True, is_training=training, scope='fused')
  net = bn(net, scale=True, fused=False, updates_collections=None,
           is_training=training, scope='unfused', activation_fn=tf.nn.relu)
  flat = tf.reshape(net, [4, 18])
  out = bn(flat, zero_debias_moving_mean=True, is_training=training,
           scope='debiased')
  return images, out


def _restore_and_run(directory):
  """Restores DIR/model.ckpt; the inference output, then one training step."""
  x = _data([4, 3, 3, 2], seed=7)
  result = {}
  for training in (False, True):
    with tf.Graph().as_default():
      images, out = _checkpoint_model(training)
      updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
      with tf.Session() as sess:
        tf.train.Saver().restore(sess, os.path.join(directory, 'model.ckpt'))
        y = sess.run([out] + updates, {images: x})[0]
        result['training' if training else 'inference'] = y.tolist()
        result['variables_after_step' if training else 'variables'] = {
            v.op.name: sess.run(v).tolist() for v in tf.global_variables()}
  return result


def _write_checkpoint(directory):
  """Trains the model 3 steps, saves it and the outputs it gives restored."""
  with tf.Graph().as_default():
    images, out = _checkpoint_model(True)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    rng = np.random.RandomState(3)
    assigns = [tf.assign(v, rng.uniform(0.5, 1.5, v.get_shape().as_list()))
               for v in tf.trainable_variables()]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(assigns)
      for step in range(3):
        sess.run([out] + updates, {images: _data([4, 3, 3, 2], seed=step)})
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'))
  result = _restore_and_run(directory)
  result['writer'] = tf.__version__
  with open(os.path.join(directory, 'outputs.json'), 'w') as f:
    json.dump(result, f)


def _check_restored(directory, restored):
  with open(os.path.join(directory, 'outputs.json')) as f:
    written = json.load(f)
  assert written['writer'] != restored['writer']
  for key in ('variables', 'variables_after_step'):
    assert sorted(restored[key]) == sorted(written[key])
    for name, value in written[key].items():
      np.testing.assert_allclose(restored[key][name], value, rtol=1e-5,
                                 atol=1e-6, err_msg=name)
  for key in ('inference', 'training'):
    np.testing.assert_allclose(restored[key], written[key], rtol=1e-5,
                               atol=1e-5, err_msg=key)


def test_checkpoints_move_between_slim_on_tf1_and_ours_on_tf2(tmp_path,
                                                               other_python):
  """Written here, restored there, and the reverse (slim on TF 1.15)."""
  here, there = str(tmp_path / 'here'), str(tmp_path / 'there')
  os.makedirs(here)
  os.makedirs(there)
  _write_checkpoint(here)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run(
      [other_python, '-m', 'tests.graph.test_batch_norm', here, there],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
      timeout=600)
  assert proc.returncode == 0, proc.stderr.decode()[-3000:]
  restored_there = json.loads(proc.stdout.decode().strip().splitlines()[-1])
  _check_restored(here, restored_there)
  restored_here = _restore_and_run(there)
  restored_here['writer'] = tf.__version__
  _check_restored(there, restored_here)


def _main(argv):
  """Restores the checkpoint in argv[1] (prints it), writes one to argv[2]."""
  tf.disable_eager_execution()
  restored = _restore_and_run(argv[1])
  restored['writer'] = tf.__version__
  _write_checkpoint(argv[2])
  print(json.dumps(restored))


if __name__ == '__main__':
  _main(sys.argv)
