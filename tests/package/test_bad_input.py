"""Bad input is refused while the graph is built, with the name and the value.

Also pins down what happens with float16/bfloat16 weights (they work) and with
NaN or Inf weights (kept by the mask, the threshold never NaN, a warning on
stderr), see docs/reliability.md.
"""

import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.training import pruning
from tf1prune.plan.spec import validate_hparams


def _hp(**values):
  hp = tf1prune.get_pruning_hparams()
  for name, value in values.items():
    setattr(hp, name, value)
  return hp


# ---------------------------------------------------------------- hparams


@pytest.mark.parametrize('name,value,message', [
    ('target_sparsity', '0.9', "target_sparsity must be a float, got '0.9' (str)"),
    ('initial_sparsity', None, 'initial_sparsity must be a float, got None'),
    ('threshold_decay', True, 'threshold_decay must be a float, got True (bool)'),
    ('sparsity_function_exponent', [3.0],
     'sparsity_function_exponent must be a float, got [3.0] (list)'),
    ('begin_pruning_step', 1.5, 'begin_pruning_step must be an int, got 1.5'),
    ('pruning_frequency', True, 'pruning_frequency must be an int, got True'),
    ('nbins', '256', "nbins must be an int, got '256' (str)"),
    ('do_not_prune', 'logits',
     "do_not_prune must be a list of str (e.g. ['conv1']), got 'logits' (str)"),
    ('weight_sparsity_map', [0.5],
     'weight_sparsity_map must be a list of str'),
    ('block_dims_map', None, 'block_dims_map must be a list of str'),
    ('use_tpu', 'False', "use_tpu must be a bool, got 'False' (str)"),
    ('use_tpu', 0, 'use_tpu must be a bool, got 0 (int)'),
    ('name', None, 'name must be a str, got None'),
    ('name', '', "name must be a non-empty str, got ''"),
    ('block_pooling_function', 1, 'block_pooling_function must be a str, got 1'),
    ('threshold_method', b'exact', 'threshold_method must be a str'),
    ('sparsity_function_exponent', float('inf'),
     'sparsity_function_exponent must be finite, got inf'),
    ('sparsity_function_exponent', float('nan'),
     'sparsity_function_exponent must be finite, got nan'),
    ('threshold_decay', float('nan'), 'threshold_decay must be in [0, 1), got nan'),
    ('target_sparsity', float('nan'), 'target_sparsity must be in [0, 1), got nan'),
])
def test_wrong_type_or_value_names_the_hparam_and_the_value(name, value,
                                                            message):
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError, match=re.escape(message)):
    tf1prune.Pruning(_hp(**{name: value}))


def test_every_hparam_is_type_checked():
  # Catches hparams added later without a type check: each one set to an
  # object of no hparam type must be refused, naming it.
  for name in tf1prune.get_pruning_hparams().values():
    with pytest.raises(ValueError, match='^%s must be ' % name):
      validate_hparams(_hp(**{name: object()}))


def test_numpy_scalars_and_tuples_are_accepted():
  validate_hparams(_hp(target_sparsity=np.float32(0.75), nbins=np.int64(64),
                       begin_pruning_step=np.int32(3), threshold_decay=0,
                       do_not_prune=('logits',)))


def test_a_string_spec_says_how_to_parse_it():
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError, match=re.escape(
      "spec must be an hparams object from get_pruning_hparams(), got "
      "'target_sparsity=0.9'; parse text with get_pruning_hparams().parse(")):
    tf1prune.Pruning('target_sparsity=0.9')


def test_a_spec_missing_an_hparam_names_it():
  hp = tf1prune.HParams(**{k: v for k, v in
                           tf1prune.get_pruning_hparams().values().items()
                           if k != 'nbins'})
  with pytest.raises(ValueError, match='spec has no hparam nbins'):
    validate_hparams(hp)


# ---------------------------------------------------------------- regex maps


def _two_layers():
  tf.train.get_or_create_global_step()
  for scope in ('conv1', 'fc1'):
    with tf.variable_scope(scope):
      tf1prune.apply_mask(tf.get_variable('weights', [4, 4]))


@pytest.mark.parametrize('hparams,entry', [
    ('weight_sparsity_map=[conv1:0.8,conv9:0.7]', "'conv9'"),
    ('block_dims_map=[fc2:2x2]', "'fc2'"),
    ('do_not_prune=[logits]', "'logits'"),
])
def test_regex_map_entry_matching_nothing_is_a_warning(tf_warnings, hparams,
                                                       entry):
  _two_layers()
  hp_name = hparams.split('=')[0]
  tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams)
                  ).conditional_mask_update_op()
  hits = [m for m in tf_warnings if m.startswith(hp_name + ' entries')]
  assert len(hits) == 1, tf_warnings
  assert entry in hits[0] and 'match no masked weight' in hits[0]
  assert 'conv1/weights, fc1/weights' in hits[0]


