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
