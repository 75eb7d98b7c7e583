"""The smaller Keras model: layers cloned with fewer channels, weights sliced.

    >>> import numpy as np, keras
    >>> from tf1prune.keras.shrink.plan import plan
    >>> from tf1prune.keras.shrink.rebuild import rebuild
    >>> x = keras.Input((5,))
    >>> h = keras.layers.Dense(4, activation='relu', bias_initializer='ones')(x)
    >>> model = keras.Model(x, keras.layers.Dense(2)(h))
    >>> _ = model.layers[1].kernel.assign(np.ones([5, 4]) * [1, 0, 1, 0])
    >>> small, _ = rebuild(model, plan(model))
    >>> small.layers[1].units, tuple(small.layers[2].kernel.shape)
    (2, (2, 2))
    >>> data = np.random.RandomState(0).randn(3, 5).astype('float32')
    >>> bool(np.allclose(small(data), model(data), atol=1e-6))
    True

`rebuild(model, plan)` walks the traced calls in order and makes each layer
again from its config (`units` / `filters` / a reshape's target shape set to
the kept channel count), calls it on the new tensors as the old one was
called (its other arguments kept: `layers.call_arguments`) and gives it
the old weights sliced to the kept channels: a Dense or conv kernel loses the
rows of removed inputs and the columns of removed filters; a depthwise
kernel, batch norm statistics and per-channel weights lose the removed
channels. What a
removed input channel carried, its constant `v` (`relu(bias)`, a batch norm's
shift, ...), is folded into the next layer's bias: `bias += v @ sum of the
kernel taps over that input` (a layer without a bias gets one). A Keras op (an
operator such as `x + 3.0`) runs again on the new tensors. The plan guarantees
that every removed channel is such a constant and that the next layer reads it
the same way at every position, except for a Conv2D that pads with zeros (its
border taps read padding, not the constant): it gets one extra input channel of
ones (a 1x1 Conv2D with a zero kernel and a bias of 1, concatenated to its
input) whose kernel is the sum of `constant * kernel` over the removed
channels; its own zero padding then gives every output position exactly what
the removed channels gave it.
"""

import numpy as np
import tensorflow as tf

from tf1prune.keras.shrink import borders
from tf1prune.keras.shrink.values import layer_weights
from tf1prune.keras.shrink.layers import call_arguments, is_op, run_call

__all__ = ['rebuild']


def _short(variable):
  return variable.name.split('/')[-1].split(':')[0]


def _removed_consts(p, tensor, keep):
  """The constants of `tensor`'s removed channels (0 for a border pattern:
  `p.border` carries it)."""
  values = p.consts[tensor].copy()
  for c in p.maps.get(tensor, {}):
    values[c] = 0.0
  values = values[~keep]
  if np.isnan(values).any():
    raise ValueError('internal error: a removed channel of %r is not a '
                     'constant' % tensor)
  return values


def _dense_like(call, p, config, w):
  """Config and weights of a Dense / Conv2D with fewer inputs and outputs."""
  keep_in, keep_out = p.keep[call.inputs[0]], p.keep[call.output]
  kernel = w['kernel']
  folded = _removed_consts(p, call.inputs[0], keep_in) @ (
      kernel[..., ~keep_in, :].sum(axis=tuple(range(kernel.ndim - 2))))
  bias = w.get('bias', np.zeros(kernel.shape[-1])) + folded
  out = {'kernel': kernel[..., keep_in, :][..., keep_out]}
  config['units' if call.kind == 'dense' else 'filters'] = int(keep_out.sum())
  if 'bias' in w or np.any(bias[keep_out] != 0):
    config['use_bias'] = True
    out['bias'] = bias[keep_out]
  return config, out


def _conv_with_ones(call, p, config, w):
  """A padded Conv2D whose removed inputs reach it through a ones channel:
  its kernel on that channel is `sum of constant * kernel` over them."""
  keep_in, keep_out = p.keep[call.inputs[0]], p.keep[call.output]
  kernel = w['kernel']
  values = _removed_consts(p, call.inputs[0], keep_in)
  extra = np.tensordot(values, kernel[:, :, ~keep_in, :], axes=([0], [2]))
  out = {'kernel': np.concatenate([kernel[:, :, keep_in, :],
                                   extra[:, :, None, :]], axis=2)[..., keep_out]}
  config['filters'] = int(keep_out.sum())
  if 'bias' in w:
    out['bias'] = w['bias'][keep_out]
  return config, out


def _ones_channel(keras, name, x):
  """`x` with one more channel, of ones: a 1x1 Conv2D with a zero kernel and
  a bias of 1 (plain Keras layers: the model loads without tf1prune)."""
  ones = keras.layers.Conv2D(1, 1, kernel_initializer='zeros',
                             bias_initializer='ones',
                             name=name + '_shrink_ones')
  concat = keras.layers.Concatenate(name=name + '_shrink_concat')
  made = ones(x)
  return concat([x, made]), [(ones, tuple(made.shape))]


def _border_map(keras, name, x, y, chain, kernel):
  """`y` plus the border map that the generator of `borders` makes
  of a channel of ones at `x` (the input of the pattern chain)."""
  layers = borders.generator_layers(keras, [c.layer for c in chain], name,
                                    kernel.shape[-1])
  made, helpers = x, []
  for layer in layers:
    made = layer(made)
    if layer is not layers[0] and layer is not layers[-1]:
      continue                        # a ZeroPadding2D: nothing to count
    helpers.append((layer, tuple(made.shape)))
  layers[-1].kernel.assign(kernel.astype(np.float32))
  out = keras.layers.Add(name=name + '_shrink_add')([y, made])
  return out, helpers