def test_regex_maps_that_all_match_warn_nothing(tf_warnings):
  _two_layers()
  tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'weight_sparsity_map=[conv1:0.8],block_dims_map=[fc1:2x2],'
      'do_not_prune=[fc]')).mask_update_op()
  assert not [m for m in tf_warnings if 'match no masked weight' in m]


@pytest.mark.parametrize('hparams,message', [
    ('weight_sparsity_map=[conv.*:0.8,conv1:0.9]',
     'weight_sparsity_map matches weight conv1/weights more than once: '
     'conv.*, conv1; make the regexes exclusive'),
    ('block_dims_map=[weights:2x2,fc:1x4]',
     'block_dims_map matches weight fc1/weights more than once: weights, fc'),
])
def test_a_weight_matched_twice_is_an_error_at_build_time(hparams, message):
  _two_layers()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams))
  with pytest.raises(ValueError, match=re.escape(message)):
    p.conditional_mask_update_op()


@pytest.mark.parametrize('hparams,message', [
    ('weight_sparsity_map=[conv1]',
     "weight_sparsity_map entries must look like 'regex:value', got 'conv1'"),
    ('weight_sparsity_map=[conv1:1.0]',
     "weight_sparsity_map entry 'conv1:1.0' has a bad value: sparsity must be "
     "in [0, 1), got 1.0"),
    ('weight_sparsity_map=[conv1:high]',
     "weight_sparsity_map entry 'conv1:high' has a bad value"),
    ('weight_sparsity_map=[conv(1:0.5]',
     "weight_sparsity_map entry 'conv(1:0.5' has a bad regex"),
    ('block_dims_map=[fc1:2by2]',
     "block_dims_map entry 'fc1:2by2' has a bad value: block dims must look "
     "like 'HxW', got '2by2'"),
    ('block_dims_map=[fc1:0x2]',
     "block_dims_map entry 'fc1:0x2' has a bad value: block dims must be >= 1 "
     "or -1, got '0x2'"),
])
def test_malformed_regex_map_entries_are_refused(hparams, message):
  _two_layers()
  with pytest.raises(ValueError, match=re.escape(message)):
    tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams))


# ---------------------------------------------------------------- weights


@pytest.mark.parametrize('dtype', [tf.int32, tf.int64, tf.bool, tf.string])
def test_non_float_weight_names_it_and_its_dtype(dtype):
  w = tf.placeholder(dtype, [3, 3], name='counts')
  with pytest.raises(ValueError, match=re.escape(
      'apply_mask needs a floating-point weight; counts has dtype %s'
      % dtype.name)):
    tf1prune.apply_mask(w, 'bad')


@pytest.mark.parametrize('shape', [[], [0], [3, 0], None, [None, 3]])
def test_scalar_empty_or_unknown_weight_names_it_and_its_shape(shape):
  w = tf.placeholder(tf.float32, shape, name='odd')
  with pytest.raises(ValueError, match=re.escape(
      'apply_mask needs a weight of known, non-empty shape with rank >= 1; '
      'odd has shape %s' % w.get_shape())):
    tf1prune.apply_mask(w, 'bad')
  assert tf1prune.get_masks() == []


def _prune_once(weight_value, hparams, dtype=tf.float32, step=100):
  """Builds one masked weight, runs the conditional update at `step`.

  Returns (mask, threshold, masked weight) as NumPy values (float32 mask).
  """
  global_step = tf.train.get_or_create_global_step()
  w = tf.get_variable('layer/weights', initializer=tf.constant(weight_value,
                                                               dtype))
  masked = tf1prune.apply_mask(w, 'layer')
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams))
  update = p.conditional_mask_update_op()
  mask, = tf1prune.get_masks()
  threshold, = tf1prune.get_thresholds()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(global_step, step))
    sess.run(update)
    return sess.run([tf.cast(mask, tf.float32), threshold,
                     tf.cast(masked, tf.float32)])


