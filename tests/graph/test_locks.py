"""Locks: pinned entries stay bit-identical under every optimizer and restore."""

import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import np_reference

KERNEL = (3, 3, 4, 5)
INDEX = np.s_[:, :, 2, 3]


def _bits(a):
  return np.asarray(a, np.float32).view(np.uint32)


def _kernel(name='conv/weights', shape=KERNEL, seed=0):
  init = np.random.RandomState(seed).randn(*shape).astype(np.float32)
  return tf.get_variable(name, initializer=init), init


def _conv_loss(kernel, weight=None, decay=0.01):
  """A conv net loss on fixed data, plus L2 on the raw variable `weight`."""
  rs = np.random.RandomState(1)
  images = tf.constant(rs.randn(4, 6, 6, KERNEL[2]).astype(np.float32))
  target = tf.constant(rs.randn(4, 6, 6, KERNEL[3]).astype(np.float32))
  out = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], 'SAME')
  loss = tf.reduce_mean(tf.square(out - target))
  if weight is not None:
    loss += decay * tf.nn.l2_loss(weight)
  return loss


def test_zero_lock_names_value_and_record():
  w, init = _kernel()
  with tf.variable_scope('conv'):
    kernel = tf1prune.lock(w, INDEX, value='zero')
  assert kernel.op.name == 'conv/weights/locked_weight'
  names = [v.op.name for v in tf.global_variables()]
  assert names == ['conv/weights', 'conv/lock_mask', 'conv/lock_value']
  assert [v.op.name for v in tf.trainable_variables()] == ['conv/weights']
  (record,) = tf1prune.lock_records()
  assert record.name == 'conv/weights' and record.captured is None
  assert record.effective is kernel
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got, locked = sess.run([kernel, record.locked])
  expected = init.copy()
  expected[INDEX] = 0.0
  np.testing.assert_array_equal(got, expected)
  assert locked.dtype == bool and locked.sum() == 9 and locked[INDEX].all()


def test_lock_records_after_import_with_an_import_scope(tmp_path):
  w, _ = _kernel()
  with tf.variable_scope('conv'):
    tf1prune.lock(w, INDEX, value='current')
  path = str(tmp_path / 'model.meta')
  tf.train.export_meta_graph(filename=path)
  with tf.Graph().as_default():
    tf.train.import_meta_graph(path, import_scope='tower')
    record, = tf1prune.lock_records()
    assert record.name == 'tower/conv/weights'
    assert record.locked.op.name == 'tower/conv/lock_mask'
    assert record.captured.op.name.startswith('tower/conv/')
    assert record.effective.name == 'tower/conv/weights/locked_weight:0'


def test_bool_mask_and_index_lock_their_union_at_a_number():
  w, init = _kernel('b', (6,))
  mask = np.array([True, False, False, False, False, True])
  out = tf1prune.lock(w, index=np.s_[2], mask=mask, value=7.5, scope='b_lock')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got = sess.run(out)
  np.testing.assert_array_equal(got, [7.5, init[1], 7.5, init[3], init[4], 7.5])


def test_array_value_broadcasts_and_ellipsis_locks_everything():
  w, _ = _kernel('w', (2, 3))
  out = tf1prune.lock(w, ..., value=[1.0, 2.0, 3.0], scope='l')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    np.testing.assert_array_equal(sess.run(out), [[1, 2, 3], [1, 2, 3]])


def test_current_lock_fails_loudly_until_captured_then_captures_once():
  w, init = _kernel()
  kernel = tf1prune.lock(w, INDEX, scope='conv')
  capture = tf1prune.capture_lock_values_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match='never captured.*capture_lock_values_op'):
      sess.run(kernel)
    sess.run(capture)
    np.testing.assert_array_equal(sess.run(kernel), init)
    sess.run(tf.assign(w, init + 1.0))
    sess.run(capture)                       # already captured: keeps the value
    got = sess.run(kernel)
    np.testing.assert_array_equal(got[INDEX], init[INDEX])
    np.testing.assert_array_equal(got[:, :, 0], init[:, :, 0] + 1.0)
    sess.run(tf1prune.capture_lock_values_op(force=True))
    np.testing.assert_array_equal(sess.run(kernel)[INDEX], init[INDEX] + 1.0)


