"""LotteryTicket: snapshot, prune |mask * w|, rewind keeping masks; the example."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import np_reference
from tests.support.checkout import ROOT



def _layer(name, value):
  w = tf.get_variable(name + '/weights', initializer=value)
  tf1prune.apply_mask(w, name)
  return w


def test_round_sparsity():
  assert [tf1prune.round_sparsity(r, 0.5) for r in range(4)] == [
      0.0, 0.5, 0.75, 0.875]
  with pytest.raises(ValueError, match=r'rate must be in \[0, 1\), got 1.0'):
    tf1prune.round_sparsity(1, 1.0)
  with pytest.raises(ValueError, match='round_index must be >= 0'):
    tf1prune.round_sparsity(-1, 0.2)


def test_iterative_rounds_nest_masks_and_rewind_to_the_snapshot():
  rs = np.random.RandomState(0)
  init = rs.randn(8, 8).astype(np.float32)
  w = _layer('fc', init)
  ticket = tf1prune.LotteryTicket()
  (record,) = ticket.records
  assert ticket.snapshots['fc/weights'].op.name == 'lottery_ticket/fc/weights'
  sparsity = tf.placeholder(tf.float32, [])
  prune, rewind = ticket.prune_op(sparsity), ticket.rewind_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(ticket.snapshot_op())
    previous = np.ones((8, 8), np.float32)
    for r in range(1, 4):
      trained = rs.randn(8, 8).astype(np.float32)     # stands for training
      sess.run(tf.assign(w, trained))
      s = tf1prune.round_sparsity(r, 0.5)
      sess.run(prune, {sparsity: s})
      mask = sess.run(record.mask)
      expected = np_reference.magnitude_mask(np.abs(trained * previous), s)
      np.testing.assert_array_equal(mask, expected)
      assert mask.sum() == 64 - round(64 * s)
      assert np.all(mask <= previous), 'masks only shrink'
      sess.run(rewind)
      np.testing.assert_array_equal(sess.run(w), init * mask)
      previous = mask


def test_late_rewind_snapshot_and_reinitialized_optimizer_slots():
  w = _layer('fc', np.arange(1.0, 17.0, dtype=np.float32).reshape(4, 4))
  loss = tf.reduce_sum(tf.square(tf1prune.get_masked_weights()[0]))
  opt = tf.train.AdamOptimizer(0.1)
  step = tf.train.get_or_create_global_step()
  train = opt.minimize(loss, global_step=step)
  ticket = tf1prune.LotteryTicket()
  rewind = ticket.rewind_op(reinitialize=opt.variables() + [step])
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    sess.run(ticket.snapshot_op())                 # rewind point: step 1
    at_k = sess.run(w)
    for _ in range(3):
      sess.run(train)
    sess.run(ticket.prune_op(0.75))
    sess.run(rewind)
    mask = sess.run(tf1prune.get_masks()[0])
    np.testing.assert_array_equal(sess.run(w), at_k * mask)
    assert sess.run(step) == 0
    slots = [opt.get_slot(w, n) for n in opt.get_slot_names()]
    for slot in sess.run(slots):
      assert not slot.any()


def test_global_prune_op_one_threshold_over_layers():
  small = np.arange(1.0, 17.0, dtype=np.float32).reshape(4, 4)
  large = small * 100.0
  _layer('a', small)
  _layer('b', large)
  ticket = tf1prune.LotteryTicket()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(ticket.prune_op(0.5, global_pruning=True))
    a, b = sess.run(tf1prune.get_masks())
  assert a.sum() == 0 and b.sum() == 16


def test_rewind_without_snapshot_fails_loudly():
  _layer('fc', np.ones((2, 2), np.float32))
  ticket = tf1prune.LotteryTicket()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    with pytest.raises(tf.errors.InvalidArgumentError, match='no snapshot yet'):
      sess.run(ticket.rewind_op())


@pytest.mark.parametrize('sparsity', [
    1.5, 1.0, -0.1, float('nan'), True,
    np.array(1.5), np.array(-0.1), np.array(True)])
def test_prune_op_refuses_a_sparsity_outside_0_1_while_the_graph_is_built(
    sparsity):
  # 1.5 and 1.0 would prune every weight of the network. A 0-d array is a
  # number here, not a tensor: each value is refused by name while the op
  # is built, not when it runs (1.5, -0.1) or in a comparison (True).
  tf1prune.apply_mask(tf.get_variable('fc/weights', [64, 32]), 'fc')
  ticket = tf1prune.LotteryTicket()
  shown = sparsity.item() if isinstance(sparsity, np.ndarray) else sparsity
  with pytest.raises(ValueError, match=re.escape(
      'sparsity must be in [0, 1), got %r: the fraction of each weight that '
      'is pruned' % (shown,))):
    ticket.prune_op(sparsity)


def test_prune_op_fed_a_sparsity_outside_0_1_fails_and_keeps_the_masks():
  w = tf.get_variable('fc/weights', [64, 32])
  tf1prune.apply_mask(w, 'fc')
  ticket = tf1prune.LotteryTicket()
  (record,) = ticket.records
  sparsity = tf.placeholder(tf.float32, [])
  prune = ticket.prune_op(sparsity)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=re.escape('sparsity must be in [0, 1), got')):
      sess.run(prune, {sparsity: 1.5})
    assert sess.run(record.mask).sum() == 64 * 32
    sess.run(prune, {sparsity: 0.75})
    trained = sess.run(w)
    mask = sess.run(record.mask)
  np.testing.assert_array_equal(
      mask, np_reference.magnitude_mask(np.abs(trained), 0.75))
  assert mask.sum() == 512


def test_masked_weights_that_are_not_variables_are_refused_or_skipped():
  tf1prune.apply_mask(tf.constant(np.ones((2, 2), np.float32)), 'const')
  with pytest.raises(ValueError, match='found no masked weight that is a variable'):
    tf1prune.LotteryTicket()
  _layer('fc', np.ones((2, 2), np.float32))
  assert [r.name for r in tf1prune.LotteryTicket(scope='t2').records] == [
      'fc/weights']


def test_a_lock_under_the_mask_is_refused_with_the_order_to_use():
  w = tf.get_variable('fc/weights', initializer=tf.ones_initializer(),
                      shape=[4, 4])
  with tf.variable_scope('fc'):
    tf1prune.apply_mask(tf1prune.lock(w, np.s_[0, 0], value=0.5))
  with pytest.raises(ValueError, match=re.escape(
      'LotteryTicket: the masked weights fc/weights/locked_weight are locks '
      'under the mask (apply_mask(lock(w))), whose snapshot and rewind would '
      'not see the lock; build them as lock(apply_mask(w))')):
    tf1prune.LotteryTicket()
  assert not [v for v in tf.global_variables()
              if v.op.name.startswith('lottery_ticket')]   # nothing made


def test_snapshot_survives_save_and_restore(tmp_path):
  init = np.arange(1.0, 5.0, dtype=np.float32).reshape(2, 2)
  w = _layer('fc', init)
  ticket = tf1prune.LotteryTicket()
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(ticket.snapshot_op())
    sess.run(tf.assign(w, -init))
    path = saver.save(sess, str(tmp_path / 'ckpt'))
  with tf.Session() as sess:
    saver.restore(sess, path)
    sess.run(ticket.rewind_op())
    np.testing.assert_array_equal(sess.run(w), init)


def test_example_script_prints_accuracy_per_round():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, 'examples', 'lottery_ticket.py'),
       '--rounds', '2', '--steps', '60', '--rate', '0.5'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
      timeout=300)
  assert result.returncode == 0, result.stderr.decode()[-2000:]
  lines = result.stdout.decode().strip().splitlines()
  assert lines[0].split() == ['round', 'sparsity', 'ticket_acc',
                              'random_reinit_acc']
  rows = [line.split() for line in lines[1:]]
  assert [r[:2] for r in rows] == [['0', '0.000'], ['1', '0.500'], ['2', '0.750']]
  assert all(0.5 < float(r[2]) <= 1.0 for r in rows)


def test_example_script_bad_flag_is_one_line_error():
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, 'examples', 'lottery_ticket.py'),
       '--rate', '1.5'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      cwd=ROOT, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert result.returncode == 2
  assert result.stderr.decode().strip().splitlines() == [
      'lottery_ticket: error: --rate must be in [0, 1), got 1.5']


def test_prune_op_keeps_the_mask_entries_under_a_lock():
  # prune_op once pruned locked entries: the mask said 0 where the network
  # kept using the locked value (Pruning and Keras' prune keep them).
  w = tf.get_variable('conv/weights', [3, 3, 8, 16])
  with tf.variable_scope('conv'):
    kernel = tf1prune.lock(tf1prune.apply_mask(w), np.s_[:, :, 2, 3])
  ticket = tf1prune.LotteryTicket()
  (record,) = ticket.records
  prune = ticket.prune_op(0.75)
  locked = np.zeros([3, 3, 8, 16], bool)
  locked[:, :, 2, 3] = True
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf1prune.capture_lock_values_op())
    init = sess.run(w)
    # The locked entries become the smallest magnitudes.
    sess.run(tf.assign(w, np.where(locked, init * 1e-3, init)))
    trained = sess.run(w)
    sess.run(prune)
    mask, effective = sess.run([record.mask, kernel])
  expected = np_reference.magnitude_mask(np.abs(trained), 0.75)
  assert expected[locked].sum() == 0
  expected[locked] = 1.0
  np.testing.assert_array_equal(mask, expected)
  np.testing.assert_array_equal(effective[locked], init[locked])