@pytest.mark.parametrize('dtype', [tf.float16, tf.bfloat16, tf.float64])
@pytest.mark.parametrize('method', ['exact', 'histogram'])
def test_half_precision_and_double_weights_prune_end_to_end(dtype, method):
  values = np.random.RandomState(3).permutation(np.arange(1.0, 101.0)).reshape(
      [10, 10]) * (-1.0) ** np.arange(100).reshape([10, 10])
  mask, threshold, masked = _prune_once(
      values, 'target_sparsity=0.9,sparsity_function_end_step=10,'
      'threshold_method=' + method, dtype)
  assert tf1prune.get_masks()[0].dtype.base_dtype == dtype
  # 1..100 are exact in bfloat16 up to 256 only in steps of 1 below 256: the
  # magnitudes 1..100 are all exactly representable in all three dtypes.
  kept = np.abs(values[mask == 1.0])
  if method == 'exact':
    assert sorted(kept.tolist()) == list(range(91, 101))
    assert threshold == 91.0
  else:
    # 256 bins over [0, 100]: 89 of 100 lie below bin 230 (89.84..90.23),
    # which holds 90, so the old estimate keeps 90..100.
    assert sorted(kept.tolist()) == list(range(90, 101))
    # The threshold variable has the weight's dtype (as contrib's): the
    # estimate 230 / 256 * 100 rounded to it.
    with tf.Graph().as_default():
      with tf.Session() as sess:
        expected = sess.run(tf.cast(tf.cast(
            tf.constant(230 / 256.0 * 100, tf.float32), dtype), tf.float64))
    assert threshold == expected
  np.testing.assert_array_equal(masked, values * mask)


@pytest.mark.parametrize('block', [None, 4], ids=['one_block', 'blocks_of_4'])
def test_a_few_nan_and_inf_weights_are_kept_and_the_threshold_is_finite(
    capfd, monkeypatch, block):
  if block:  # the count and the mask's write go block by block
    from tf1prune.masks import _blocks
    monkeypatch.setattr(_blocks, 'BLOCK', block)
  values = np.arange(1.0, 11.0)
  values[[2, 7]] = np.nan
  values[5] = -np.inf
  mask, threshold, _ = _prune_once(
      values, 'target_sparsity=0.5,sparsity_function_end_step=10')
  # Keep 5 of 10: the two NaNs, the -inf, then 10 and 9.
  assert mask.tolist() == [0, 0, 1, 0, 0, 1, 0, 1, 1, 1]
  assert threshold == 9.0
  err = capfd.readouterr().err
  assert ('tf1prune WARNING: weight layer/weights has 3 NaN or Inf entries at '
          'mask update step 100') in err


def _no_count_pass(weight):
  raise AssertionError('the exact select had counted the non-finite weights')


@pytest.mark.parametrize('how,dtype', [
    ('select', tf.float32), ('select', tf.float16),
    ('finite_flags', tf.float32), ('int32_arithmetic', tf.float32),
    ('blocks', tf.float32)])
@pytest.mark.parametrize('block', [None, 32768],
                         ids=['one_block', 'blocks_of_32768'])
def test_the_warning_counts_every_nan_and_inf_of_a_real_kernel(
    capfd, monkeypatch, block, how, dtype):
  if block:
    from tf1prune.masks import _blocks
    monkeypatch.setattr(_blocks, 'BLOCK', block)
  # The exact method's select counts on the way (the top bins of its first
  # histogram), with no pass of its own. The histogram method leaves the
  # count to the warning, which counts in one of two ways (one per stack):
  # both are checked on both stacks. So does a select of 2x2 blocks' scores,
  # whose non-finite count is not the weight's.
  method = 'exact' if how in ('select', 'blocks') else 'histogram'
  if how == 'select':
    monkeypatch.setattr(pruning, '_non_finite_count', _no_count_pass)
  monkeypatch.setattr(pruning, '_COUNT_BY_ARITHMETIC',
                      how == 'int32_arithmetic')
  # A glorot-initialized kernel of 83808 entries: 654 rows of 128, then a
  # tail of 96 whose last 5 are -inf and the others finite.
  with tf.Graph().as_default():
    values = tf.glorot_uniform_initializer(seed=3)([3, 3, 96, 97])
    with tf.Session() as sess:
      values = sess.run(values)
  rs = np.random.RandomState(5)
  flat = values.reshape(-1)
  rows = flat.size // 128 * 128
  flat[rs.choice(rows, 700, replace=False)] = np.nan
  flat[rs.choice(rows, 300, replace=False)] = np.inf
  # The bit patterns at the borders: the largest finite floats and the
  # smallest denormal (finite), NaNs of either sign and any payload.
  bits = flat.view(np.uint32)
  bits[rs.choice(rows, 8, replace=False)] = [
      0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001,
      0x7F800001, 0x7FFFFFFF, 0xFFC00000, 0xFFFFFFFF]
  flat[-5:] = -np.inf
  # float16: the largest finite float32 becomes inf, the denormal 0.
  expected = int(np.sum(~np.isfinite(
      flat.astype(dtype.as_numpy_dtype, casting='unsafe'))))
  blocks = ''
  if how == 'blocks':
    values, blocks = values.reshape([-1, 97]), ',block_height=2,block_width=2'
  _prune_once(values, 'target_sparsity=0.5,sparsity_function_end_step=10,'
              'threshold_method=' + method + blocks, dtype)
  assert ('has %d NaN or Inf entries at mask update step 100' % expected
          in capfd.readouterr().err)