def _exactly(message):
  return '^%s$' % re.escape(message)


@pytest.mark.parametrize('kwargs,error,match', [
    # One text for graph and Keras locks (tf1prune.graph.locks.index_mask).
    (dict(), ValueError, _exactly(
        'weight conv/weights needs index= (a NumPy index such as np.s_[:, 0], '
        'or ... for every entry) or mask= (a bool array of shape [3, 3, 4, '
        '5]); got neither')),
    (dict(index=np.s_[:, :, 9]), ValueError, _exactly(
        'index=(slice(None, None, None), slice(None, None, None), 9) does not '
        'fit weight conv/weights of shape [3, 3, 4, 5] (index 9 is out of '
        'bounds for axis 2 with size 4); use a NumPy index within the shape, '
        'such as np.s_[:, 0]')),
    (dict(mask=np.ones((3, 3), bool)), ValueError, _exactly(
        'mask= for weight conv/weights must be a bool array of shape [3, 3, 4, '
        '5], got dtype bool and shape [3, 3]; pass a bool NumPy array of '
        'exactly that shape')),
    (dict(mask=np.ones(KERNEL)), ValueError, _exactly(
        'mask= for weight conv/weights must be a bool array of shape [3, 3, 4, '
        '5], got dtype float64 and shape [3, 3, 4, 5]; pass a bool NumPy array '
        'of exactly that shape')),
    (dict(index=0, value='half'), ValueError, "'current', 'zero', a number"),
    (dict(index=0, value=[1.0, 2.0]), ValueError, 'must broadcast to shape'),
    (dict(index=0, value=tf.zeros(KERNEL)), TypeError, 'got the tensor'),
])
def test_bad_arguments_raise_at_graph_build_time(kwargs, error, match):
  w, _ = _kernel()
  with pytest.raises(error, match=match):
    tf1prune.lock(w, scope='conv', **kwargs)


def test_integer_tensor_is_refused():
  with pytest.raises(ValueError, match='floating-point.*int32'):
    tf1prune.lock(tf.zeros([3], tf.int32), 0, value='zero', scope='i')


def test_reuse_records_once():
  w, _ = _kernel()
  with tf.variable_scope('conv'):
    tf1prune.lock(w, INDEX, value='zero')
  with tf.variable_scope('conv', reuse=True):
    tf1prune.lock(w, INDEX, value='zero')
  assert len(tf1prune.lock_records()) == 1
  assert len(tf.global_variables()) == 3


OPTIMIZERS = {
    'sgd': lambda: tf.train.GradientDescentOptimizer(0.5),
    'momentum': lambda: tf.train.MomentumOptimizer(0.1, 0.9),
    'nesterov': lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    'adam': lambda: tf.train.AdamOptimizer(0.05),
    'rmsprop': lambda: tf.train.RMSPropOptimizer(0.05),
    'rmsprop_centered_momentum': lambda: tf.train.RMSPropOptimizer(
        0.02, momentum=0.9, centered=True),
    'adagrad': lambda: tf.train.AdagradOptimizer(0.2),
    'adadelta': lambda: tf.train.AdadeltaOptimizer(1.0),
    'ftrl': lambda: tf.train.FtrlOptimizer(0.2, l2_regularization_strength=0.01),
}


