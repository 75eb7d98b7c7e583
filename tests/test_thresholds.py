"""The exact threshold and mask math against the NumPy reference."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.masks import _select as thresholds
import np_reference

SPARSITIES = [0.0, 0.3, 0.5, 0.95, 0.999999, 1.0]


def _run(*tensors):
  with tf.Session() as sess:
    return sess.run(tensors)


def test_100_distinct_magnitudes_at_095_keep_the_5_largest():
  w = np.random.RandomState(0).permutation(np.arange(1.0, 101.0)).astype(np.float32)
  mask, threshold = _run(*thresholds.magnitude_mask(tf.constant(w), 0.95))
  assert sorted(w[mask == 1.0].tolist()) == [96.0, 97.0, 98.0, 99.0, 100.0]
  assert threshold == 96.0


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('kind', ['normal', 'three_values', 'constant', 'grid'])
@pytest.mark.parametrize('shape', [(1,), (7,), (33, 17), (3, 3, 8, 16), (70001,)])
def test_mask_equals_numpy_reference(dtype, kind, shape):
  rs = np.random.RandomState(hash((kind, shape)) % 2**31)
  scores = {'normal': lambda: np.abs(rs.randn(*shape)),
            'three_values': lambda: rs.randint(0, 3, shape) * 1.0,
            'constant': lambda: np.ones(shape),
            'grid': lambda: rs.randint(0, 1000, shape) * 0.001}[kind]()
  scores = scores.astype(dtype)
  placeholder = tf.placeholder(dtype, shape)
  sparsity = tf.placeholder(tf.float32, [])
  mask, threshold = thresholds.magnitude_mask(placeholder, sparsity)
  with tf.Session() as sess:
    for s in SPARSITIES:
      got, t = sess.run([mask, threshold], {placeholder: scores, sparsity: s})
      np.testing.assert_array_equal(got, np_reference.magnitude_mask(scores, s))
      kept = scores[got == 1.0]
      assert t == (np.float32(kept.min()) if kept.size else np.inf)


def test_keep_count_rounds_and_keeps_one_below_full_sparsity():
  got = _run(*[thresholds.keep_count(n, s) for n, s in
               [(100, 0.95), (100, 0.999), (10, 0.25), (10, 0.35), (3, 1.0), (1, 0.0)]])
  assert list(got) == [5, 1, 8, 7, 0, 1]  # 0.35 is 0.3499999940 as float32
  assert list(got) == [np_reference.keep_count(n, s) for n, s in
                 [(100, 0.95), (100, 0.999), (10, 0.25), (10, 0.35), (3, 1.0), (1, 0.0)]]


def test_ties_keep_the_earliest_positions():
  mask, threshold = _run(*thresholds.magnitude_mask(
      tf.constant([2.0, 1.0, 1.0, 1.0, 1.0, 3.0]), 0.5))
  assert mask.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
  assert threshold == 1.0


def test_kth_largest_is_exact_on_close_floats():
  base = np.float32(1.0) + np.arange(1000, dtype=np.float32) * np.finfo(np.float32).eps
  values = np.random.RandomState(1).permutation(base)
  got = _run(*[thresholds.kth_largest(tf.constant(values), k) for k in (1, 2, 500, 1000)])
  assert list(got) == [base[-1], base[-2], base[500], base[0]]


def test_nan_and_inf_rank_above_finite_and_threshold_stays_finite():
  scores = np.array([np.nan, 1.0, np.inf, 2.0, 0.5, 3.0], np.float32)
  mask, threshold = _run(*thresholds.magnitude_mask(tf.constant(scores), 0.5))
  assert mask.tolist() == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
  assert threshold == 3.0


def test_histogram_threshold_matches_the_old_estimate():
  scores = np.arange(1.0, 101.0, dtype=np.float32)
  t = _run(thresholds.histogram_threshold(tf.constant(scores), 0.5, 10))[0]
  # 10 bins over [0, 100]: cdf 0.09, 0.19, ..., 0.49, 0.59: 5 bins below 0.5.
  assert t == pytest.approx(50.0)