def _separable(call, p, config, w):
  keep_in, keep_out = p.keep[call.inputs[0]], p.keep[call.output]
  dw, pw = w['depthwise_kernel'], w['pointwise_kernel']
  multiplier = dw.shape[-1]
  keep_mid = np.repeat(keep_in, multiplier)
  taps = dw.reshape(-1, dw.shape[2], multiplier)
  # The plan keeps the nonzero constants that a padded layer reads.
  values = p.consts[call.inputs[0]]
  sums = np.where(np.isnan(values), 0.0, values)[:, None] * taps.sum(axis=0)
  mid = sums.reshape(-1)[~keep_mid]
  pw2 = pw.reshape(-1, pw.shape[-1])
  folded = mid @ pw2[~keep_mid]
  bias = w.get('bias', np.zeros(pw.shape[-1])) + folded
  out = {'depthwise_kernel': dw[:, :, keep_in, :],
         'pointwise_kernel': pw[:, :, keep_mid, :][..., keep_out]}
  config['filters'] = int(keep_out.sum())
  if 'bias' in w or np.any(bias[keep_out] != 0):
    config['use_bias'] = True
    out['bias'] = bias[keep_out]
  return config, out


def _depthwise(call, p, config, w):
  keep_in = p.keep[call.inputs[0]]
  kernel = w['kernel']
  out = {'kernel': kernel[:, :, keep_in, :]}
  if 'bias' in w:
    out['bias'] = w['bias'].reshape(len(keep_in), -1)[keep_in].reshape(-1)
  return config, out


def _per_channel(call, p, config, w):
  keep = p.keep[call.output]
  return config, {k: v[keep] if v.shape == keep.shape else v
                  for k, v in w.items()}


def _reshape(call, p, config, w):
  kept = int(p.keep[call.output].sum())
  target = list(config['target_shape'])
  target[-1] = kept
  config['target_shape'] = tuple(target)
  return config, w


_REBUILD = {'dense': _dense_like, 'conv': _dense_like,
            'separable': _separable, 'depthwise': _depthwise,
            'elementwise': _per_channel}


def _assign(layer, values, kind):
  for variable in layer.weights:
    name = _short(variable)
    if kind == 'depthwise' and name == 'depthwise_kernel':
      name = 'kernel'
    if name in values:
      value = np.asarray(values[name])
      if tuple(variable.shape) != value.shape:
        raise ValueError('internal error: weight %s of %r has shape %s, the '
                         'shrink made %s' % (name, layer.name,
                                             tuple(variable.shape),
                                             value.shape))
      variable.assign(value.astype(np.dtype(_dtype_name(variable))))


def _dtype_name(variable):
  dtype = variable.dtype
  return getattr(dtype, 'name', dtype)


def rebuild(model, p):
  """Returns (smaller model, [(old layer, new layer, call, new shape,
  [helper layers the shrink added for it])]).

  Args:
    model: the plain (stripped) Sequential or functional Keras model.
    p: its `plan.Plan`.
  """
  from tf1prune.keras import _version
  keras = _version.keras_of(model)
  tensors, pairs = {}, []
  for call in p.calls:
    layer = call.layer
    if call.kind == 'input':
      config = layer.get_config()
      tensors[call.output] = keras.Input(
          shape=call.shape[1:], batch_size=call.shape[0],
          dtype=config.get('dtype'), name=layer.name)
      continue
    if is_op(layer):       # a Keras op: numbers and tensors, no weights
      tensors[call.output] = run_call(call, tensors)
      continue
    config = layer.get_config()
    w = layer_weights(layer)
    local = {t: tensors[t] for t in call.inputs}
    helpers = []
    if call.output in p.ones:
      config, w = _conv_with_ones(call, p, config, w)
      first = call.inputs[0]
      local[first], helpers = _ones_channel(keras, layer.name, local[first])
    elif call.kind in _REBUILD:
      config, w = _REBUILD[call.kind](call, p, config, w)
    elif call.kind == 'reshape' or (call.kind == 'flatten' and
                                    'target_shape' in config):
      config, w = _reshape(call, p, config, w)
    new = type(layer).from_config(config)
    # The call as it was (a TF op's numbers, `axis=`, mha(q, v)), on the
    # new tensors.
    args, kwargs = call_arguments(call.node, local)
    tensors[call.output] = new(*args, **kwargs)
    if call.kind in _REBUILD or call.kind == 'stop':
      if call.kind == 'stop':
        new.set_weights(layer.get_weights())
      else:
        _assign(new, w, call.kind)
    if call.output in p.border:
      chain, kernel = p.border[call.output]
      tensors[call.output], more = _border_map(
          keras, layer.name, tensors[chain[0].inputs[0]], tensors[call.output],
          chain, kernel[..., p.keep[call.output]])
      helpers.extend(more)
    pairs.append((layer, new, call, tuple(tensors[call.output].shape),
                  helpers))
  inputs = [tensors[id(t)] for t in model.inputs]
  # The outputs in the model's own structure (a dict stays a dict).
  try:
    structure = model.output
  except AttributeError:      # a Keras 3 Sequential never called has none
    structure = model.outputs if len(model.outputs) > 1 else model.outputs[0]
  outputs = tf.nest.map_structure(lambda t: tensors[id(t)], structure)
  return keras.Model(inputs if len(inputs) > 1 else inputs[0], outputs,
                     name=model.name), pairs