@pytest.mark.parametrize('arithmetic', [False, True])
@pytest.mark.parametrize('method', ['exact', 'histogram'])
def test_the_warning_counts_the_nan_and_inf_of_a_bfloat16_weight(
    capfd, monkeypatch, method, arithmetic):
  # 300 entries (exact: top_k, which counts nothing): the warning counts.
  # TF 1.15's IsFinite of bfloat16 vectors is wrong: a count built on it is
  # negative and prints nothing.
  monkeypatch.setattr(pruning, '_COUNT_BY_ARITHMETIC', arithmetic)
  values = np.arange(1.0, 301.0).reshape([20, 15])
  values[0, 3], values[7, 7], values[19, 14] = np.nan, np.inf, -np.inf
  _prune_once(values, 'target_sparsity=0.5,sparsity_function_end_step=10,'
              'threshold_method=' + method, tf.bfloat16)
  assert ('tf1prune WARNING: weight layer/weights has 3 NaN or Inf entries at '
          'mask update step 100') in capfd.readouterr().err


def test_a_float16_sum_that_overflows_is_no_warning(capfd):
  # 8 finite float16 weights whose sum (8 * 60000) is above float16's max.
  values = np.array([60000.0, 50000.0] * 4)
  mask, _, _ = _prune_once(
      values, 'target_sparsity=0.5,sparsity_function_end_step=10',
      dtype=tf.float16)
  assert mask.tolist() == [1, 0] * 4
  assert 'tf1prune WARNING' not in capfd.readouterr().err


def test_nan_weights_outnumbering_the_kept_give_an_inf_threshold_not_nan():
  values = np.full(10, np.nan)
  values[:3] = [1.0, 2.0, 3.0]
  mask, threshold, _ = _prune_once(
      values, 'target_sparsity=0.5,sparsity_function_end_step=10')
  # Keep 5 of 10, all NaN, the earliest first; no finite one is kept.
  assert mask.tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 0, 0]
  assert threshold == np.inf


def test_histogram_with_nan_weights_outnumbering_keeps_every_nan():
  values = np.full(10, np.nan)
  values[:3] = [1.0, 2.0, 3.0]
  mask, threshold, _ = _prune_once(
      values, 'target_sparsity=0.5,sparsity_function_end_step=10,'
      'threshold_method=histogram')
  # The 3 finite ones are 30% < 50%: the estimate is the top, 3.0.
  assert mask.tolist() == [0, 0, 0] + [1] * 7
  assert threshold == 3.0


def test_threshold_decay_with_nan_weights_never_turns_nan():
  global_step = tf.train.get_or_create_global_step()
  w = tf.get_variable('w', initializer=tf.constant(
      [np.nan, np.nan, np.nan, 1.0, 2.0, 3.0], tf.float32))
  tf1prune.apply_mask(w, 'layer')
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=10,threshold_decay=0.5,'
      'pruning_frequency=1'))
  update = p.conditional_mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in (10, 11):
      sess.run(tf.assign(global_step, step))
      sess.run(update)
      mask, threshold = sess.run([tf1prune.get_masks()[0],
                                  tf1prune.get_thresholds()[0]])
      # Old threshold 0 then inf: decay * old + (1 - decay) * inf is inf,
      # and an inf old threshold is not averaged (no 0 * inf = nan).
      assert threshold == np.inf
      assert mask.tolist() == [1, 1, 1, 0, 0, 0]


@pytest.mark.parametrize('method', ['exact', 'histogram'])
def test_histogram_and_exact_survive_inf_weights(method):
  # TF's histogram_fixed_width segfaults on an infinite range (TF 1.15 also on
  # NaN): the histogram method must leave non-finite scores out of it.
  values = np.array([np.inf, 1.0, 2.0, 3.0, np.nan, 4.0, 5.0, 6.0])
  mask, threshold, _ = _prune_once(
      values, 'target_sparsity=0.5,sparsity_function_end_step=10,'
      'threshold_method=' + method)
  assert np.isfinite(threshold)
  assert mask[0] == 1.0 and mask[4] == 1.0
  assert mask[[6, 7]].tolist() == [1.0, 1.0]


def test_finite_weights_print_no_warning(capfd):
  _prune_once(np.arange(1.0, 11.0), 'target_sparsity=0.5,'
              'sparsity_function_end_step=10')
  assert 'tf1prune WARNING' not in capfd.readouterr().err


def test_all_zero_weights_still_keep_the_target_count():
  mask, threshold, _ = _prune_once(np.zeros([4, 5]), 'target_sparsity=0.75,'
                                   'sparsity_function_end_step=10')
  assert mask.sum() == 5 and threshold == 0.0
