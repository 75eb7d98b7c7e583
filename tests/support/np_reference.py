"""NumPy references for the mask math (what the graph ops must equal)."""

import numpy as np


def keep_count(size, sparsity):
  """How many of `size` entries a mask at `sparsity` (a float32) keeps."""
  sparsity = np.float64(np.float32(sparsity))
  if sparsity >= 1.0:
    return 0
  return max(size - int(np.round(size * sparsity)), 1)


def magnitude_mask(scores, sparsity):
  """Keeps the top-k scores; ties broken by flat position, earliest kept."""
  flat = np.asarray(scores, np.float64).ravel()
  # NaN ranks above +inf: give it a key above every float.
  key = np.where(np.isnan(flat), np.inf, flat)
  nan_first = np.isnan(flat).astype(np.int8)
  order = np.lexsort((np.arange(flat.size), -key, -nan_first))
  mask = np.zeros(flat.size, np.float32)
  mask[order[:keep_count(flat.size, sparsity)]] = 1.0
  return mask.reshape(np.shape(scores))


def schedule(step, initial, target, begin, end, exponent):
  p = np.clip((step - begin) / float(end - begin), 0.0, 1.0)
  return target + (initial - target) * (1.0 - p) ** exponent


def block_scores(weights2d, bh, bw, pooling):
  """Pooled |w| per (bh, bw) block of a rank-2 weight, in the weight's dtype.

  MAX, or AVG as `granularity.Block` computes it: the block's sum times the
  reciprocal of its real size (edge blocks may be partial), both rounded to
  the weight's dtype.
  """
  rows, cols = weights2d.shape
  nh, nw = -(-rows // bh), -(-cols // bw)
  dtype = weights2d.dtype.type
  mag = np.abs(weights2d)
  scores = np.zeros([nh, nw], dtype)
  for i in range(nh):
    for j in range(nw):
      cell = mag[i * bh:(i + 1) * bh, j * bw:(j + 1) * bw]
      scores[i, j] = (cell.max() if pooling == 'MAX' else
                      dtype(cell.sum()) * dtype(1.0 / cell.size))
  return scores


def block_mask(weights, block, pooling, sparsity):
  """Reference of `granularity.Block(*block, pooling)` on `weights`.

  Singleton dimensions are squeezed first; what is left must be rank 2.
  -1 in `block` means the whole dimension.

  Returns:
    (mask shaped like `weights`, float32 threshold: the smallest kept block
    score or inf, the effective (bh, bw)).
  """
  rows, cols = [d for d in weights.shape if d != 1]
  bh = rows if block[0] == -1 else min(block[0], rows)
  bw = cols if block[1] == -1 else min(block[1], cols)
  scores = block_scores(weights.reshape(rows, cols), bh, bw, pooling)
  group = magnitude_mask(scores, sparsity)
  mask = np.kron(group, np.ones([bh, bw], np.float32))[:rows, :cols]
  kept = scores[group == 1.0]
  threshold = np.float32(kept.min()) if kept.size else np.inf
  return mask.reshape(weights.shape), threshold, (bh, bw)
