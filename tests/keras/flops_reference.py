"""FLOPs of a Keras model counted from its weights, independently of the
shrink: all of them, or those of the channels a pruning mask leaves.

`flops(model, x)` is 2 x the multiply-adds per example of every Dense and
convolution layer (nested models' too) on the shapes of a run on `x`.
`ideal_flops(model, x)` counts only the channels that survive the model's
masks: a channel survives when it is connected to the input through
nonzero weights. It runs the model once with its weights made so that no
sum cancels and nothing but the input is added: every kernel (and gamma)
becomes |w| / sum |w| over each filter's inputs (0 where pruned), biases,
batch norm shifts and means become 0, variances 1, and the input is
positive; a channel is then nonzero somewhere exactly when it survives
(a ReLU of a positive sum is the sum; a layer norm mixes its channels:
they all survive it). The input channels of each layer are those nonzero
in what it reads; its output channels those its kernel writes from them.
The weights are restored afterwards.
"""

import numpy as np

WEIGHT_LAYERS = ('Dense', 'Conv1D', 'Conv2D', 'DepthwiseConv2D',
                 'SeparableConv2D', 'Conv2DTranspose', 'Conv1DTranspose')


def layers_of(model):
  """Every layer of `model`, nested models' layers in their place."""
  out = []
  for layer in model.layers:
    if getattr(layer, 'layers', None):
      out.extend(layers_of(layer))
    else:
      out.append(layer)
  return out


def _short(variable):
  return variable.name.split('/')[-1].split(':')[0]


def _weights(layer):
  return dict((_short(v), np.asarray(v.numpy())) for v in layer.weights)


def _depthwise_kernel(layer, short):
  return short == 'depthwise_kernel' or type(layer).__name__ == \
      'DepthwiseConv2D'


def _connectivity_weights(layers):
  """Sets the weights described in the module docstring; returns the
  (variable, value) pairs to restore."""
  saved = []
  for layer in layers:
    for v in layer.weights:
      short, value = _short(v), v.numpy()
      if value.dtype.kind != 'f' or short == 'count':
        continue
      saved.append((v, value))
      if short in ('bias', 'beta', 'moving_mean', 'mean'):
        new = np.zeros_like(value)
      elif short in ('moving_variance', 'variance'):
        new = np.ones_like(value)
      elif value.ndim == 1:
        new = (value != 0).astype(value.dtype)
      else:
        columns = value.shape[-1] * (value.shape[-2] if _depthwise_kernel(
            layer, short) else 1)
        a = np.abs(value).reshape(-1, columns)
        new = (a / np.maximum(a.sum(axis=0), 1e-30)).reshape(value.shape)
      v.assign(new.astype(value.dtype))
  return saved


def _record(model, x, layers):
  """{layer name: (its input, its output)} of every weight layer on `x`."""
  seen, originals = {}, {}
  for layer in layers:
    if type(layer).__name__ not in WEIGHT_LAYERS:
      continue

    def wrapped(*args, layer=layer, call=layer.call, **kwargs):
      out = call(*args, **kwargs)
      seen[layer.name] = (np.asarray(args[0]), np.asarray(out))
      return out
    originals[layer] = layer.call
    layer.call = wrapped
  try:
    model(x, training=False)
  finally:
    for layer in originals:
      del layer.call
  return seen


def _layer_flops(layer, inp, out, alive):
  name = type(layer).__name__
  w = _weights(layer)
  a_in = (np.abs(inp).reshape(-1, inp.shape[-1]).max(axis=0) > 0 if alive
          else np.ones(inp.shape[-1], bool))
  positions = int(np.prod(out.shape[1:-1])) if out.ndim > 2 else 1
  if name == 'SeparableConv2D':
    dw, pw = w['depthwise_kernel'], w['pointwise_kernel']
    m, taps = dw.shape[-1], dw.shape[0] * dw.shape[1]
    mid = np.repeat(a_in, m)
    if alive:
      mid &= (dw != 0).reshape(taps, -1).any(axis=0)
    written = (pw != 0).reshape(-1, pw.shape[-1])[mid].any(axis=0)
    a_out = written if alive else np.ones(pw.shape[-1], bool)
    return 2 * positions * (taps * mid.sum() + mid.sum() * a_out.sum())
  kernel = w.get('kernel', w.get('depthwise_kernel'))
  groups = layer.get_config().get('groups', 1)
  depthwise = name == 'DepthwiseConv2D' or (
      name == 'Conv2D' and groups == inp.shape[-1] and groups > 1)
  if depthwise:
    taps = int(np.prod(kernel.shape[:-2]))
    m = kernel.shape[-1] if name == 'DepthwiseConv2D' else \
        kernel.shape[-1] // groups
    a_out = np.repeat(a_in, m)
    if alive:
      a_out &= (kernel.reshape(taps, -1) != 0).any(axis=0)
    return 2 * positions * taps * a_out.sum()
  if name.endswith('Transpose'):
    kernel = np.swapaxes(kernel, -1, -2)
    positions = int(np.prod(inp.shape[1:-1]))
  taps = int(np.prod(kernel.shape[:-2]))
  if groups != 1:           # each filter reads its group's inputs: all
    return 2 * positions * taps * kernel.shape[-2] * kernel.shape[-1]
  used = (kernel.reshape(taps, kernel.shape[-2], -1) != 0).any(axis=0)
  a_out = used[a_in].any(axis=0) if alive else np.ones(kernel.shape[-1],
                                                       bool)
  return 2 * positions * taps * a_in.sum() * a_out.sum()


def flops(model, x):
  """2 x multiply-adds per example of every Dense and conv layer."""
  layers = layers_of(model)
  seen = _record(model, x, layers)
  return int(sum(_layer_flops(l, seen[l.name][0], seen[l.name][1], False)
                 for l in layers if l.name in seen))


def ideal_flops(model, x):
  """`flops` of the channels that survive the masks (module docstring);
  `x` must be positive after the model's own preprocessing layers."""
  layers = layers_of(model)
  saved = _connectivity_weights(layers)
  try:
    seen = _record(model, x, layers)
  finally:
    for v, value in saved:
      v.assign(value)
  return int(sum(_layer_flops(l, seen[l.name][0], seen[l.name][1], True)
                 for l in layers if l.name in seen))
