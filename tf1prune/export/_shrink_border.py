"""What a zero-padded convolution makes of a constant input, exactly.

    >>> import numpy as np
    >>> from tf1prune.export._shrink_border import conv_pads, constant_response
    >>> pads = conv_pads([4, 4], [3, 3], [1, 1], [1, 1], 'SAME')
    >>> pads
    [(1, 1), (1, 1)]
    >>> response = constant_response(np.array([2.0]), np.ones([3, 3, 1, 1]),
    ...                              [4, 4], pads, [1, 1], [1, 1])
    >>> response[:2, :, 0].tolist()     # 2 x (number of valid taps)
    [[8.0, 12.0, 12.0, 8.0], [12.0, 18.0, 18.0, 12.0]]

When shrinking removes a channel that is the constant `v` everywhere, a next
conv that pads with zeros does not see `v * sum(kernel)` at every output: at
the borders some taps read padding. `constant_response` gives the exact output
of the conv on such an input (pure NumPy, float64), so that the difference to
the interior value can be added back as a constant map.
"""

import numpy as np

def conv_pads(size, kernel, strides, dilations, padding, explicit=None):
  """Returns the zero padding TF's Conv2D applies, [(top, bottom), (left, right)].

  Args:
    size: input [height, width].
    kernel: [kh, kw].
    strides, dilations: [sh, sw], [dh, dw].
    padding: 'SAME', 'VALID' or 'EXPLICIT'.
    explicit: for 'EXPLICIT', the 8 ints of `explicit_paddings` (NHWC).
  """
  if padding == 'VALID':
    return [(0, 0), (0, 0)]
  if padding == 'EXPLICIT':
    return [(explicit[2], explicit[3]), (explicit[4], explicit[5])]
  pads = []
  for n, k, s, d in zip(size, kernel, strides, dilations):
    span = (k - 1) * d + 1
    total = max((-(-n // s) - 1) * s + span - n, 0)
    pads.append((total // 2, total - total // 2))   # TF: the extra one after
  return pads


def constant_response(values, weight, size, pads, strides, dilations):
  """Output of a conv whose input channel j is `values[j]` everywhere.

  Args:
    values: [c] floats, one constant per input channel of `weight`.
    weight: [kh, kw, c, out] kernel.
    size, pads, strides, dilations: as for `conv_pads`.

  Returns:
    float64 [out_height, out_width, out]: the conv's output (no bias).
  """
  kernel = np.tensordot(np.asarray(values, np.float64),
                        np.asarray(weight, np.float64), axes=([0], [2]))
  valid = []
  for axis in range(2):
    n, (before, after) = size[axis], pads[axis]
    k, s, d = weight.shape[axis], strides[axis], dilations[axis]
    count = (n + before + after - ((k - 1) * d + 1)) // s + 1
    position = (np.arange(count)[:, None] * s + np.arange(k)[None, :] * d -
                before)
    valid.append(((position >= 0) & (position < n)).astype(np.float64))
  return np.einsum('ak,bl,klo->abo', valid[0], valid[1], kernel)