@pytest.mark.parametrize('optimizer', sorted(OPTIMIZERS))
def test_locked_entries_bit_identical_under_optimizer_and_l2(optimizer,
                                                            tmp_path):
  w, init = _kernel()
  with tf.variable_scope('conv'):
    kernel = tf1prune.lock(w, INDEX)                  # value='current'
  bias = tf.get_variable('bias', initializer=np.arange(1.0, 6.0, dtype=np.float32))
  bias_eff = tf1prune.lock(bias, np.s_[1:3], value=-0.25, scope='bias_lock')
  loss = (_conv_loss(kernel, w) + tf.reduce_sum(tf.square(bias_eff)) +
          0.01 * tf.nn.l2_loss(bias))
  step = tf.train.get_or_create_global_step()
  train = OPTIMIZERS[optimizer]().minimize(loss, global_step=step)
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf1prune.capture_lock_values_op())
    before, bias_before = sess.run([kernel, bias_eff])
    for _ in range(8):
      sess.run(train)
    after, raw, bias_after = sess.run([kernel, w, bias_eff])
    path = saver.save(sess, str(tmp_path / 'model.ckpt'))
  np.testing.assert_array_equal(_bits(after[INDEX]), _bits(init[INDEX]))
  np.testing.assert_array_equal(_bits(bias_after[1:3]), _bits([-0.25, -0.25]))
  free = np.ones(KERNEL, bool)
  free[INDEX] = False
  assert np.all(after[free] != before[free]), 'unlocked entries must train'
  assert np.all(bias_after[[0, 3, 4]] != bias_before[[0, 3, 4]])
  assert np.any(raw[INDEX] != init[INDEX]), 'the hidden raw entries moved'
  # Restore into a new session: the pin survives, no re-capture happens.
  with tf.Session() as sess:
    saver.restore(sess, path)
    sess.run(tf1prune.capture_lock_values_op())
    restored = sess.run(kernel)
  np.testing.assert_array_equal(_bits(restored), _bits(after))


def test_lock_hook_captures_after_init_and_keeps_value_on_resume(tmp_path):
  def build():
    w, init = _kernel()
    kernel = tf1prune.lock(w, INDEX, scope='conv')
    step = tf.train.get_or_create_global_step()
    train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(
        _conv_loss(kernel, w), global_step=step)
    return kernel, w, train, init

  logdir = str(tmp_path)
  with tf.Graph().as_default():
    kernel, _, train, init = build()
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=logdir, hooks=[tf1prune.LockHook()],
        save_checkpoint_steps=5, save_summaries_steps=None) as sess:
      for _ in range(5):
        sess.run(train)
      first = sess.run(kernel)
  np.testing.assert_array_equal(_bits(first[INDEX]), _bits(init[INDEX]))
  with tf.Graph().as_default():
    kernel, w, train, _ = build()
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=logdir, hooks=[tf1prune.LockHook()],
        save_checkpoint_steps=None, save_summaries_steps=None) as sess:
      raw = sess.run(w)
      for _ in range(3):
        sess.run(train)
      resumed = sess.run(kernel)
  assert np.any(raw[INDEX] != init[INDEX])     # a re-capture would take these
  np.testing.assert_array_equal(_bits(resumed[INDEX]), _bits(init[INDEX]))


def _pruned_session_values(compose):
  """Locks entries 0..4 of a 10x10 weight 1..100, prunes to 0.9 twice."""
  init = np.arange(1.0, 101.0, dtype=np.float32).reshape(10, 10)
  w = tf.get_variable('fc/weights', initializer=init)
  tf.train.get_or_create_global_step()
  locked = np.zeros((10, 10), bool)
  locked[0, :5] = True          # the 5 smallest magnitudes
  locked[9, 9] = True           # the largest
  with tf.variable_scope('fc'):
    if compose == 'lock_outside':
      effective = tf1prune.lock(tf1prune.apply_mask(w), mask=locked)
    else:
      effective = tf1prune.apply_mask(tf1prune.lock(w, mask=locked))
  (record,) = tf1prune.masked_weight_records()
  hp = tf1prune.get_pruning_hparams().parse('target_sparsity=0.9')
  p = tf1prune.Pruning(hp, sparsity=tf.placeholder_with_default(0.9, []))
  update = p.mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    # Prune entry [0, 0] before the lock captures: pruned-and-locked.
    sess.run(tf.assign(record.mask[0, 0], 0.0))
    sess.run(tf1prune.capture_lock_values_op())
    sess.run(update)
    # Magnitudes change: the locked small ones become the largest raw values.
    sess.run(tf.assign(w, init[::-1, ::-1] * 1.0))
    sess.run(update)
    return init, locked, sess.run([record.mask, effective, w])


