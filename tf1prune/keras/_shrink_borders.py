"""Border patterns: what a padded depthwise conv makes of a constant channel.

    >>> import numpy as np
    >>> from tf1prune.keras._shrink_borders import tap_matrix, rebuildable
    >>> a = tap_matrix([4, 4], [3, 3], [1, 1], [1, 1])   # 16 positions x 9 taps
    >>> a.shape, int(a[0].sum()), int(a[5].sum())     # a corner, the interior
    ((16, 9), 4, 9)
    >>> rebuildable(a)
    True

A removed channel that is the constant `v` goes into a depthwise conv that
pads with zeros: its output is `v * (sum of the valid taps)`, which differs
at the borders (a *pattern*, the same for every example). Element-wise
layers after it (batch norm, ReLU6, ...) keep it a pattern. A 1x1 Conv2D
that reads such patterns gets their contribution `M[h, w, o]` as a map added
to its output. `M` depends on the position only through which taps of the
depthwise conv were valid there, so a Conv2D of the depthwise conv's
geometry (kernel size, strides, dilation, SAME padding) applied to a channel
of ones gives it exactly: its kernel `G` solves `A @ G = M`, where row `p`
of `A` marks the valid taps at output position `p` (`tap_matrix`); that
works whenever the distinct rows of `A` are linearly independent
(`rebuildable`), which holds for the usual 3x3 and 5x5 SAME convs.
"""

import numpy as np

__all__ = ['pattern_of', 'rebuildable', 'solve', 'tap_matrix']


def _valid(size, kernel, stride, dilation):
  """[out positions, kernel taps] bool: which taps read inside the input."""
  out = -(-size // stride)
  span = (kernel - 1) * dilation + 1
  total = max((out - 1) * stride + span - size, 0)
  first = -(total // 2)
  rows = first + stride * np.arange(out)[:, None] + dilation * np.arange(
      kernel)[None, :]
  return (rows >= 0) & (rows < size)


def tap_matrix(size, kernel, strides, dilations):
  """[Ho * Wo, kh * kw] float64: 1 where a SAME conv's tap is valid."""
  rows = _valid(size[0], kernel[0], strides[0], dilations[0])
  cols = _valid(size[1], kernel[1], strides[1], dilations[1])
  return np.einsum('ia,jb->ijab', rows, cols).reshape(
      rows.shape[0] * cols.shape[0], -1).astype(np.float64)


def rebuildable(a):
  """True if any function of the valid-tap pattern is `a @ g` for some g."""
  distinct = np.unique(a, axis=0)
  return bool(np.linalg.matrix_rank(distinct) == distinct.shape[0])


def solve(a, m, kernel):
  """The kernel `[kh, kw, 1, out]` of a conv on ones giving the map `m`.

  Args:
    a: `tap_matrix` of the geometry.
    m: [Ho, Wo, out] float64 map.
    kernel: (kh, kw).

  Raises:
    ValueError: the map is not rebuilt exactly (an internal error: the plan
      checks `rebuildable` first).
  """
  flat = m.reshape(a.shape[0], -1)
  g = np.linalg.lstsq(a, flat, rcond=None)[0]
  scale = max(float(np.abs(flat).max()), 1e-30)
  if np.abs(a @ g - flat).max() > 1e-9 * scale:
    raise ValueError('internal error: a border pattern is not rebuilt '
                     'exactly by a conv on ones')
  return g.reshape(kernel[0], kernel[1], 1, -1)


def pattern_of(layer, values, shape):
  """The layer's output for an input whose channel `c` is `values[c]` at
  every position (NaN read as 0): float64 [Ho, Wo, C'] (batch 1)."""
  import tensorflow as tf
  x = np.broadcast_to(np.where(np.isnan(values), 0.0, values),
                      (1,) + tuple(shape[1:])).astype(np.float32)
  return np.asarray(layer(tf.constant(x), training=False), np.float64)[0]
