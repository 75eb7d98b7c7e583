"""The exact select on tie-heavy weights, against the NumPy reference.

Weights drawn by TF's own initializers, fp16- and bfloat16-valued float32,
quantized, all equal, with NaN and Inf, in real layer shapes: the kept set
must be exactly NumPy's (top-k by magnitude, ties by flat position), at
sparsities that cut through the tied values. These shapes are above
`_TOP_K_MAX` (the radix select); the small shapes at the end take `top_k`,
and both ways must agree across the size where one hands over to the other.
"""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.masks import _blocks, _radix, _select, magnitude_mask
from tests.support import np_reference

SPARSITIES = [0.0, 0.3, 0.5, 0.75, 0.9, 0.97, 0.999, 1.0]

# (name, shape, initializer): conv and dense kernels of common nets.
INITIALIZED = [
    ('random_normal', [3, 3, 64, 128], tf.random_normal_initializer()),
    ('glorot_uniform', [1152, 384], tf.glorot_uniform_initializer()),
    ('truncated_normal', [5, 5, 32, 64], tf.truncated_normal_initializer(
        stddev=0.05)),
    ('he_normal', [1, 1, 256, 512], tf.variance_scaling_initializer(
        scale=2.0)),
    ('random_uniform', [4096, 10], tf.random_uniform_initializer(-0.1, 0.1)),
]


@pytest.fixture(autouse=True, params=[None, 32768],
                ids=['one_block', 'blocks_of_32768'])
def block(request, monkeypatch):
  """Runs each test as built (these sizes fit in one block of keys) and with
  blocks of 32768 keys, so every path also crosses block borders."""
  if request.param is not None:
    monkeypatch.setattr(_blocks, 'BLOCK', request.param)
  return request.param


def _check(scores, sparsities=SPARSITIES):
  """magnitude_mask of `scores` (float32 array) equals the reference."""
  with tf.Graph().as_default():
    placeholder = tf.placeholder(scores.dtype, scores.shape)
    sparsity = tf.placeholder(tf.float32, [])
    mask, threshold = magnitude_mask(placeholder, sparsity)
    with tf.Session() as sess:
      for s in sparsities:
        got, t = sess.run([mask, threshold], {placeholder: scores, sparsity: s})
        want = np_reference.magnitude_mask(scores, s)
        assert got.shape == scores.shape
        assert int(got.sum()) == np_reference.keep_count(scores.size, s), s
        np.testing.assert_array_equal(got, want, err_msg='sparsity %r' % s)
        kept = scores[got == 1.0]
        finite = kept[np.isfinite(kept)]
        assert t == (np.float32(finite.min()) if finite.size else np.inf), s


def _initialized(shape, initializer, seed=0):
  """Values of a variable of `shape` drawn by TF's `initializer`."""
  with tf.Graph().as_default():
    tf.set_random_seed(seed)
    w = tf.get_variable('w', shape, initializer=initializer)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return sess.run(w)


def _normal(shape, seed=0):
  return np.random.RandomState(seed).randn(*shape).astype(np.float32)


@pytest.mark.parametrize('name,shape,initializer', INITIALIZED,
                         ids=[i[0] for i in INITIALIZED])
def test_tf_initialized_weights(name, shape, initializer):
  del name
  _check(np.abs(_initialized(shape, initializer)))


def test_fp16_valued_weights():
  w = _normal([3, 3, 128, 128]).astype(np.float16).astype(np.float32)
  _check(np.abs(w))


def test_bfloat16_valued_weights():
  bits = _normal([2304, 256], seed=1).view(np.uint32) & np.uint32(0xFFFF0000)
  _check(np.abs(bits.view(np.float32)))


@pytest.mark.parametrize('step', [1.0 / 16, 1.0 / 2])
def test_quantized_weights(step):
  w = np.round(_normal([3, 3, 64, 64], seed=2) / step) * step
  _check(np.abs(w).astype(np.float32))


@pytest.mark.parametrize('value', [0.5, 0.0])
def test_all_equal_weights(value):
  _check(np.full([5, 5, 64, 64], value, np.float32))


def test_nan_and_inf_among_tf_initialized_weights():
  w = _initialized([3, 3, 96, 96], tf.glorot_normal_initializer())
  rs = np.random.RandomState(4)
  flat = w.reshape(-1)
  flat[rs.choice(flat.size, 300, replace=False)] = np.nan
  flat[rs.choice(flat.size, 300, replace=False)] = np.inf
  flat[rs.choice(flat.size, 300, replace=False)] = -np.inf
  _check(np.abs(w), [0.0, 0.5, 0.9, 0.99, 0.995, 0.999, 1.0])


