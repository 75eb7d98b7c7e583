"""Coupled filter pruning through `Pruning`: granularity_map value coupled_filter."""

import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import np_reference
from tests.support.nets import small_resnet_v1

TF1 = tf.__version__.startswith('1.')


# ---------------------------------------------------------------- the net


def _conv(x, n, k, scope, activation=tf.nn.relu, lock=None):
  """A masked conv layer; `lock`: kwargs of `tf1prune.lock` on the masked weight."""
  with tf.variable_scope(scope):
    w = tf.get_variable('weights', [k, k, x.get_shape().as_list()[-1], n])
    kernel = tf1prune.apply_mask(w)
    if lock is not None:
      kernel = tf1prune.lock(kernel, **lock)
    y = tf.nn.conv2d(x, kernel, [1, 1, 1, 1], 'SAME')
    y = tf.nn.bias_add(y, tf.get_variable('biases', [n],
                                          initializer=tf.zeros_initializer()))
    return activation(y) if activation else y


def _residual_net(width=8, locks=None):
  """stem -> [b1 -> b2] + stem -> head -> mean -> logits -> a loss.

  Groups: (stem, b2) width units, (b1) 4, (head) 6, (logits) 3. The loss
  (a mean of squares, no softmax) reads the logits: they are no model output
  (see tests/channels/test_outputs.py), so coupled_filter prunes them too.
  """
  locks = locks or {}
  x = tf.placeholder(tf.float32, [2, 8, 8, 3], name='x')
  stem = _conv(x, width, 3, 'stem', None, locks.get('stem'))
  branch = _conv(tf.nn.relu(stem), 4, 1, 'b1', lock=locks.get('b1'))
  branch = _conv(branch, width, 3, 'b2', None, locks.get('b2'))
  out = tf.nn.relu(stem + branch)
  head = _conv(out, 6, 1, 'head')
  pooled = tf.reduce_mean(head, [1, 2])
  logits = tf1prune.masked_fully_connected(pooled, 3, activation_fn=None,
                                           scope='logits')
  tf.reduce_mean(tf.square(logits), name='loss')
  return logits


GROUPS = [['stem', 'b2'], ['b1'], ['head'], ['logits']]


def _values(seed=0):
  """Loads distinct random weights; returns {scope: NumPy value}."""
  rs = np.random.RandomState(seed)
  return {r.name.split('/')[0]: rs.randn(*r.weight.get_shape().as_list())
          .astype(np.float32) for r in tf1prune.masked_weight_records()}


def _session(values):
  sess = tf.Session()
  sess.run(tf.global_variables_initializer())
  sess.run(tf1prune.capture_lock_values_op())
  for r in tf1prune.masked_weight_records():
    var = [v for v in tf.global_variables() if v.op.name == r.name][0]
    var.load(values[r.name.split('/')[0]], sess)
  return sess


def _masks(sess):
  return {r.name.split('/')[0]: sess.run(r.mask)
          for r in tf1prune.masked_weight_records()}


def _pruning(text, sparsity_end=1):
  step = tf.train.get_or_create_global_step()
  hparams = tf1prune.get_pruning_hparams().parse(
      'sparsity_function_end_step=%d,pruning_frequency=1' % sparsity_end
  ).parse(text)     # text may set pruning_frequency again
  return step, tf1prune.Pruning(hparams)


def _update(text, values, step_value=1000):
  step, p = _pruning(text)
  update = p.mask_update_op()
  sess = _session(values)
  sess.run(tf.assign(step, step_value))
  sess.run(update)
  return sess


# ---------------------------------------------------------------- reference


def _norms(w, importance):
  m = np.abs(w.astype(np.float64)).reshape(-1, w.shape[-1])
  if importance == 'max':
    return m.max(0)
  if importance == 'l2':
    return np.sqrt((m ** 2).sum(0))
  return m.sum(0)


def _unit_scores(values, members, importance='l1', reduction='sum'):
  norms = np.stack([_norms(values[m], importance) for m in members])
  return {'sum': norms.sum, 'mean': norms.mean, 'max': norms.max}[reduction](0)


