"""What a zero-padded convolution makes of a constant input, exactly.

    >>> import numpy as np
    >>> from tf1prune.export.shrink.padding import conv_pads, constant_response
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
the interior value can be added back as a constant map. `conv_map`,
`depthwise_map` and `pool_map` do the same for a constant input that varies
over the positions (`[H, W, C]`): what a removed channel is after a padded
depthwise conv, an explicit `Pad` or a border map.
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


def _taps(x, kernel, pads, strides, dilations, fill):
  """Yields (i, j, patch): the input each output position reads at tap i, j.

  x is [H, W, C]; patch is [H', W', C].
  """
  (top, bottom), (left, right) = pads
  padded = np.pad(x, [(top, bottom), (left, right), (0, 0)], 'constant',
                  constant_values=fill)
  count = [(padded.shape[a] - ((kernel[a] - 1) * dilations[a] + 1)) //
           strides[a] + 1 for a in (0, 1)]
  for i in range(kernel[0]):
    for j in range(kernel[1]):
      a, b = i * dilations[0], j * dilations[1]
      yield i, j, padded[a:a + (count[0] - 1) * strides[0] + 1:strides[0],
                         b:b + (count[1] - 1) * strides[1] + 1:strides[1]]


def conv_map(x, weight, pads, strides, dilations):
  """Conv2D of one example `x` [H, W, c] by `weight` [kh, kw, c, out].

  Returns float64 [H', W', out]; `pads` etc. as for `conv_pads`.
  """
  weight = np.asarray(weight, np.float64)
  out = 0.0
  for i, j, patch in _taps(np.asarray(x, np.float64), weight.shape[:2], pads,
                           strides, dilations, 0.0):
    out = out + np.tensordot(patch, weight[i, j], axes=([2], [0]))
  return out


def depthwise_map(x, weight, pads, strides, dilations):
  """DepthwiseConv2dNative of `x` [H, W, c] by `weight` [kh, kw, c, m].

  Returns float64 [H', W', c * m] (output channel `k * m + j` reads input
  channel k).
  """
  weight = np.asarray(weight, np.float64)
  out = 0.0
  for i, j, patch in _taps(np.asarray(x, np.float64), weight.shape[:2], pads,
                           strides, dilations, 0.0):
    product = patch[..., :, None] * weight[i, j]
    out = out + product.reshape(product.shape[:2] + (-1,))
  return out


def pool_map(x, kind, kernel, pads, strides):
  """MaxPool or AvgPool (`kind`) of `x` [H, W, C] as TF computes them.

  Max pooling ignores the padding; average pooling divides by the number of
  input positions inside the image.
  """
  x = np.asarray(x, np.float64)
  if kind == 'MaxPool':
    return np.max([p for _, _, p in _taps(x, kernel, pads, strides, [1, 1],
                                           -np.inf)], axis=0)
  total = sum(p for _, _, p in _taps(x, kernel, pads, strides, [1, 1], 0.0))
  ones = np.ones(x.shape[:2] + (1,))
  count = sum(p for _, _, p in _taps(ones, kernel, pads, strides, [1, 1], 0.0))
  return total / count