def test_a_large_bin_of_distinct_values():
  # 80000 values within 2**-7 of 1.0 (one radix bin), about 46000 distinct.
  bits = (np.float32(1.0).view(np.int32) +
          np.random.RandomState(5).randint(0, 1 << 16, 80000))
  w = np.concatenate([bits.astype(np.int32).view(np.float32),
                      np.abs(_normal([20000], seed=6))])
  _check(np.random.RandomState(7).permutation(w).reshape([400, 250]))


def test_the_histograms_put_every_int32_key_in_its_bin():
  # HistogramFixedWidth divides in double: check the keys on both sides of
  # every border of the 2**15-key bins, and every key around three bins.
  borders = np.arange(1 << 16, dtype=np.int64) << 15
  with tf.Graph().as_default(), tf.Session() as sess:
    for offset in (-1, 0, 1, (1 << 15) - 1):
      keys = np.clip(borders + offset, 0, 2**31 - 1).astype(np.int32)
      got = sess.run(_radix._histogram(_blocks.split(tf.constant(keys)), 0,
                                       1 << 16, 15))
      np.testing.assert_array_equal(
          got, np.bincount(keys >> 15, minlength=1 << 16), str(offset))
    for low in (int(borders[1]), int(borders[12345]), int(borders[-1])):
      keys = np.arange(low - 3, min(low + (1 << 15) + 3, 2**31))
      got = sess.run(_radix._histogram(
          _blocks.split(tf.constant(keys.astype(np.int32))), low, 1 << 15, 0))
      np.testing.assert_array_equal(got, np.bincount(
          np.clip(keys - low, 0, (1 << 15) - 1), minlength=1 << 15), str(low))


