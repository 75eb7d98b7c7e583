"""Magnitude thresholds and masks: pure functions of tensors, no variables.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks._select import magnitude_mask
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   mask, threshold = magnitude_mask(tf.constant(np.arange(1., 101.)), 0.95)
    ...   m, t = sess.run([mask, threshold])
    >>> int(m.sum()), float(t)
    (5, 96.0)

The exact method keeps the `k = n - round(n * sparsity)` largest scores, and at
least one when sparsity < 1. It finds the k-th largest score without sorting:
the bit pattern of a non-negative IEEE float orders like the float itself, so a
radix select over those bits (a 2**15-bin histogram of the high bits, then a
2**16-bin histogram of the low bits of the values in the boundary bin) gives
the exact threshold in a fixed number of O(n) passes. float64 scores take four
levels, float16 and bfloat16 are widened to float32 first (exactly). The
histograms use the raw `Bincount` op: `tf.math.bincount` adds a `reduce_max`
pass over its input.

Ties: weights whose score equals the threshold are kept in flat (row-major)
order, the earliest first, until exactly k are kept. The order is total (score
descending, then position ascending), so a mask at a higher sparsity never keeps
a weight that a lower sparsity dropped.

NaN scores rank above +inf, which ranks above every finite score; so NaN and
infinite weights are kept first, and the threshold is the smallest kept finite
score. It is never NaN: when only non-finite scores are kept it is +inf. The
histogram method leaves non-finite scores out of its histogram and keeps them.
"""

import tensorflow.compat.v1 as tf

__all__ = ['keep_count', 'kth_largest', 'magnitude_mask', 'histogram_threshold']

_INF = float('inf')


def keep_count(size, sparsity):
  """Returns how many of `size` scores a mask at `sparsity` keeps (int32).

  `size - round(size * sparsity)`, at least 1 while sparsity < 1, 0 at 1.
  Computed in float64 so that 100 weights at 0.95 keep exactly 5.
  """
  sparsity = tf.cast(sparsity, tf.float64)
  size64 = tf.cast(size, tf.float64)
  keep = size64 - tf.round(size64 * sparsity)
  keep = tf.where_v2(sparsity < 1.0, tf.maximum(keep, 1.0), 0.0 * keep)
  return tf.cast(keep, tf.int32)


def _as_ordered_bits(scores):
  """Flattens non-negative floats to ints that sort like them.

  Returns (bits, widths): float64 -> int64 with 63 used bits, others -> int32
  with 31 used bits; `widths` are the radix digits, most significant first.
  """
  flat = tf.reshape(scores, [-1])
  if flat.dtype == tf.float64:
    return tf.bitcast(flat, tf.int64), (15, 16, 16, 16)
  return tf.bitcast(tf.cast(flat, tf.float32), tf.int32), (15, 16)


def _bincount(keys, size):
  """int32 counts of the int32 `keys` in [0, size); keys >= size are ignored.

  The raw op: `tf.math.bincount` adds a full `reduce_max` pass over the keys.
  Keys must be >= 0.
  """
  return tf.raw_ops.Bincount(arr=keys, size=size,
                             weights=tf.zeros([0], tf.int32))


def _radix_select(bits, k, widths):
  """Returns (t, n_equal, need) for the k-th largest of `bits` (1 <= k <= n).

  t is the k-th largest value, n_equal how many entries equal it, need how many
  of those a top-k selection takes. The first level histograms every entry;
  each later level only the entries of the boundary bin, gathered: a
  `boolean_mask` of a compare costs less than a second histogram of every
  entry (bench/performance_notes.md has the measurements).
  """
  dtype = bits.dtype
  prefix = tf.zeros([], dtype)
  candidates, rank = bits, k
  shift = sum(widths)
  for level, width in enumerate(widths):
    shift -= width
    digit = tf.bitwise.right_shift(candidates, tf.constant(shift, dtype))
    if level > 0:  # the first digit needs no mask: the sign bit is 0.
      digit = tf.bitwise.bitwise_and(digit, tf.constant((1 << width) - 1, dtype))
    counts = _bincount(tf.cast(digit, tf.int32), 1 << width)
    # at_least[d]: candidates whose digit is >= d (non-increasing in d).
    at_least = tf.cumsum(counts, reverse=True)
    chosen = tf.reduce_sum(tf.cast(at_least >= rank, tf.int32)) - 1
    rank -= at_least[chosen] - counts[chosen]
    prefix = tf.bitwise.bitwise_or(
        prefix, tf.bitwise.left_shift(tf.cast(chosen, dtype),
                                      tf.constant(shift, dtype)))
    if level + 1 < len(widths):
      candidates = tf.boolean_mask(candidates,
                                   tf.equal(digit, tf.cast(chosen, dtype)))
  return prefix, counts[chosen], rank


