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
radix select over those bits gives the exact threshold in a fixed number of
O(n) passes. float16 and bfloat16 scores are widened to float32 first
(exactly); float64 scores take four radix levels (`_radix.py`). Up to
`_TOP_K_MAX` scores (small kernels, biases, channel scores) one `top_k` of the
bit patterns does it instead, with the same tie rule.

float32, the common case (`_radix.py`): one 2**16-bin histogram of the high 16
bits of every score (8 exponent bits, 8 mantissa bits) picks the boundary bin;
its members are then located by rows of 16 flat positions and only those rows
are gathered for the 2**15-bin histogram of the low bits. When the boundary bin
is large (many tied or nearly tied scores), a strided sample proposes its value
and one counting pass checks that every member equals it; only a large bin of
distinct values takes a second full histogram. So the cost does not depend on
how many scores tie.

Ties: weights whose score equals the threshold are kept in flat (row-major)
order, the earliest first, until exactly k are kept. The order is total (score
descending, then position ascending), so a mask at a higher sparsity never keeps
a weight that a lower sparsity dropped. The position of the last kept tie is
found from per-row tie counts, and the mask is written as `score >= t` before
it and `score > t` after it (aligned slices, no copies of the scores).

NaN scores rank above +inf, which ranks above every finite score; so NaN and
infinite weights are kept first (NaNs among themselves by payload, the bits
below the exponent, then by position), and the threshold is the smallest kept
finite score. It is never NaN: when only non-finite scores are kept it is
+inf. The histogram method leaves non-finite scores out of its histogram and
keeps them.
"""

import tensorflow.compat.v1 as tf

from tf1prune.masks import _blocks
from tf1prune.masks._radix import (count_non_finite, key_histogram,
                                   select_keys, top_k_mask)

__all__ = ['keep_count', 'kth_largest', 'magnitude_mask',
           'magnitude_mask_and_count', 'histogram_threshold']

_INF = float('inf')
# Up to this many scores the exact select is one `top_k` of the keys, which
# puts the earlier of equal keys first (the tie rule): a handful of ops where
# the radix select builds about 150, so graphs of many small weights build and
# optimize faster, and at these sizes it runs as fast.
_TOP_K_MAX = 1 << 14


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
  """Non-negative float scores as ints that sort like them.

  float64 -> a flat int64 tensor. Others -> int32 (float16 and bfloat16
  widened to float32 first): a flat tensor when the size is not static, else
  a list of blocks (`_blocks.split`). The sign bit is cleared (an abs): -0.0
  is a score >= 0 and a NaN from arithmetic (0 * inf) has it set, and either
  read as a negative int ranked below every other score; scores that are
  an abs, or a reshape, cast or concat of abs values (`global_masks`), get
  no second abs. When `scores` is `tf.abs(x)`, each block is the abs of its
  slice of x, so no op writes a tensor of the full size (`_blocks` says why
  that matters).
  """
  source, clear = scores, _sign_clear(scores)
  if not tf.executing_eagerly() and scores.op.type == 'Abs':
    source = scores.op.inputs[0]
  if scores.dtype == tf.float64 or not scores.shape.is_fully_defined():
    flat = tf.reshape(scores if clear else tf.abs(scores), [-1])
    if flat.dtype == tf.float64:
      return tf.bitcast(flat, tf.int64)
    return tf.bitcast(tf.cast(flat, tf.float32), tf.int32)
  blocks = _blocks.split(tf.reshape(source, [-1]))
  if source is not scores or not clear:
    blocks = [tf.abs(block) for block in blocks]
  return [tf.bitcast(tf.cast(block, tf.float32), tf.int32) for block in blocks]


# Ops whose output has the sign bit of each entry clear when every float
# input has (`_sign_clear`): they move, widen or narrow floats, no arithmetic.
_KEEPS_SIGN = ('Reshape', 'Cast', 'Identity', 'ConcatV2')


def _sign_clear(scores):
  """True when the graph shows that no entry of `scores` has its sign bit
  set: an `Abs`, or a reshape, cast or concat of such (`global_masks`'
  scores). Then `_as_ordered_bits` needs no abs (a pass over every score)."""
  if tf.executing_eagerly():
    return False
  op = scores.op
  if not scores.dtype.is_floating:
    return False     # the abs of the smallest int is negative
  if op.type == 'Abs':
    return True
  if op.type not in _KEEPS_SIGN:
    return False
  inputs = op.inputs[:-1] if op.type == 'ConcatV2' else op.inputs[:1]
  return all(_sign_clear(x) for x in inputs)


def _as_float(bits):
  return tf.bitcast(bits, tf.float64 if bits.dtype == tf.int64 else tf.float32)


def kth_largest(scores, k):
  """Returns the exact k-th largest entry of non-negative `scores`.

  Args:
    scores: float tensor of any shape, entries >= 0 (NaN ranks above +inf).
    k: int32 scalar tensor, 1 <= k <= size of scores.

  Returns:
    A scalar of scores' dtype (float32 for float16/bfloat16 scores).
  """
  return _as_float(select_keys(_as_ordered_bits(scores), k)[0])


def magnitude_mask(scores, sparsity, name=None):
  """Returns (mask, threshold) keeping exactly the top-k scores.

  Args:
    scores: float tensor of any static shape with at least one entry, >= 0
      (-0.0 equals 0.0; NaN of either sign ranks above +inf).
    sparsity: float scalar (tensor or number) in [0, 1].

  Returns:
    mask: float32 tensor shaped like `scores`, 1.0 for the kept entries; keeps
      `keep_count(size, sparsity)` entries, ties broken by position (earliest
      kept).
    threshold: float32 scalar, the smallest kept score; +inf if none is kept
      or every kept score is NaN or +inf (never NaN).
  """
  return magnitude_mask_and_count(scores, sparsity, name)[:2]


def magnitude_mask_and_count(scores, sparsity, name=None):
  """`magnitude_mask`, and the int32 count of the NaN and infinite scores
  when the select counted them on the way, else None.

  The select of float32, float16 or bfloat16 scores of a static size above
  `_TOP_K_MAX` starts with a histogram of the high bits of every score
  (`_radix.key_histogram`); its top 256 bins hold exactly the non-finite
  scores, so the count costs no pass over the scores.
  """
  with tf.name_scope(name, 'magnitude_mask', [scores, sparsity]):
    scores = tf.convert_to_tensor(scores)
    bits = _as_ordered_bits(scores)
    n = scores.shape.num_elements()
    keep = keep_count(tf.size(scores) if n is None else n, sparsity)
    non_finite = None
    if n is not None and n <= _TOP_K_MAX:
      flat, t_bits = _top_k_select(
          tf.concat(bits, 0) if isinstance(bits, list) else bits, keep)
    else:
      high = None
      if isinstance(bits, list):
        high = key_histogram(bits)
        non_finite = count_non_finite(high)
      t_bits, need, last = select_keys(bits, tf.maximum(keep, 1), high)
      # keep == 0: take no tie and nothing above the maximum.
      need = tf.where_v2(keep > 0, need, 0 * need)
      last = tf.where_v2(keep > 0, last, -1 + 0 * last)
      flat = top_k_mask(bits, t_bits, need, last)
    shape = (scores.shape.as_list() if n is not None else tf.shape(scores))
    # A cast of the bool mask: `Pruning` writes it to a large mask variable
    # from the bool mask (`pruning._assign_mask`).
    mask = tf.cast(tf.reshape(flat, shape), tf.float32)
    threshold = tf.cast(_as_float(t_bits), tf.float32)
    threshold = tf.where_v2(tf.logical_and(keep > 0,
                                           tf.logical_not(tf.is_nan(threshold))),
                            threshold, _INF)
    return mask, threshold, non_finite


def _top_k_select(bits, keep):
  """(float32 flat mask of the `keep` largest keys, the k-th largest key) for
  a small static size: `top_k` sorts equal keys by position, earliest first."""
  values, indices = tf.nn.top_k(bits, tf.maximum(keep, 1))
  chosen = indices[:keep, None]
  mask = tf.scatter_nd(chosen, tf.ones([keep], tf.float32), tf.shape(bits))
  return mask, values[-1]


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
