"""pruning_scope / locking_scope: unchanged model code gains masks and locks."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

import tf1prune
from tests.support import np_reference


def _slim_model(images):
  net = slim.conv2d(images, 8, 3, scope='conv1',
                    weights_regularizer=slim.l2_regularizer(0.01))
  net = slim.conv2d(net, 8, 3, scope='conv2')
  net = slim.flatten(net)
  return slim.fully_connected(net, 10, activation_fn=None, scope='logits')


def _images():
  return tf.constant(np.random.RandomState(0).randn(2, 6, 6, 3)
                     .astype(np.float32))


def test_slim_model_gets_contrib_names_and_raw_variables_stay_trainable():
  with tf1prune.pruning_scope() as masked:
    _slim_model(_images())
  assert masked == ['conv1/weights', 'conv2/weights', 'logits/weights']
  assert [m.op.name for m in tf1prune.get_masks()] == [
      'conv1/mask', 'conv2/mask', 'logits/mask']
  assert [t.op.name for t in tf1prune.get_thresholds()] == [
      'conv1/threshold', 'conv2/threshold', 'logits/threshold']
  assert [m.op.name for m in tf1prune.get_masked_weights()] == [
      'conv1/weights/masked_weight', 'conv2/weights/masked_weight',
      'logits/weights/masked_weight']
  assert [v.op.name for v in tf.trainable_variables()] == [
      'conv1/weights', 'conv1/biases', 'conv2/weights', 'conv2/biases',
      'logits/weights', 'logits/biases']
  assert [r.name for r in tf1prune.masked_weight_records()] == masked
  (reg,) = tf.losses.get_regularization_losses()   # once, reaching the kernel
  assert tf.gradients(reg, [tf.trainable_variables()[0]])[0] is not None


def test_same_variable_names_as_masked_conv2d():
  with tf.Graph().as_default():
    with tf1prune.pruning_scope():
      slim.conv2d(_images(), 8, 3, scope='conv1')
    patched = [v.op.name for v in tf.global_variables()]
  with tf.Graph().as_default():
    tf1prune.masked_conv2d(_images(), 8, 3, scope='conv1')
    layer = [v.op.name for v in tf.global_variables()]
  assert sorted(patched) == sorted(layer)


def test_pruning_prunes_patched_slim_model_and_training_respects_masks():
  with tf1prune.pruning_scope():
    logits = _slim_model(_images())
  loss = tf.reduce_mean(tf.square(logits)) + tf.losses.get_regularization_loss()
  step = tf.train.get_or_create_global_step()
  train = tf.train.MomentumOptimizer(0.01, 0.9).minimize(loss, global_step=step)
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.75,sparsity_function_end_step=1'), step)
  records = tf1prune.masked_weight_records()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 1))
    raws = sess.run([r.weight for r in records])
    sess.run(p.mask_update_op())
    masks = sess.run([r.mask for r in records])
    for raw, mask in zip(raws, masks):
      np.testing.assert_array_equal(mask,
                                    np_reference.magnitude_mask(np.abs(raw), 0.75))
    sess.run(train)
    effective = sess.run([r.masked_weight for r in records])
  for mask, eff in zip(masks, effective):
    assert np.all(eff[mask == 0] == 0.0)


def test_raw_tf_nn_model_with_custom_pattern_and_exclude():
  images = _images()
  with tf1prune.pruning_scope(pattern=r'(kernel|w\d)$', exclude='^head/') as masked:
    with tf.variable_scope('block'):
      w1 = tf.get_variable('w1', [3, 3, 3, 4])
      w2 = tf.get_variable('w2', [3, 3, 4, 4])
      b = tf.get_variable('b', [4])
      net = tf.nn.relu(tf.nn.conv2d(images, w1, [1, 1, 1, 1], 'SAME'))
      net = tf.nn.conv2d(net, w2, [1, 1, 1, 1], 'SAME') + b
    flat = tf.reshape(net, [2, -1])
    kernel = tf.get_variable('fc/kernel', [144, 5])
    head = tf.get_variable('head/kernel', [5, 2])
    frozen = tf.get_variable('fc2/kernel', [5, 5], trainable=False)
    out = tf.matmul(tf.matmul(flat, kernel), head)
  assert masked == ['block/w1', 'block/w2', 'fc/kernel']
  assert [m.op.name for m in tf1prune.get_masks()] == [
      'block/w1/mask', 'block/w2/mask', 'fc/mask']
  # Variables are returned as they are, masked weights as tensors.
  assert not any(isinstance(v, tf.Tensor) for v in (head, frozen, b))
  assert isinstance(w1, tf.Tensor) and w1.op.name == 'block/w1/weights/masked_weight'
  rs = np.random.RandomState(5)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    masks = [(rs.rand(*m.shape.as_list()) > 0.5).astype(np.float32)
             for m in tf1prune.get_masks()]
    sess.run([tf.assign(m, v) for m, v in zip(tf1prune.get_masks(), masks)])
    got, raw_kernel, raw_head = sess.run(
        [out, tf.trainable_variables()[3], head])
    feature = sess.run(flat)
  np.testing.assert_allclose(got, feature.dot(raw_kernel * masks[2]).dot(raw_head),
                             rtol=1e-5, atol=1e-5)


def test_reuse_shares_the_mask():
  with tf1prune.pruning_scope():
    with tf.variable_scope('tower'):
      a = tf.get_variable('weights', [4, 4])
    with tf.variable_scope('tower', reuse=True):
      b = tf.get_variable('weights', [4, 4])
  assert len(tf1prune.get_masks()) == 1
  assert len(tf1prune.masked_weight_records()) == 1
  assert a.op.type == b.op.type == 'Mul'


def test_locking_scope_pins_entries_of_a_slim_layer_inside_pruning_scope():
  index = np.s_[:, :, 2, 5]
  with tf1prune.pruning_scope(), tf1prune.locking_scope(
      {'conv2/weights$': dict(index=index, value='zero')}) as locked:
    logits = _slim_model(_images())
  assert locked == ['conv2/weights']
  (lock,) = tf1prune.lock_records()
  assert lock.locked.op.name == 'conv2/lock_mask'
  assert lock.input.name == 'conv2/weights/masked_weight:0'
  step = tf.train.get_or_create_global_step()
  train = tf.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(logits),
                                               global_step=step)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(3):
      sess.run(train)
    effective, raw = sess.run([lock.effective, tf.trainable_variables()[2]])
  assert np.all(effective[index] == 0.0) and np.all(raw[index] != 0.0)
  np.testing.assert_array_equal(effective[:, :, 0], raw[:, :, 0])


@pytest.mark.parametrize('kwargs,match', [
    (dict(pattern='(('), 'pattern must be a regex'),
    (dict(exclude='[a'), 'exclude must be a regex'),
    (dict(min_rank=0), 'min_rank must be an int >= 1, got 0'),
])
def test_pruning_scope_bad_arguments(kwargs, match):
  with pytest.raises(ValueError, match=match):
    with tf1prune.pruning_scope(**kwargs):
      pass


@pytest.mark.parametrize('locks,match', [
    ('conv', 'locks must be a dict'),
    ({'conv': 0.5}, 'must be a dict of lock arguments'),
    ({'conv': dict(index=0, scope='x')}, r"unknown arguments \['scope'\]"),
])
def test_locking_scope_bad_arguments(locks, match):
  with pytest.raises(ValueError, match=match):
    with tf1prune.locking_scope(locks):
      pass


def test_locking_scope_refuses_a_variable_matched_twice():
  with pytest.raises(ValueError, match='matches several locking_scope regexes'):
    with tf1prune.locking_scope({'conv': dict(index=0), 'weights': dict(index=1)}):
      tf.get_variable('conv/weights', [3, 3])


def test_a_locking_scope_regex_that_matches_nothing_is_a_warning(tf_warnings):
  with tf1prune.locking_scope({'Conv2/weights$': dict(index=0),
                               'conv2/biases$': dict(index=0)}) as locked:
    with tf.variable_scope('conv2'):
      tf.get_variable('weights', [3, 3])
      tf.get_variable('biases', [3])
  assert locked == ['conv2/biases']
  assert [m for m in tf_warnings if 'locking_scope' in m] == [
      "locking_scope regexes ['Conv2/weights$'] match no variable made inside "
      "it, so they lock nothing; the variables made were: conv2/weights, "
      "conv2/biases"]


def test_locking_scope_around_masked_layer_locks_inside_the_mask():
  index = np.s_[:, :, 0, 1]
  with tf1prune.locking_scope({'conv1/weights$': dict(index=index)}):
    tf1prune.masked_conv2d(_images(), 4, 3, scope='conv1')
  (record,) = tf1prune.masked_weight_records()
  assert record.name == 'conv1/weights/locked_weight'
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'sparsity_function_end_step=1,weight_sparsity_map=[conv1/weights:0.9]'),
      step)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf1prune.capture_lock_values_op())
    scores = np.abs(sess.run(record.weight))
    sess.run(tf.assign(step, 1))
    sess.run(p.mask_update_op())
    mask = sess.run(record.mask)
  expected = np_reference.magnitude_mask(scores, 0.9)   # the map's 0.9 applies
  expected[index] = 1.0                                 # locked: kept as it was
  np.testing.assert_array_equal(mask, expected)


def _depthwise_same(x, w):
  """A stride-1 SAME depthwise conv: x [N, H, W, C], w [k, k, C, M]."""
  k = w.shape[0]
  padded = np.pad(x, [(0, 0), (k // 2, k // 2), (k // 2, k // 2), (0, 0)])
  out = np.zeros(x.shape + (w.shape[3],))
  for i in range(k):
    for j in range(k):
      window = padded[:, i:i + x.shape[1], j:j + x.shape[2], :, None]
      out += window * w[i, j]
  return out.reshape(x.shape[:3] + (-1,))


def _pointwise(x, w):
  return np.einsum('nhwc,co->nhwo', x, w[0, 0])


def test_default_pattern_masks_the_pointwise_weights_of_separable_convs():
  images = _images()
  with tf1prune.pruning_scope() as masked:
    net = slim.separable_conv2d(images, 4, 3, depth_multiplier=2,
                                activation_fn=None, scope='sep')
    depthwise_only = slim.separable_conv2d(net, None, 3, depth_multiplier=1,
                                           scope='dw')
  assert masked == ['sep/pointwise_weights']
  assert [m.op.name for m in tf1prune.get_masks()] == [
      'sep/pointwise_weights/mask']
  assert [m.op.name for m in tf1prune.get_masked_weights()] == [
      'sep/pointwise_weights/weights/masked_weight']
  pointwise = tf.global_variables('sep/pointwise_weights')[0]
  depthwise = tf.global_variables('sep/depthwise_weights')[0]
  mask = tf1prune.get_masks()[0]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    half = np.ones(mask.shape.as_list(), np.float32)
    half[..., :2] = 0.0
    sess.run(mask.assign(half))
    got, image, dw, pw = sess.run([net, images, depthwise, pointwise])
    assert sess.run(depthwise_only).shape == (2, 6, 6, 4)
  expected = _pointwise(_depthwise_same(image, dw), pw * half)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
  assert not got[..., :2].any()
