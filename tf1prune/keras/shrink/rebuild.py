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
    >>> data = np.random.RandomState(0).randn(3, 5).astype(np.float32)
    >>> bool(np.allclose(small(data), model(data), atol=1e-6))
    True

`rebuild(model, plan)` walks the traced calls in order (a nested model's
layers in its place: the new model is flat) and makes each layer again from
its config (`units` / `filters` / `groups` / a reshape's target shape /
`LayerScale`'s `projection_dim` set to the kept channel count), calls it on
the new tensors as the old one was called (its other arguments kept:
`layer_calls.call_arguments`) and gives it the old weights sliced to the
kept channels: a Dense or conv kernel loses the rows of removed inputs and
the columns of removed filters (a transposed conv's kernel
`[kh, kw, out, in]` the other way round); a depthwise kernel, batch norm
statistics and other per-channel weights lose the removed channels. What a
removed input channel carried, its constant `v` (`relu(bias)`, a batch
norm's shift, ...), is folded into the next layer's bias: `bias += v @ sum
of the kernel taps over that input` (a layer without a bias gets one). A
Keras op (an operator such as `x + 3.0`) runs again on the new tensors. The
plan guarantees that every removed channel is such a value and that the
next layer reads it the same way at every position, except for a conv that
pads with zeros (its border taps read padding, not the constant): it gets
one extra input channel of ones (a 1x1 conv with a zero kernel and a bias
of 1, concatenated to its input) whose kernel is the sum of `constant *
kernel` over the removed channels; its own zero padding then gives every
output position exactly what the removed channels gave it. A 1x1 conv that
read the map of a padded depthwise conv gets it added at its output
(`tf1prune.keras.shrink.borders`).
"""

import numpy as np
import tensorflow as tf

from tf1prune.keras.shrink import borders
from tf1prune.keras.shrink.layer_calls import (call_arguments, is_operation,
                                               node_inputs)
from tf1prune.keras.shrink.plan import layer_weights

__all__ = ['rebuild']


def _short(variable):
  return variable.name.split('/')[-1].split(':')[0]


def _removed_consts(p, key, keep):
  """The constants of tensor `key`'s removed channels (a 'ones' fold: they
  are constants)."""
  value = p.values.value(key)[..., ~keep]
  values = value.reshape(-1, value.shape[-1])
  if np.isnan(values).any() or (values != values[0]).any():
    raise ValueError('internal error: a removed channel of %r is not a '
                     'constant' % key)
  return values[0]


def _bias(call, p, config, w, keep_out, out, units):
  """Sets the bias of a layer whose removed inputs' constants go into it
  (`Fold.bias`)."""
  fold = p.folds.get(call.name)
  bias = w.get('bias', np.zeros(units))
  if fold is not None and fold.bias.size:
    bias = bias + fold.bias
  if 'bias' in w or np.any(bias[keep_out] != 0):
    config['use_bias'] = True
    out['bias'] = bias[keep_out]


def _dense_like(call, p, keys, config, w):
  """Config and weights of a Dense / Conv2D / Conv1D with fewer inputs and
  outputs (the removed inputs' constants in its bias)."""
  keep_in, keep_out = p.kept(keys[0]), p.kept(keys[-1])
  kernel = w['kernel']
  out = {'kernel': kernel[..., keep_in, :][..., keep_out]}
  config['units' if 'units' in config else 'filters'] = int(keep_out.sum())
  _bias(call, p, config, w, keep_out, out, kernel.shape[-1])
  return config, out


def _transposed(call, p, keys, config, w):
  """A transposed conv (kernel `[kh, kw, out, in]`); removed inputs are 0."""
  keep_in, keep_out = p.kept(keys[0]), p.kept(keys[-1])
  out = {'kernel': w['kernel'][..., keep_out, :][..., keep_in]}
  config['filters'] = int(keep_out.sum())
  if 'bias' in w:
    out['bias'] = w['bias'][keep_out]
  return config, out


def _grouped(call, p, keys, config, w):
  """A Conv2D whose groups are its input channels: a depthwise conv."""
  keep_in, keep_out = p.kept(keys[0]), p.kept(keys[-1])
  out = {'kernel': w['kernel'][..., keep_out]}
  config['groups'] = int(keep_in.sum())
  config['filters'] = int(keep_out.sum())
  if 'bias' in w:
    out['bias'] = w['bias'][keep_out]
  return config, out


def _conv_with_ones(call, p, keys, config, w):
  """A padded conv whose removed inputs reach it through a ones channel:
  its kernel on that channel is `sum of constant * kernel` over them."""
  keep_in, keep_out = p.kept(keys[0]), p.kept(keys[-1])
  kernel = w['kernel']
  values = _removed_consts(p, keys[0], keep_in)
  extra = np.tensordot(values, kernel[..., ~keep_in, :],
                       axes=([0], [kernel.ndim - 2]))
  out = {'kernel': np.concatenate([kernel[..., keep_in, :],
                                   extra[..., None, :]],
                                  axis=kernel.ndim - 2)[..., keep_out]}
  config['filters'] = int(keep_out.sum())
  if 'bias' in w:
    out['bias'] = w['bias'][keep_out]
  return config, out


def _ones_channel(keras, layer, x):
  """`x` with one more channel, of ones: a 1x1 conv with a zero kernel and
  a bias of 1 (plain Keras layers: the model loads without tf1prune)."""
  conv = keras.layers.Conv1D if type(layer).__name__ == 'Conv1D' else \
      keras.layers.Conv2D
  ones = conv(1, 1, kernel_initializer='zeros', bias_initializer='ones',
              name=layer.name + '_shrink_ones')
  concat = keras.layers.Concatenate(name=layer.name + '_shrink_concat')
  made = ones(x)
  return concat([x, made]), [(ones, tuple(made.shape))]


def _border_map(keras, name, x, y, chain, kernel):
  """`y` plus the border map that a conv on ones of the chain's geometry
  makes of a channel of ones at `x` (the input of the chain)."""
  layers = borders.generator_layers(keras, [n.call.layer for n in chain],
                                    name, kernel.shape[-1])
  made, helpers = x, []
  for layer in layers:
    made = layer(made)
    if layer is not layers[0] and layer is not layers[-1]:
      continue                        # a ZeroPadding2D: nothing to count
    helpers.append((layer, tuple(made.shape)))
  layers[-1].kernel.assign(kernel.astype(np.float32))
  out = keras.layers.Add(name=name + '_shrink_add')([y, made])
  return out, helpers


def _added_map(keras, name, x, y, value):
  """`y` plus the map `value` ([H, W, O], or [1, L, O] for rank 3): a
  transposed conv of its size on a channel of ones pooled to one
  position, made from `x`."""
  rank3 = len(y.shape) == 3
  size = value.shape[1:2] if rank3 else value.shape[:2]
  layers = borders.map_layers(keras, name, size, value.shape[-1])
  made, helpers = x, []
  for layer in layers:
    before, made = made, layer(made)
    helpers.append((layer, tuple(made.shape), tuple(before.shape)))
  kernel = value[0] if rank3 else value            # [(H,) W, O]
  layers[-1].kernel.assign(kernel[..., None].astype(np.float32))
  out = keras.layers.Add(name=name + '_shrink_add')([y, made])
  return out, helpers


def _separable(call, p, keys, config, w):
  keep_in, keep_out = p.kept(keys[0]), p.kept(keys[-1])
  dw, pw = w['depthwise_kernel'], w['pointwise_kernel']
  keep_mid = np.repeat(keep_in, dw.shape[-1])
  out = {'depthwise_kernel': dw[:, :, keep_in, :],
         'pointwise_kernel': pw[:, :, keep_mid, :][..., keep_out]}
  config['filters'] = int(keep_out.sum())
  _bias(call, p, config, w, keep_out, out, pw.shape[-1])
  return config, out


def _depthwise(call, p, keys, config, w):
  keep_in = p.kept(keys[0])
  kernel = w['kernel']
  out = {'kernel': kernel[:, :, keep_in, :]}
  if 'bias' in w:
    out['bias'] = w['bias'].reshape(len(keep_in), -1)[keep_in].reshape(-1)
  return config, out


def _per_channel(call, p, keys, config, w):
  """Batch norm, LayerScale, Normalization, ...: every weight of the
  channels' count loses the removed ones."""
  keep = p.kept(keys[-1])
  if keep.all():
    return config, w
  if 'projection_dim' in config:              # ConvNeXt's LayerScale
    config['projection_dim'] = int(keep.sum())
  out = {}
  for k, v in w.items():
    if v.ndim and v.shape[-1] == keep.size:
      v = v[..., keep]
    out[k] = v
  return config, out


def _reshape(call, p, keys, config, w):
  kept = int(p.kept(keys[-1]).sum())
  target = list(config['target_shape'])
  target[-1] = kept
  config['target_shape'] = tuple(target)
  return config, w


_REBUILD = {'Dense': _dense_like, 'Conv2D': _dense_like,
            'Conv1D': _dense_like, 'Conv2DTranspose': _transposed,
            'SeparableConv2D': _separable, 'DepthwiseConv2D': _depthwise,
            'Reshape': _reshape}


def _assign(layer, values):
  depthwise = type(layer).__name__ == 'DepthwiseConv2D'
  weights = list(layer.weights)
  if len(weights) == 1 and len(values) == 1:     # Keras 3's LayerScale
    weights[0].assign(np.asarray(list(values.values())[0]).astype(
        np.dtype(_dtype_name(weights[0]))))
    return
  for variable in weights:
    name = _short(variable)
    if depthwise and name == 'depthwise_kernel':
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


def _rebuild_layer(call, p, keys, config, w):
  """(config, weights) of the new layer, or None: the same layer again."""
  layer = call.layer
  name = type(layer).__name__
  if p.view.node(keys[-1]).part == 'stop' or all(
      p.kept(k).all() for k in keys):
    return None
  if name == 'Conv2D' and config.get('groups', 1) != 1:
    return _grouped(call, p, keys, config, w)
  if call.name in p.ones:
    return _conv_with_ones(call, p, keys, config, w)
  if name in _REBUILD:
    return _REBUILD[name](call, p, keys, config, w)
  return _per_channel(call, p, keys, config, w)


def rebuild(model, p, names=None):
  """Returns (smaller model, [(old layer, new layer, call, new shape,
  [helper layers the shrink added for it])]).

  Args:
    model: the plain (stripped) Sequential or functional Keras model.
    p: its `tf1prune.keras.shrink.plan.Plan`.
    names: the names of the new model's input layers, in `model.inputs`'
      order (default: those of `model`).
  """
  from tf1prune.keras import _version
  keras = _version.keras_of(model)
  view, tensors, pairs = p.view, {}, []
  renamed = dict(zip([view.trace.resolve(t) for t in model.inputs],
                     names or []))
  for call in view.trace.calls:
    layer = call.layer
    key = view.keys[call.output]
    # The call's own symbolic inputs (a nested model's), by their ids.
    local = dict((id(t), tensors[view.trace.resolve(t)])
                 for t in node_inputs(call.node)
                 if type(layer).__name__ != 'InputLayer')
    if type(layer).__name__ == 'InputLayer':
      config = layer.get_config()
      tensors[call.output] = keras.Input(
          shape=call.shape[1:], batch_size=call.shape[0],
          dtype=config.get('dtype'),
          name=renamed.get(call.output, layer.name))
      continue
    if is_operation(layer):       # a Keras op: numbers and tensors
      args, kwargs = call_arguments(call.node, local)
      tensors[call.output] = layer(*args, **kwargs)
      continue
    keys = [view.keys[i] for i in call.inputs] + [key]
    config = layer.get_config()
    w = layer_weights(layer)
    helpers = []
    made = _rebuild_layer(call, p, keys, config, w)
    if made is not None:
      config, w = made
    if call.name in p.ones and made is not None:
      first = id(node_inputs(call.node)[0])
      local[first], helpers = _ones_channel(keras, layer, local[first])
    new = type(layer).from_config(config)
    # The call as it was (a TF op's numbers, `axis=`, mha(q, v)), on the
    # new tensors.
    args, kwargs = call_arguments(call.node, local)
    tensors[call.output] = new(*args, **kwargs)
    if made is None:
      new.set_weights(layer.get_weights())
    else:
      _assign(new, w)
    fold = p.folds.get(call.name)
    if fold is not None and fold.kind == 'border':
      start = fold.chain[0].inputs[0]
      source = [i for i in view.keys if view.keys[i] == start][0]
      tensors[call.output], more = _border_map(
          keras, layer.name, tensors[source], tensors[call.output],
          fold.chain, fold.kernel[..., p.kept(key)])
      helpers.extend(more)
    elif fold is not None and fold.kind == 'map':
      first = node_inputs(call.node)[0]
      tensors[call.output], more = _added_map(
          keras, layer.name, local[id(first)], tensors[call.output],
          fold.map[..., p.kept(key)])
      helpers.extend(more)
    pairs.append((layer, new, call, tuple(tensors[call.output].shape),
                  helpers))
  inputs = [tensors[view.trace.resolve(t)] for t in model.inputs]
  # The outputs in the model's own structure (a dict stays a dict).
  try:
    structure = model.output
  except AttributeError:      # a Keras 3 Sequential never called has none
    structure = model.outputs if len(model.outputs) > 1 else model.outputs[0]
  outputs = tf.nest.map_structure(
      lambda t: tensors[view.trace.resolve(t)], structure)
  return keras.Model(inputs if len(inputs) > 1 else inputs[0], outputs,
                     name=model.name), pairs
