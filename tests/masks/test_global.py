"""global_pruning_groups: one exact threshold over several weights."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.masks import Block, Element, global_masks, magnitude_mask
from tests.support import np_reference


def _weights(specs):
  """specs: (scope, NumPy value) -> the masked weights, in order."""
  for scope, value in specs:
    w = tf.get_variable(scope + '/weights', initializer=value)
    tf1prune.apply_mask(w, scope)
  return tf1prune.masked_weight_records()


def _update(hparams, sparsity=None):
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams), step,
                       sparsity=sparsity)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 1000))
    sess.run(p.mask_update_op())
    return sess.run([(r.mask, r.threshold) for r in tf1prune.masked_weight_records()])


def test_one_threshold_keeps_exact_count_across_the_group():
  rs = np.random.RandomState(0)
  small = (rs.randn(10, 10) * 0.1).astype(np.float32)
  large = rs.randn(5, 4).astype(np.float32)
  other = rs.randn(6, 6).astype(np.float32)
  _weights([('conv1', small), ('conv2', large), ('fc', other)])
  got = _update('target_sparsity=0.7,sparsity_function_end_step=1,'
                'global_pruning_groups=[conv]')
  joint = np_reference.magnitude_mask(
      np.concatenate([np.abs(small).ravel(), np.abs(large).ravel()]), 0.7)
  np.testing.assert_array_equal(got[0][0], joint[:100].reshape(10, 10))
  np.testing.assert_array_equal(got[1][0], joint[100:].reshape(5, 4))
  assert got[0][0].sum() + got[1][0].sum() == 120 - 84
  assert got[0][1] == got[1][1]
  kept = np.concatenate([np.abs(small)[got[0][0] == 1], np.abs(large)[got[1][0] == 1]])
  assert got[0][1] == np.float32(kept.min())
  # The large layer keeps more than 30%, the small one less.
  assert got[1][0].mean() > 0.3 > got[0][0].mean()
  # fc is in no group: its own threshold.
  np.testing.assert_array_equal(got[2][0], np_reference.magnitude_mask(np.abs(other), 0.7))


def test_two_groups_are_ranked_separately_and_ties_keep_earliest():
  ones = np.ones((4, 4), np.float32)
  _weights([('a1', ones), ('a2', ones), ('b1', ones * 2), ('b2', ones * 3)])
  got = _update('target_sparsity=0.75,sparsity_function_end_step=1,'
                'global_pruning_groups=[^a,^b]')
  # Group a: 32 equal scores, keep 8, the first in flat order: all in a1.
  assert got[0][0].sum() == 8 and got[0][0].ravel()[:8].all()
  assert got[1][0].sum() == 0
  # Group b: keep 8 of 32, all from b2 (larger).
  assert got[2][0].sum() == 0 and got[3][0].sum() == 8


def test_external_sparsity_tensor_drives_the_group():
  rs = np.random.RandomState(1)
  a, b = rs.randn(8, 8).astype(np.float32), rs.randn(3, 3).astype(np.float32)
  _weights([('x', a), ('y', b)])
  got = _update('global_pruning_groups=[.*]', sparsity=tf.constant(0.9))
  joint = np_reference.magnitude_mask(
      np.concatenate([np.abs(a).ravel(), np.abs(b).ravel()]), 0.9)
  np.testing.assert_array_equal(np.concatenate([got[0][0].ravel(), got[1][0].ravel()]),
                                joint)


def test_global_masks_with_block_granularity():
  w1 = np.arange(16.0, dtype=np.float32).reshape(4, 4)
  w2 = np.arange(100.0, 104.0, dtype=np.float32).reshape(2, 2)
  with tf.Session() as sess:
    masks = sess.run(global_masks(
        [(tf.constant(w1), Block(2, 2, 'MAX')), (tf.constant(w2), Element())],
        0.5, magnitude_mask))
  # Scores: 4 block maxima (5, 7, 13, 15) and 4 elements (100..103): keep 4.
  np.testing.assert_array_equal(masks[0][0], np.zeros((4, 4)))
  np.testing.assert_array_equal(masks[1][0], np.ones((2, 2)))


def test_an_nm_member_keeps_its_pattern_and_the_others_rank_together():
  # N:M ranks no scores: global_masks still gives one result per member, so
  # the members after it get theirs.
  rs = np.random.RandomState(4)
  nm = rs.randn(8, 3).astype(np.float32)
  a, b = rs.randn(5, 5).astype(np.float32), rs.randn(4, 6).astype(np.float32)
  _weights([('a', a), ('nm', nm), ('b', b)])
  got = _update('granularity_map=[nm:2of4],global_pruning_groups=[.*]',
                sparsity=tf.constant(0.6))
  joint = np_reference.magnitude_mask(
      np.concatenate([np.abs(a).ravel(), np.abs(b).ravel()]), 0.6)
  np.testing.assert_array_equal(got[0][0].ravel(), joint[:25])
  np.testing.assert_array_equal(got[2][0].ravel(), joint[25:])
  kept = np.concatenate([np.abs(a).ravel(), np.abs(b).ravel()])[joint == 1]
  assert got[0][1] == got[2][1] == kept.min()
  groups = np.argsort(-np.abs(nm).T.reshape(-1, 4), 1, kind='stable')[:, :2]
  want = np.zeros([6, 4], np.float32)
  np.put_along_axis(want, groups, 1.0, 1)
  np.testing.assert_array_equal(got[1][0], want.reshape(3, 8).T)
  assert got[1][1] == np.abs(nm)[want.reshape(3, 8).T == 1].min()


def _decayed_with_nm(nm_first):
  """a, b and an N:M member in one group, threshold_decay=0.5: the masks and
  thresholds of a and b after three updates."""
  with tf.Graph().as_default():
    rs = np.random.RandomState(4)
    nm = (rs.randn(8, 3) * 10).astype(np.float32)
    specs = [('a', rs.randn(5, 5).astype(np.float32)),
             ('b', rs.randn(4, 6).astype(np.float32))]
    _weights([('nm', nm)] + specs if nm_first else specs + [('nm', nm)])
    step = tf.train.get_or_create_global_step()
    update = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
        'target_sparsity=0.6,begin_pruning_step=0,sparsity_function_end_step=4,'
        'pruning_frequency=1,threshold_decay=0.5,granularity_map=[nm:2of4],'
        'global_pruning_groups=[.*]'), step).mask_update_op()
    records = dict((r.name, r) for r in tf1prune.masked_weight_records())
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for s in (1, 2, 3):
        sess.run(tf.assign(step, s))
        sess.run(update)
      return sess.run([(records[name + '/weights'].mask,
                        records[name + '/weights'].threshold)
                       for name in ('a', 'b')]), dict(specs)


def test_threshold_decay_of_a_group_averages_its_own_threshold_not_nm():
  # The group's threshold decays with the group's own, never with the N:M
  # member's (its smallest kept |w|): a and b keep the same entries with the
  # N:M member first as with it last.
  first, values = _decayed_with_nm(True)
  last, _ = _decayed_with_nm(False)
  (mask_a, t_a), (mask_b, t_b) = last
  assert t_a == t_b
  np.testing.assert_array_equal(mask_a, np.abs(values['a']) >= t_a)
  np.testing.assert_array_equal(mask_b, np.abs(values['b']) >= t_b)
  for (mask, t), (want, want_t) in zip(first, last):
    assert t == want_t
    np.testing.assert_array_equal(mask, want)


def test_conditional_update_with_groups_under_cond():
  rs = np.random.RandomState(2)
  _weights([('c1', rs.randn(5, 5).astype(np.float32)),
            ('c2', rs.randn(5, 5).astype(np.float32))])
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=1,pruning_frequency=1,'
      'global_pruning_groups=[c]'), step)
  op = p.conditional_mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 5))
    sess.run(op)
    total = sum(sess.run(tf.reduce_sum(m)) for m in tf1prune.get_masks())
  assert total == 25


def test_member_with_its_own_sparsity_is_refused():
  _weights([('conv1', np.ones((2, 2), np.float32))])
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'global_pruning_groups=[conv],weight_sparsity_map=[conv1:0.8]'), step)
  with pytest.raises(ValueError, match='in global_pruning_groups .conv. and in '
                     'weight_sparsity_map'):
    p.mask_update_op()


def test_weight_in_two_groups_is_refused():
  _weights([('conv1', np.ones((2, 2), np.float32))])
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'global_pruning_groups=[conv,1]'), step)
  with pytest.raises(ValueError, match='matches several global_pruning_groups'):
    p.mask_update_op()


def test_bad_regex_is_refused_at_construction():
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError, match=r"global_pruning_groups entry '\(' is not"):
    tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
        'global_pruning_groups=[(]'))
