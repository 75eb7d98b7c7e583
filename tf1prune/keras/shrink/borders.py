"""Maps over the positions: the layers that give a removed channel's map back.

    >>> import numpy as np
    >>> from tf1prune.keras.shrink.borders import chain_taps, rebuildable
    >>> a = chain_taps([], (3, 3), (1, 1), (1, 1), 'SAME', (4, 4))
    >>> a.shape, int(a[0].sum()), int(a[5].sum())     # a corner, the interior
    ((16, 9), 4, 9)
    >>> rebuildable(a)
    True

A removed channel that no example changes is a constant, or after zero
padding (a `ZeroPadding2D`, a padded depthwise conv, a pool of a padded
tensor) a map over the positions, the same for every example. What such
channels gave a layer that reads them is a map too: `M[h, w, o]` at its
output. Two ways to give it back with plain Keras layers:

- after a depthwise conv that pads with zeros (SAME, or `ZeroPadding2D`s
  before it, as Keras's MobileNetV2 does) and element-wise layers, `M`
  depends on the position only through which taps of the depthwise conv
  were inside the input there; the same chain applied to a channel of ones,
  ending in a Conv2D of the depthwise conv's geometry (`generator_layers`),
  gives it exactly: its kernel `G` solves `A @ G = M`, where row `p` of `A`
  marks the valid taps at output position `p` (`chain_taps`); that works
  whenever the distinct rows of `A` are linearly independent
  (`rebuildable`), which holds for the usual 3x3 and 5x5 convs;
- any map: a channel of ones pooled to one position and a transposed conv
  of the map's size whose kernel is the map (`map_layers`): one tap per
  output position, exact.
"""

import numpy as np

from tf1prune.export.shrink.padding import conv_map, conv_pads

__all__ = ['chain_taps', 'generator_layers', 'map_layers', 'rebuildable',
           'solve']


def rebuildable(a):
  """True if any function of the valid-tap pattern is `a @ g` for some g."""
  distinct = np.unique(a, axis=0)
  return bool(np.linalg.matrix_rank(distinct) == distinct.shape[0])


def solve(a, m, kernel):
  """The kernel `[kh, kw, 1, out]` of a conv on ones giving the map `m`.

  Args:
    a: `chain_taps` of the geometry.
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


def chain_taps(pads, kernel, strides, dilations, padding, size):
  """[Ho * Wo, kh * kw] float64: which taps of a conv (`kernel`, `strides`,
  `dilations`, `padding`) read inside an input of `size` [H, W] that zero
  paddings `pads` ([(top, bottom), (left, right)] each) came before."""
  x = np.ones(tuple(size) + (1,))
  for pad in pads:
    x = np.pad(x, [tuple(p) for p in pad] + [(0, 0)], 'constant')
  taps = int(kernel[0] * kernel[1])
  conv_pad = conv_pads(x.shape[:2], kernel, strides, dilations, padding)
  eye = np.eye(taps).reshape(tuple(kernel) + (1, taps))
  return conv_map(x, eye, conv_pad, strides, dilations).reshape(-1, taps)


def generator_layers(keras, chain, name, out_channels):
  """The layers that turn a channel of ones at the chain's input into its
  border map: a 1x1 Conv2D (zero kernel, bias 1), a copy of every
  ZeroPadding2D of the chain, and a Conv2D of the depthwise conv's geometry
  (kernel to be set) with `out_channels` filters."""
  ones = keras.layers.Conv2D(1, 1, kernel_initializer='zeros',
                             bias_initializer='ones',
                             name=name + '_shrink_ones')
  layers = [ones]
  for i, layer in enumerate(chain[:-1]):
    config = layer.get_config()
    config['name'] = '%s_shrink_pad%d' % (name, i)
    layers.append(type(layer).from_config(config))
  dw = chain[-1].get_config()
  layers.append(keras.layers.Conv2D(
      out_channels, dw['kernel_size'], strides=dw['strides'],
      dilation_rate=dw['dilation_rate'], padding=dw['padding'],
      use_bias=False, name=name + '_shrink_border'))
  return layers


def map_layers(keras, name, size, out_channels):
  """The layers that turn a tensor into a map of `size` ([H, W], or [L] for
  a rank-3 tensor) and `out_channels` channels: a 1x1 conv of ones (zero
  kernel, bias 1), a global average pool that keeps one position, and a
  transposed conv of `size` (kernel to be set: the map, `[H, W, out,
  1]`)."""
  one_d = len(size) == 1
  conv = keras.layers.Conv1D if one_d else keras.layers.Conv2D
  pool = keras.layers.GlobalAveragePooling1D if one_d else \
      keras.layers.GlobalAveragePooling2D
  transposed = keras.layers.Conv1DTranspose if one_d else \
      keras.layers.Conv2DTranspose
  return [conv(1, 1, kernel_initializer='zeros', bias_initializer='ones',
               name=name + '_shrink_ones'),
          pool(keepdims=True, name=name + '_shrink_pool'),
          transposed(out_channels, tuple(size), padding='valid',
                     use_bias=False,
                     name=name + '_shrink_map')]