def kth_largest(scores, k):
  """Returns the exact k-th largest entry of non-negative `scores`.

  Args:
    scores: float tensor of any shape, entries >= 0 (NaN ranks above +inf).
    k: int32 scalar tensor, 1 <= k <= size of scores.

  Returns:
    A scalar of scores' dtype (float32 for float16/bfloat16 scores).
  """
  bits, widths = _as_ordered_bits(scores)
  t_bits = _radix_select(bits, k, widths)[0]
  return tf.bitcast(t_bits, tf.float64 if bits.dtype == tf.int64 else tf.float32)


def magnitude_mask(scores, sparsity, name=None):
  """Returns (mask, threshold) keeping exactly the top-k scores.

  Args:
    scores: float tensor of any static shape with at least one entry, >= 0.
    sparsity: float scalar (tensor or number) in [0, 1].

  Returns:
    mask: float32 tensor shaped like `scores`, 1.0 for the kept entries; keeps
      `keep_count(size, sparsity)` entries, ties broken by position (earliest
      kept).
    threshold: float32 scalar, the smallest kept score; +inf if none is kept
      or every kept score is NaN or +inf (never NaN).
  """
  with tf.name_scope(name, 'magnitude_mask', [scores, sparsity]):
    scores = tf.convert_to_tensor(scores)
    bits, widths = _as_ordered_bits(scores)
    keep = keep_count(tf.size(bits), sparsity)
    t_bits, n_equal, need = _radix_select(bits, tf.maximum(keep, 1), widths)
    # keep == 0: take no tie and nothing above the maximum, in the same pass.
    need = tf.where_v2(keep > 0, need, 0 * need)

    def keep_ties_in_order():
      ties = tf.equal(bits, t_bits)
      first = tf.cumsum(tf.cast(ties, tf.int32)) <= need
      return tf.logical_or(bits > t_bits, tf.logical_and(ties, first))

    flat = tf.cond(tf.equal(n_equal, need), lambda: bits >= t_bits,
                   keep_ties_in_order)
    mask = tf.reshape(tf.cast(flat, tf.float32), tf.shape(scores))
    float_dtype = tf.float64 if bits.dtype == tf.int64 else tf.float32
    threshold = tf.cast(tf.bitcast(t_bits, float_dtype), tf.float32)
    threshold = tf.where_v2(tf.logical_and(keep > 0,
                                           tf.logical_not(tf.is_nan(threshold))),
                            threshold, _INF)
    return mask, threshold


def histogram_threshold(scores, sparsity, nbins):
  """The old approximate threshold: `nbins`-bin histogram of [0, max(scores)].

  Returns the float32 left edge of the first bin where the cumulative fraction
  of scores reaches `sparsity`; masks built on it keep `scores > threshold`
  (and NaN scores). Only finite scores enter the histogram (NaN or +inf there
  crash `histogram_fixed_width`); they count as ranking above it. All-zero
  scores give threshold 0.
  """
  scores = tf.cast(tf.reshape(scores, [-1]), tf.float32)
  finite = tf.boolean_mask(scores, tf.is_finite(scores))
  top = tf.reduce_max(tf.concat([finite, [0.0]], 0))
  value_range = tf.stack([0.0, tf.where_v2(top > 0.0, top, 1.0)])
  counts = tf.histogram_fixed_width(finite, value_range, nbins=nbins)
  cdf = tf.cast(tf.cumsum(counts), tf.float32) / tf.cast(tf.size(scores),
                                                         tf.float32)
  below = tf.reduce_sum(tf.cast(cdf < tf.cast(sparsity, tf.float32), tf.float32))
  return below / float(nbins) * top