def _keep(n, sparsity, minimum=1, multiple=1):
  keep = max(np_reference.keep_count(n, sparsity), min(minimum, n))
  return min(-(-keep // multiple) * multiple, n)


def _top(scores, k):
  """Unit mask keeping the k best scores, ties: the earliest."""
  order = np.lexsort((np.arange(scores.size), -scores))
  kept = np.zeros(scores.size, np.float32)
  kept[order[:k]] = 1.0
  return kept


def _expected(values, sparsity, importance='l1', reduction='sum', minimum=1,
              multiple=1, groups=GROUPS, forced=None):
  """{scope: unit mask} of every group pruned alone at `sparsity`."""
  result = {}
  for members in groups:
    scores = _unit_scores(values, members, importance, reduction)
    if forced is not None and members[0] in forced:
      scores[forced[members[0]]] = np.inf
    kept = _top(scores, _keep(scores.size, sparsity, minimum, multiple))
    if forced is not None and members[0] in forced:
      kept[forced[members[0]]] = 1.0
    result.update((m, kept) for m in members)
  return result


def _check_filters(masks, expected):
  for scope, kept in expected.items():
    np.testing.assert_array_equal(
        masks[scope], np.broadcast_to(kept, masks[scope].shape), scope)


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize('importance,reduction', [
    ('l1', 'sum'), ('l2', 'mean'), ('max', 'max'), ('l2', 'sum'),
    ('l1', 'max')])
def test_masks_equal_the_numpy_reference_per_group(importance, reduction):
  _residual_net()
  values = _values()
  sess = _update('target_sparsity=0.5,granularity_map=[.*:coupled_filter],'
                 'group_importance=%s,channel_group_reduction=%s' %
                 (importance, reduction), values)
  masks = _masks(sess)
  expected = _expected(values, 0.5, importance, reduction)
  _check_filters(masks, expected)
  np.testing.assert_array_equal(masks['stem'][0, 0, 0], masks['b2'][0, 0, 0])
  # The threshold: the smallest kept unit score, shared by the group.
  scores = _unit_scores(values, ['stem', 'b2'], importance, reduction)
  thresholds = {r.name.split('/')[0]: sess.run(r.threshold)
                for r in tf1prune.masked_weight_records()}
  # (The graph sums each filter's norm in float32.)
  assert thresholds['stem'] == thresholds['b2']
  np.testing.assert_allclose(thresholds['stem'],
                             scores[expected['stem'] == 1].min(), rtol=1e-6)


def test_coupled_groups_lists_what_the_update_prunes():
  _residual_net()
  _, p = _pruning('granularity_map=[.*:coupled_filter],do_not_prune=[logits]')
  assert [str(item.group) for item in p.coupled_groups()] == [
      '8 channels: stem/weights, b2/weights', '4 channels: b1/weights',
      '6 channels: head/weights']


@pytest.mark.parametrize('width,sparsity,minimum,multiple', [
    (16, 0.9, 1, 1), (16, 0.9, 5, 1), (16, 0.9, 1, 4), (16, 0.5, 1, 8),
    (16, 0.3, 1, 8), (16, 0.95, 0, 1), (16, 0.6, 3, 4), (8, 0.5, 1, 16)])
def test_min_channels_and_rounding_to_a_multiple(width, sparsity, minimum,
                                                 multiple):
  _residual_net(width)
  values = _values(1)
  sess = _update('target_sparsity=%r,granularity_map=[.*:coupled_filter],'
                 'channel_group_min_channels=%d,channel_group_multiple=%d' %
                 (sparsity, minimum, multiple), values)
  masks = _masks(sess)
  expected = _expected(values, sparsity, minimum=minimum, multiple=multiple)
  _check_filters(masks, expected)
  kept = int(masks['stem'][0, 0, 0].sum())
  assert kept == _keep(width, sparsity, minimum, multiple)
  assert kept == width or kept % multiple == 0


def test_gradual_schedule_steps_prune_more_units_each_time():
  _residual_net(16)
  values = _values(2)
  step, p = _pruning('initial_sparsity=0.0,target_sparsity=0.75,'
                     'begin_pruning_step=0,sparsity_function_begin_step=0,'
                     'granularity_map=[.*:coupled_filter],pruning_frequency=10',
                     sparsity_end=100)
  update = p.conditional_mask_update_op()
  sess = _session(values)
  kept = []
  for t in (5, 10, 30, 60, 100, 200):
    sess.run(tf.assign(step, t))
    sess.run(update)
    # Step 5 is not a pruning step yet (last update 0 + frequency 10 > 5).
    sparsity = 0.0 if t == 5 else np_reference.schedule(t, 0.0, 0.75, 0, 100, 3.0)
    masks = _masks(sess)
    _check_filters(masks, _expected(values, np.float32(sparsity)))
    kept.append(int(masks['stem'][0, 0, 0].sum()))
  assert kept == sorted(kept, reverse=True) and kept[0] == 16 and kept[-1] == 4


def test_a_group_target_comes_from_weight_sparsity_map():
  _residual_net(16)
  values = _values(3)
  sess = _update('target_sparsity=0.5,granularity_map=[.*:coupled_filter],'
                 'weight_sparsity_map=[^stem:0.75,^b2:0.75]', values)
  masks = _masks(sess)
  expected = _expected(values, 0.5)
  expected.update(_expected(values, 0.75, groups=[['stem', 'b2']]))
  _check_filters(masks, expected)
  assert masks['stem'][0, 0, 0].sum() == 4 and masks['head'][0, 0, 0].sum() == 3


@pytest.mark.parametrize('sparsity_map,what', [
    ('[^stem:0.75]', 'weight_sparsity_map targets: 0.75 for stem/weights; '
                     'None for b2/weights'),
    ('[^stem:0.75,^b2:0.5]', 'weight_sparsity_map targets: 0.75 for '
                             'stem/weights; 0.5 for b2/weights')])
def test_different_targets_in_one_group_are_refused(sparsity_map, what):
  _residual_net()
  _, p = _pruning('granularity_map=[.*:coupled_filter],weight_sparsity_map=%s'
                  % sparsity_map)
  message = ('channel group [8 channels: stem/weights, b2/weights] is pruned '
             'as one unit (coupled_filter) but its members have different ')
  with pytest.raises(ValueError, match='^' + re.escape(message)) as error:
    p.mask_update_op()
  assert what in str(error.value)
  assert 'give all its members the same one' in str(error.value)


def test_global_ranking_ranks_the_units_of_all_groups_together():
  _residual_net(16)
  values = _values(4)
  sess = _update('target_sparsity=0.7,granularity_map=[.*:coupled_filter],'
                 'global_pruning_groups=[^(stem|b1|b2|head)/],'
                 'channel_group_min_channels=2,channel_group_multiple=2,'
                 'do_not_prune=[logits]', values)
  masks = _masks(sess)
  groups = [['stem', 'b2'], ['b1'], ['head']]
  scores = [_unit_scores(values, g) for g in groups]
  joint = np.concatenate(scores)
  chosen = np.split(_top(joint, np_reference.keep_count(joint.size, 0.7)),
                    np.cumsum([s.size for s in scores])[:-1])
  for members, unit_scores, kept in zip(groups, scores, chosen):
    wanted = _keep(unit_scores.size, 1.0 - kept.sum() / kept.size, 2, 2)
    wanted = max(wanted, int(kept.sum()))
    expected = _top(unit_scores, wanted)
    assert (expected >= kept).all()
    _check_filters(masks, {m: expected for m in members})
  assert (masks['logits'] == 1).all()
  thresholds = {sess.run(r.threshold) for r in tf1prune.masked_weight_records()
                if not r.name.startswith('logits')}
  assert len(thresholds) == 1
  np.testing.assert_allclose(thresholds.pop(),
                             joint[np.concatenate(chosen) == 1].min(), rtol=1e-6)


def test_a_group_split_over_two_global_groups_is_refused():
  _residual_net()
  _, p = _pruning('granularity_map=[.*:coupled_filter],'
                  'global_pruning_groups=[^stem,^b]')
  with pytest.raises(ValueError, match='different global_pruning_groups'):
    p.mask_update_op()


def test_a_group_with_members_of_other_granularities_stays_dense(tf_warnings):
  _residual_net()
  values = _values(5)
  sess = _update('target_sparsity=0.5,granularity_map=[^(stem|b1|head)/:'
                 'coupled_filter,^b2/:filter]', values)
  masks = _masks(sess)
  assert (masks['stem'] == 1).all()
  b2 = _top(_norms(values['b2'], 'l1'), 4)   # filter, alone
  expected = _expected(values, 0.5, groups=[['b1'], ['head']])
  expected['b2'] = b2
  _check_filters(masks, expected)
  assert any('[8 channels: stem/weights, b2/weights] has members not pruned '
             'with coupled_filter (b2/weights' in w for w in tf_warnings)


def test_do_not_prune_on_one_member_keeps_the_whole_group_dense(tf_warnings):
  _residual_net()
  values = _values(6)
  sess = _update('granularity_map=[.*:coupled_filter],do_not_prune=[^b2]',
                 values)
  masks = _masks(sess)
  assert (masks['stem'] == 1).all() and (masks['b2'] == 1).all()
  _check_filters(masks, _expected(values, 0.5, groups=[['b1'], ['head']]))
  assert any('stem/weights stay dense' in w for w in tf_warnings)


def test_a_blocked_group_stays_dense_with_a_warning(tf_warnings):
  x = tf.placeholder(tf.float32, [2, 6, 6, 4])
  branch = _conv(x, 4, 1, 'branch', None)
  tf.reduce_mean(_conv(tf.nn.relu(x + branch), 5, 1, 'next'))   # a loss
  values = _values(7)
  sess = _update('granularity_map=[.*:coupled_filter]', values)
  masks = _masks(sess)
  assert (masks['branch'] == 1).all()
  _check_filters(masks, _expected(values, 0.5, groups=[['next']]))
  assert any('blocked (added to Placeholder:0' in w for w in tf_warnings)


def test_a_kept_locked_entry_keeps_its_unit_in_every_member():
  # Unit 2 of (stem, b2) scores lowest once made small: without the lock it
  # would go. A lock on one of its stem entries (mask 1) keeps it everywhere.
  lock = dict(index=np.s_[0, 0, 0, 2], value='current')
  _residual_net(locks={'stem': lock})
  values = _values(8)
  values['stem'][..., 2] *= 1e-3
  values['b2'][..., 2] *= 1e-3
  sess = _update('granularity_map=[.*:coupled_filter]', values)
  masks = _masks(sess)
  assert _expected(values, 0.5)['stem'][2] == 0
  expected = _expected(values, 0.5, forced={'stem': 2})
  _check_filters(masks, expected)
  assert masks['stem'][..., 2].all() and masks['b2'][..., 2].all()


def test_pruned_locked_entries_stay_zero_in_kept_units():
  # The lock holds stem[0, 0, 0, :], all pruned (mask 0) before the update:
  # they force no unit, and stay zero in the units the update keeps.
  _residual_net(locks={'stem': dict(index=np.s_[0, 0, 0, :], value='zero')})
  values = _values(9)
  step, p = _pruning('granularity_map=[.*:coupled_filter]')
  update = p.mask_update_op()
  sess = _session(values)
  stem = [r for r in tf1prune.masked_weight_records()
          if r.name == 'stem/weights'][0]
  start = np.ones(stem.mask.get_shape().as_list(), np.float32)
  start[0, 0, 0, :] = 0.0
  stem.mask.load(start, sess)
  sess.run(tf.assign(step, 1000))
  sess.run(update)
  masks = _masks(sess)
  expected = _expected(values, 0.5)
  assert (masks['stem'][0, 0, 0] == 0).all()
  masks['stem'][0, 0, 0] = expected['stem']
  _check_filters(masks, expected)


def test_coupled_filter_on_a_weight_in_no_group_stays_dense(tf_warnings):
  w = tf.get_variable('lonely/weights', [4, 6])
  with tf.variable_scope('lonely'):
    tf.matmul(tf.ones([2, 6]), tf1prune.apply_mask(w), transpose_b=True)
  sess = _update('granularity_map=[.*:coupled_filter]',
                 {'lonely': np.arange(24, dtype=np.float32).reshape(4, 6)})
  assert (_masks(sess)['lonely'] == 1).all()
  assert any('lonely/weights feed no NHWC Conv2D' in w for w in tf_warnings)


# ---------------------------------------------------------------- hparams


@pytest.mark.parametrize('text,message', [
    ('channel_group_reduction=prod',
     "channel_group_reduction must be 'sum', 'mean' or 'max', got 'prod'"),
    ('channel_group_min_channels=-1',
     'channel_group_min_channels must be >= 0 (0: a group may lose every '
     'channel), got -1'),
    ('channel_group_multiple=0',
     'channel_group_multiple must be >= 1 (1: no rounding; 8, 16 or 32 for '
     'accelerators), got 0')])
def test_bad_channel_group_hparams_are_refused(text, message):
  with pytest.raises(ValueError, match='^' + re.escape(message)):
    tf1prune.PruningSpec.from_hparams(tf1prune.get_pruning_hparams().parse(text))


def test_spec_builds_the_coupled_filter_granularity():
  spec = tf1prune.PruningSpec.from_hparams(tf1prune.get_pruning_hparams().parse(
      'granularity_map=[conv:coupled_filter],group_importance=l2,'
      'channel_group_reduction=mean,channel_group_min_channels=8,'
      'channel_group_multiple=16'))
  assert spec.channel_groups == ('mean', 8, 16)
  assert repr(spec.weight('conv1/weights').granularity) == (
      "CoupledFilter('l2', 'mean', min_channels=8, multiple=16)")
  defaults = tf1prune.get_pruning_hparams()
  assert (defaults.channel_group_reduction, defaults.channel_group_min_channels,
          defaults.channel_group_multiple) == ('sum', 1, 1)


# ---------------------------------------------------------------- tf_slim


@pytest.mark.parametrize('normalized', [
    False, pytest.param(True, marks=pytest.mark.skipif(
        not TF1, reason='tf_slim.batch_norm cannot be built on TF 2.x (it '
        'imports tf_keras.legacy_tf_layers); needs tf1prune.batch_norm'))])
def test_pruning_scope_on_a_tf_slim_resnet_finds_and_prunes_its_groups(
    normalized):
  images = tf.placeholder(tf.float32, [2, 32, 32, 3], name='images')
  small_resnet_v1(images, 5, normalized)
  _, p = _pruning('target_sparsity=0.5,granularity_map=[.*:coupled_filter],'
                  'do_not_prune=[logits]')
  groups = [[m.name.replace('resnet/', '').replace('/weights', '')
             for m in item.group.members] for item in p.coupled_groups()]
  unit = 'block%d/unit_%d/bottleneck_v1/'
  assert groups[0] == ['conv1']
  # Each block's residual stream: the projection shortcut and every conv3.
  for b in (1, 2):
    assert [unit % (b, 1) + 'shortcut', unit % (b, 1) + 'conv3',
            unit % (b, 2) + 'conv3'] in groups
  assert [unit % (1, 2) + 'conv1'] in groups
  assert len(groups) == 1 + 2 * (1 + 2 * 2)
  update = p.mask_update_op()
  sess = tf.Session()
  sess.run(tf.global_variables_initializer())
  weights = {r.name: sess.run(r.weight) for r in tf1prune.masked_weight_records()}
  sess.run(tf.assign(tf.train.get_global_step(), 1000))
  sess.run(update)
  for item in p.coupled_groups():
    names = [m.name for m in item.group.members]
    scores = sum(_norms(weights[n], 'l1') for n in names)
    kept = _top(scores, _keep(scores.size, 0.5))
    for record in (t.record for t in item.targets):
      mask = sess.run(record.mask)
      np.testing.assert_array_equal(mask, np.broadcast_to(kept, mask.shape))


def _stops_warnings(tf_warnings):
  return [w for w in tf_warnings if 'where the shrink stops' in w]


def test_a_group_that_reaches_a_stop_is_pruned_with_one_warning(tf_warnings):
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  a = _conv(x, 4, 1, 'a')
  summed = tf.cumsum(a, axis=1, name='running')
  tf.reduce_mean(_conv(summed, 5, 1, 'next'))   # a loss
  values = _values(8)
  step, p = _pruning('granularity_map=[.*:coupled_filter]')
  p.coupled_groups()
  update = p.mask_update_op()
  sess = _session(values)
  sess.run(tf.assign(step, 1000))
  sess.run(update)
  _check_filters(_masks(sess), _expected(values, 0.5, groups=[['a'],
                                                              ['next']]))
  assert _stops_warnings(tf_warnings) == [
      'coupled_filter: channel group [4 channels: a/weights] reaches running '
      '(Cumsum), where the shrink stops its channels (Cumsum is not among '
      'the ops the shrink passes): its filters are pruned, but the exported '
      'graph keeps them']


def test_groups_whose_channels_reach_only_layers_and_losses_do_not_warn(
    tf_warnings):
  _residual_net()
  values = _values(9)
  _update('granularity_map=[.*:coupled_filter]', values)
  assert _stops_warnings(tf_warnings) == []
  assert [g.stop for g in tf1prune.find_channel_groups()] == [None] * 4
