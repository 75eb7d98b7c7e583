"""What a channel that is constant per example becomes through one layer.

    >>> import numpy as np, keras
    >>> from tf1prune.keras.shrink.values import elementwise, pads_matter
    >>> relu6 = keras.layers.ReLU(6.0)
    >>> elementwise(relu6, np.array([-1.0, 3.0, 9.0, np.nan]), 2).tolist()
    [0.0, 3.0, 6.0, nan]
    >>> conv3 = keras.layers.Conv2D(2, 3, padding='same')
    >>> conv1 = keras.layers.Conv2D(2, 1, strides=2, padding='same')
    >>> pads_matter(conv3, (None, 8, 8, 4)), pads_matter(conv1, (None, 8, 8, 4))
    (True, False)

NumPy (float64) values of per-channel constants, NaN where a channel is not
a constant: `elementwise` runs the Keras layer or op itself on them (batch
norm in inference form, any element-wise activation), `activate` a layer's own
activation, `spread` a depthwise kernel's taps over a constant (0 where the
taps are all zero). `pads_matter` says whether a conv reads zero padding
anywhere, `layer_weights` gives a layer's weights by short name.
"""

import numpy as np
import tensorflow as tf

__all__ = ['activate', 'elementwise', 'layer_weights', 'pads_matter',
           'spread']


def layer_weights(layer):
  """{short weight name: float64 ndarray}; `kernel` also for a depthwise."""
  out = {}
  for variable in layer.weights:
    name = variable.name.split('/')[-1].split(':')[0]
    out[name] = np.asarray(variable.numpy(), np.float64)
  if type(layer).__name__ == 'DepthwiseConv2D' and 'depthwise_kernel' in out:
    out['kernel'] = out.pop('depthwise_kernel')   # Keras 2 names it so
  return out


def pads_matter(layer, in_shape):
  """True if a conv-like layer reads zero padding somewhere."""
  config = layer.get_config()
  if config.get('padding', 'valid') == 'valid':
    return False
  sizes = in_shape[1:-1]
  kernel = config['kernel_size']
  strides = config.get('strides', (1,) * len(kernel))
  dilations = config.get('dilation_rate', (1,) * len(kernel))
  for n, k, s, d in zip(sizes, kernel, strides, dilations):
    if n is None:
      return True
    span = (k - 1) * d + 1
    if max((-(-n // s) - 1) * s + span - n, 0) > 0:
      return True
  return False


def activate(layer, pre):
  out = layer.activation(tf.constant(pre[None].astype(np.float32)))
  return np.asarray(out, np.float64)[0]


def elementwise(run, values, rank):
  """`run` (a layer, or a call of a layer or Keras op on one tensor, in
  inference mode) applied to channel constants (NaN stays NaN)."""
  known = ~np.isnan(values)
  x = np.where(known, values, 0.0).astype(np.float32)
  x = x.reshape([1] * (rank - 1) + [-1])
  y = np.asarray(run(tf.constant(x)), np.float64)
  return np.where(known, y.reshape(-1), np.nan)



def spread(kernel, values, padded):
  """Per depthwise output `c * m + k`: the constant `values[c]` times the
  tap sum (0 where the taps are all zero), NaN where unknown or padded."""
  kh_kw = kernel.reshape(-1, kernel.shape[2], kernel.shape[3])
  sums = kh_kw.sum(axis=0)                      # [C, m]
  zero = ~(kh_kw != 0).any(axis=0)
  mid = values[:, None] * sums
  bad = np.isnan(values)[:, None] | (padded & (values != 0)[:, None])
  return np.where(zero, 0.0, np.where(bad & ~zero, np.nan, mid)).reshape(-1)
