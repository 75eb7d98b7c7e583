"""Border patterns: what a padded depthwise conv makes of a constant channel.

    >>> import keras
    >>> from tf1prune.keras.shrink.borders import chain_taps, rebuildable
    >>> dw = keras.layers.DepthwiseConv2D(3, padding='same')
    >>> a = chain_taps([dw], (None, 4, 4, 8))         # 16 positions x 9 taps
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
depthwise conv were valid there (inside the input, not in the padding of
the conv or of a `ZeroPadding2D` before it), so the same chain applied to a
channel of ones, ending in a Conv2D of the depthwise conv's geometry
(`generator_layers`), gives it exactly: its kernel `G` solves `A @ G = M`,
where row `p` of `A` marks the valid taps at output position `p`
(`chain_taps`); that works whenever the distinct rows of `A` are linearly
independent (`rebuildable`), which holds for the usual 3x3 and 5x5 convs.
"""

import numpy as np

__all__ = ['chain_taps', 'generator_layers', 'pattern_of', 'rebuildable',
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


def pattern_of(run, values, shape):
  """What `run` (a layer call, `layers.run_call` on one tensor) gives
  for an input whose channel `c` is `values[c]` at every position (NaN read
  as 0): float64 [Ho, Wo, C'] (batch 1)."""
  import tensorflow as tf
  x = np.broadcast_to(np.where(np.isnan(values), 0.0, values),
                      (1,) + tuple(shape[1:])).astype(np.float32)
  return np.asarray(run(tf.constant(x)), np.float64)[0]


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


def chain_taps(chain, in_shape):
  """[Ho * Wo, kh * kw] float64: which taps of the chain's last (depthwise)
  layer read inside the chain's input, at each output position."""
  import tensorflow as tf
  from tf1prune.keras import _version
  keras = _version.keras_of(chain[-1])
  kernel = tuple(chain[-1].get_config()['kernel_size'])
  taps = kernel[0] * kernel[1]
  layers = generator_layers(keras, chain, 'taps', taps)
  x = tf.ones((1,) + tuple(in_shape[1:-1]) + (1,))
  for pad in layers[1:-1]:
    x = pad(x)
  conv = layers[-1]
  conv(x)                                             # builds it
  conv.kernel.assign(np.eye(taps, dtype=np.float32).reshape(kernel + (1, taps)))
  return np.asarray(conv(x), np.float64).reshape(-1, taps)
