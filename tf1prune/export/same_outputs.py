"""Whether a shrunk model gives the outputs of the model it came from.

    >>> import numpy as np
    >>> from tf1prune.export.same_outputs import compare_outputs
    >>> y = np.array([[1.0, -2.0], [0.5, 4.0]])
    >>> rows = compare_outputs(['logits'], [y], [y + 1e-6])
    >>> rows[0].ok, '%.1e' % rows[0].difference
    (True, '1.0e-06')
    >>> compare_outputs(['logits'], [y], [y + 1e-3])[0].ok
    False

The rule, pure NumPy, for any backend (the Keras shrink's self-check,
`tf1prune.keras.shrink.check`): output `name` of the shrunk model may differ
from the model's by at most

    tolerance = RTOL x max|y| + ULPS x eps(float32) x scale

where `max|y|` is the model's largest output entry and `scale` the largest
sum of absolute terms the output was computed from (`sum |a x w| + |b|` of
its last Dense or conv layer; `max|y|` when not known). The first term is
the shrink's promise (1e-5 of the output's size); the second allows for the
order of float32 sums: the shrink moves a removed channel's term into a
bias, and a float32 sum rounds at the size of its terms, not of its result,
so an output that is a small difference of large terms (a net at random
initialization on large inputs) changes by up to a few float32 steps of
those terms whichever way it is summed. 64 steps cover the sums of the
layers before the last one.
"""

import collections

import numpy as np

__all__ = ['EPS32', 'RTOL', 'ULPS', 'OutputDifference', 'compare_outputs',
           'tolerance']

RTOL = 1e-5
ULPS = 64
EPS32 = float(np.finfo(np.float32).eps)


class OutputDifference(collections.namedtuple('OutputDifference', [
    'name', 'difference', 'largest', 'scale', 'tolerance', 'ok'])):
  """One output: the largest |shrunk - model|, the model's max|y|, the
  scale of its sums, the tolerance, and whether the difference is within
  it."""


def tolerance(largest, scale=None):
  """`RTOL x largest + ULPS x EPS32 x scale` (scale: `largest` if None or
  not finite)."""
  scale = largest if scale is None or not np.isfinite(scale) else max(
      float(scale), float(largest))
  return RTOL * float(largest) + ULPS * EPS32 * scale


def compare_outputs(names, expected, got, scales=None):
  """Returns an `OutputDifference` per output.

  Args:
    names: the outputs' names.
    expected: the model's outputs (arrays), in that order.
    got: the shrunk model's.
    scales: None, or per output None or the largest sum of absolute terms
      it was computed from.
  """
  rows = []
  scales = scales or [None] * len(names)
  for name, y, y_small, scale in zip(names, expected, got, scales):
    y = np.asarray(y, np.float64)
    y_small = np.asarray(y_small, np.float64)
    if y.shape != y_small.shape:
      rows.append(OutputDifference(name, float('inf'), 0.0, scale,
                                   0.0, False))
      continue
    finite = np.isfinite(y) & np.isfinite(y_small)
    same = (y == y_small) | (np.isnan(y) & np.isnan(y_small))
    largest = float(np.abs(y[finite]).max()) if finite.any() else 0.0
    difference = float(np.abs(y - y_small)[finite].max()) if finite.any() \
        else 0.0
    if not (finite | same).all():     # a NaN or an infinity moved
      difference = float('inf')
    limit = tolerance(largest, scale)
    rows.append(OutputDifference(name, difference, largest, scale, limit,
                                 difference <= limit))
  return rows
