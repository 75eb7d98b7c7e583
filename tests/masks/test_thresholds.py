"""The exact threshold and mask math against the NumPy reference."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune import masks as thresholds
from tf1prune.masks._select import kth_largest   # not public
from tests.support import np_reference
from tests.support.checkout import ROOT

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
  got = _run(*[kth_largest(tf.constant(values), k) for k in (1, 2, 500, 1000)])
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


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_boundary_bin_is_counted_apart_from_its_bit_neighbours(dtype):
  # The later radix levels must count only the boundary bin's values: values
  # in the bins on either side, which differ from it in one high bit or in
  # many, and values far away (huge, tiny, zero, inf) must not enter them.
  bits_type = np.int64 if dtype == np.float64 else np.int32
  low_bits = 48 if dtype == np.float64 else 16
  boundary = np.array([1.5], dtype).view(bits_type)[0] >> low_bits << low_bits
  rs = np.random.RandomState(3)
  inside = boundary + rs.randint(0, 1 << 16, 500).astype(bits_type)
  below = boundary - 1 - rs.randint(0, 1 << 16, 500).astype(bits_type)
  above = boundary + (1 << low_bits) + rs.randint(0, 1 << 16, 500).astype(
      bits_type)
  scores = np.concatenate([inside.view(dtype), below.view(dtype),
                           above.view(dtype),
                           np.array([0.0, 1e-30, 1e30, np.inf], dtype)])
  scores = rs.permutation(scores)
  placeholder = tf.placeholder(dtype, scores.shape)
  sparsity = tf.placeholder(tf.float32, [])
  mask, threshold = thresholds.magnitude_mask(placeholder, sparsity)
  with tf.Session() as sess:
    # 2004 scores: the boundary falls inside the middle bin for these.
    for s in (0.3, 0.5, 0.6, 0.501, 0.7495):
      got, t = sess.run([mask, threshold], {placeholder: scores, sparsity: s})
      np.testing.assert_array_equal(got, np_reference.magnitude_mask(scores, s))
      assert t == np.float32(scores[got == 1.0].min())


def test_kth_largest_float64_is_exact_across_the_whole_range():
  values = np.array([np.finfo(np.float64).max, 1e300, 1.0, 1.0 + 2**-52,
                     1e-300, 5e-324, 0.0], np.float64)
  got = _run(*[kth_largest(tf.constant(values), k)
               for k in range(1, 8)])
  assert [float(g) for g in got] == sorted(values.tolist(), reverse=True)


def test_building_the_update_ops_logs_no_deprecation_warning(tmp_path):
  # In a fresh process: TF prints each deprecation warning once per process.
  import subprocess, sys, os  # pylint: disable=g-import-not-at-top,multiple-imports
  script = tmp_path / 'build.py'
  script.write_text(
      'import tensorflow.compat.v1 as tf\n'
      'tf.disable_eager_execution()\n'
      'import tf1prune\n'
      'tf.train.get_or_create_global_step()\n'
      'for i, spec in enumerate(["threshold_decay=0.5", "threshold_method=histogram",'
      ' ""]):\n'
      '  with tf.variable_scope("l%d" % i):\n'
      '    tf1prune.apply_mask(tf.get_variable("w", [4, 4]))\n'
      '  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(\n'
      '      "name=p%d," % i + spec if spec else "name=p%d" % i))\n'
      '  p.conditional_mask_update_op()\n'
      '  tf1prune.masks.keep_count(10, 0.5)\n')
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=os.pathsep.join(
      [ROOT, os.environ.get('PYTHONPATH', '')]))
  out = subprocess.run([sys.executable, str(script)], env=env, timeout=240,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  text = out.stdout.decode('utf-8', 'replace')
  assert out.returncode == 0, text
  ours = [line for line in text.splitlines() if 'deprecated' in line and
          ('_select.py' in line or 'pruning.py' in line)]
  assert ours == []