@pytest.mark.parametrize('compose', ['lock_outside', 'lock_inside'])
def test_mask_updates_keep_locked_mask_entries(compose):
  init, locked, (mask, effective, raw) = _pruned_session_values(compose)
  # The selection scores the weight apply_mask saw: the raw one, or the
  # locked one (locked entries read their captured init values).
  scores = np.abs(raw if compose == 'lock_outside'
                  else np.where(locked, init, raw))
  expected_mask = np_reference.magnitude_mask(scores, 0.9)
  expected_mask[locked] = 1.0        # locked entries keep mask 1 ...
  expected_mask[0, 0] = 0.0          # ... and the pruned-and-locked one 0
  np.testing.assert_array_equal(mask, expected_mask)
  if compose == 'lock_outside':      # the old smallest, now largest, kept
    assert expected_mask[0].tolist() == [0.0] + [1.0] * 9
  expected = raw * mask
  expected[locked] = init[locked]
  expected[0, 0] = 0.0
  np.testing.assert_array_equal(effective, expected)


def test_bake_masks_op_writes_masked_and_locked_values_into_variables():
  rs = np.random.RandomState(3)
  inits = [rs.randn(4, 4).astype(np.float32) for _ in range(4)]
  a, b, c, d = [tf.get_variable(n, initializer=v)
                for n, v in zip('abcd', inits)]
  outs = [tf1prune.apply_mask(a, 'a_s')]
  with tf.variable_scope('b_s'):
    outs.append(tf1prune.lock(tf1prune.apply_mask(b), np.s_[0], value=5.0))
  with tf.variable_scope('c_s'):
    outs.append(tf1prune.apply_mask(tf1prune.lock(c, np.s_[0], value=5.0)))
  outs.append(tf1prune.lock(d, np.s_[1], value='zero', scope='d_s'))
  masks = tf1prune.get_masks()
  half = np.tile(np.array([[1, 0, 1, 0]], np.float32), [4, 1])
  bake = tf1prune.bake_masks_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run([tf.assign(m, half) for m in masks])
    expected = sess.run(outs)
    sess.run(bake)
    raw = sess.run([a, b, c, d])
    again = sess.run(outs)
  for e, r, g in zip(expected, raw, again):
    np.testing.assert_array_equal(r, e)
    np.testing.assert_array_equal(g, e)
  assert np.all(raw[1][0] == 5.0) and np.all(raw[2][0] == [5, 0, 5, 0])


def test_bake_after_mask_update_when_built_under_control_dependencies():
  init = np.arange(1.0, 17.0, dtype=np.float32).reshape(4, 4)
  w = tf.get_variable('w', initializer=init)
  tf1prune.apply_mask(w, 'fc')
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.75,sparsity_function_end_step=1'), step)
  with tf.control_dependencies([p.mask_update_op()]):
    update = tf1prune.bake_masks_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 5))
    sess.run(update)
    raw = sess.run(w)
  expected = np.where(init > 12, init, 0.0)
  np.testing.assert_array_equal(raw, expected)


@pytest.mark.parametrize('compose', ['lock_outside', 'lock_inside'])
def test_bake_before_capture_keeps_the_raw_values_a_capture_then_pins(compose):
  # A bake that runs before LockHook (PruningHook(bake_masks=True) in
  # chief_only_hooks runs first) once wrote the uncaptured zeros of the lock
  # into the raw variable, and the capture then pinned those zeros.
  w = tf.get_variable('conv2/weights', [3, 3, 16, 32])
  with tf.variable_scope('conv2'):
    if compose == 'lock_outside':
      tf1prune.lock(tf1prune.apply_mask(w), np.s_[:, :, 7, 5])
    else:
      tf1prune.apply_mask(tf1prune.lock(w, np.s_[:, :, 7, 5]))
  (record,) = tf1prune.masked_weight_records()
  (lock,) = tf1prune.lock_records()
  half = np.zeros([3, 3, 16, 32], np.float32)
  half[..., ::2] = 1.0
  bake = tf1prune.bake_masks_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    init = sess.run(w)
    sess.run(tf.assign(record.mask, half))
    sess.run(bake)
    baked = sess.run(w)
    sess.run(tf1prune.capture_lock_values_op())
    sess.run(bake)
    rebaked, effective = sess.run([w, lock.effective])
  np.testing.assert_array_equal(_bits(baked), _bits(init * half))
  expected = init * half            # the capture took the baked raw values
  np.testing.assert_array_equal(_bits(rebaked), _bits(expected))
  np.testing.assert_array_equal(_bits(effective[:, :, 7, 5]),
                                _bits(expected[:, :, 7, 5]))
  assert np.all(init[:, :, 7, 5] != 0) and np.all(expected[:, :, 7, 4] != 0)