@pytest.mark.parametrize('size', [1, 7, 512, 513, 1 << 16, 600001])
def test_the_unit_of_a_rank_is_found_in_long_and_short_counts(size):
  # Sparse counts (zeros before, between and after the units), as histograms
  # and per-row tie counts are: one cumsum up to 512 entries, rows above
  # (two levels at 513 and 2**16, three at 600001: 586 rows of 1024).
  rng = np.random.RandomState(size)
  counts = rng.randint(0, 3, size) * (rng.rand(size) < 0.3)
  counts[rng.randint(size)] += 1
  total = int(counts.sum())
  ranks = sorted({1, min(2, total), total // 3 + 1, max(total - 1, 1), total})
  with tf.Graph().as_default(), tf.Session() as sess:
    vector = tf.constant(counts.astype(np.int32))
    rank = tf.placeholder(tf.int32, [])
    front = _radix._locate(vector, rank)
    top = _radix._locate(vector, rank, from_top=True)
    for r in ranks:
      got_front, got_top = sess.run([front, top], {rank: r})
      before = np.cumsum(counts) - counts
      i = int(np.argmax(before + counts >= r))
      assert tuple(got_front) == (i, r - before[i]), r
      above = np.cumsum(counts[::-1])[::-1] - counts
      j = size - 1 - int(np.argmax((above + counts)[::-1] >= r))
      assert tuple(got_top) == (j, r - above[j]), r


def test_a_large_tied_bin_that_the_sample_misses():
  # Every 32nd position (where a strided sample looks) holds a smaller value.
  w = np.full([256, 512], 0.5, np.float32)
  w.reshape(-1)[::32] = 0.25
  _check(w, [0.0, 0.02, 0.5, 0.9, 0.99])


def test_ties_around_the_tail_of_a_size_not_multiple_of_the_rows():
  # 70001 entries: the last partial row holds ties the mask must see.
  w = np.round(_normal([7, 10001], seed=8) * 4) / 4
  _check(np.abs(w).astype(np.float32))


def test_mask_update_op_on_tf_initialized_layers():
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    tf.train.get_or_create_global_step()
    shapes = {'conv': [3, 3, 32, 64], 'fc': [2304, 128]}
    for scope, shape in sorted(shapes.items()):
      with tf.variable_scope(scope):
        tf1prune.apply_mask(tf.get_variable(
            'weights', shape, initializer=tf.random_normal_initializer()))
    sparsity = tf.placeholder(tf.float32, [])
    update = tf1prune.Pruning(sparsity=sparsity).mask_update_op()
    weights = tf1prune.get_weights()
    masks = tf1prune.get_masks()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for s in (0.5, 0.9, 0.99):
        sess.run(update, {sparsity: s})
        for w, m in zip(sess.run(weights), sess.run(masks)):
          np.testing.assert_array_equal(
              m, np_reference.magnitude_mask(np.abs(w), s))


# Small weights (depthwise kernels, biases, coupled unit scores) take top_k.
SMALL = [
    ('random_normal', [3, 3, 16, 32], tf.random_normal_initializer()),
    ('glorot_uniform', [64, 10], tf.glorot_uniform_initializer()),
    ('depthwise', [3, 3, 96, 1], tf.truncated_normal_initializer(stddev=0.1)),
]


@pytest.mark.parametrize('name,shape,initializer', SMALL,
                         ids=[i[0] for i in SMALL])
def test_small_tf_initialized_weights(name, shape, initializer):
  del name
  _check(np.abs(_initialized(shape, initializer)))


@pytest.mark.parametrize('scores', [
    np.full([16], 0.5, np.float32),
    np.zeros([3, 3, 8, 8], np.float32),
    np.abs(np.round(_normal([3, 3, 32, 32], seed=9) * 4) / 4),
    np.abs(_normal([3, 3, 32, 32], seed=10).astype(np.float16)),
    np.float32([np.nan, 1.0, np.inf, 1.0, 0.0, np.nan, 2.0, np.inf, 1.0]),
    np.float32([7.0])], ids=['equal', 'zeros', 'quantized', 'fp16', 'nan_inf',
                             'one'])
def test_small_tied_scores(scores):
  _check(scores)


@pytest.mark.parametrize('size', [20, 20000], ids=['top_k', 'radix'])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('known', [True, False], ids=['static', 'unknown'])
def test_negative_zero_and_sign_bit_nan_scores(size, dtype, known):
  # Scores >= 0 that are not an abs: -0.0 ties with 0.0 (earliest first) and
  # the NaN of 0 * inf (sign bit set on x86) ranks above +inf. Neither is
  # read as a negative int (that would rank it below every score, and the
  # radix select would keep all 20000 scores at sparsity 0.5).
  nan = np.array([0xFFC00000], np.uint32).view(np.float32)[0]
  scores = np.tile(np.array([-0.0, 0.0, 1.0, 0.0, nan, 2.0, -0.0, np.inf,
                             0.5, 0.0], dtype), size // 10)
  with tf.Graph().as_default():
    placeholder = tf.placeholder(dtype, scores.shape if known else None)
    sparsity = tf.placeholder(tf.float32, [])
    mask, threshold = magnitude_mask(placeholder, sparsity)
    with tf.Session() as sess:
      for s in (0.15, 0.5, 0.75, 0.9):
        got, t = sess.run([mask, threshold], {placeholder: scores, sparsity: s})
        want = np_reference.magnitude_mask(scores, s)
        np.testing.assert_array_equal(got, want, err_msg='sparsity %r' % s)
        kept = scores[want == 1]
        assert t == np.min(kept[np.isfinite(kept)], initial=np.inf), s


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_a_concat_of_abs_values_gets_no_second_abs(dtype):
  # global_masks ranks the concat of its members' abs values: an abs of
  # every block of it (the sign-bit fix) cost one more pass over all the
  # scores of a global group (float64: one full-size tensor more).
  rs = np.random.RandomState(3)
  values = [rs.randn(150, 100).astype(dtype), rs.randn(80, 90).astype(dtype)]
  values[0][4, 7], values[1][2, 3] = -0.0, np.nan
  with tf.Graph().as_default() as graph:
    weights = [tf.placeholder(dtype, v.shape) for v in values]
    scores = tf.concat([tf.reshape(tf.abs(w), [-1]) for w in weights], 0)
    built = len([op for op in graph.get_operations() if op.type == 'Abs'])
    mask, threshold = magnitude_mask(scores, 0.7)
    assert built == 2 == len([op for op in graph.get_operations()
                              if op.type == 'Abs'])
    with tf.Session() as sess:
      got, t = sess.run([mask, threshold], dict(zip(weights, values)))
  flat = np.concatenate([np.abs(v).ravel() for v in values])
  want = np_reference.magnitude_mask(flat, 0.7)
  np.testing.assert_array_equal(got, want)
  assert t == np.float32(np.min(flat[(want == 1) & np.isfinite(flat)]))


def test_small_float64_scores():
  scores = np.abs(np.round(_normal([200], seed=11) * 2) / 2).astype(np.float64)
  with tf.Graph().as_default(), tf.Session() as sess:
    mask, threshold = sess.run(magnitude_mask(tf.constant(scores), 0.6))
  np.testing.assert_array_equal(mask, np_reference.magnitude_mask(scores, 0.6))
  assert threshold == np.float32(scores[mask == 1].min())


@pytest.mark.parametrize('offset', [0, 1])
def test_top_k_and_radix_agree_where_they_hand_over(offset):
  """At _TOP_K_MAX entries top_k selects, one more takes the radix select."""
  size = _select._TOP_K_MAX + offset
  w = np.round(_normal([size], seed=12) * 8) / 8
  _check(np.abs(w).astype(np.float32), [0.0, 0.5, 0.9, 1.0])
