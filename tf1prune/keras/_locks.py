"""Locks on Keras weights: chosen entries stay fixed while the rest trains.

    >>> import numpy as np, keras, tf1prune.keras as tk
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> _ = tk.lock(model, model.layers[0], 'kernel', np.s_[0, :], value=7.0)
    >>> model.compile('adam', 'mse')
    >>> _ = model.fit(np.ones((8, 3)), np.zeros((8, 2)), verbose=0)
    >>> np.asarray(model.layers[0].kernel)[0].tolist()
    [7.0, 7.0]

`lock(model, layer, weight, index=..., mask=..., value=...)` pins entries of
an already built layer weight, without touching the model code: at zero, a
number, an array, or the value they have now ('current'). The pin is a Keras
constraint (see `tf1prune.keras._pin`), applied by every Keras optimizer
after each update, so locked entries stay bit-identical through `fit` and
`optimizer.apply_gradients` in custom loops, under SGD with momentum, Adam,
AdamW's weight decay, EMA, gradient clipping and loss scaling, while every
other entry trains. Locks are part of the layer config: they come back with
`keras.models.load_model` (with tf1prune importable), and a
`tf.train.Checkpoint` of a locked model holds the locked values. After
restoring a checkpoint written by some other model, `apply_pins(model)`
writes the locked values again.
"""

import numbers

import numpy as np

from tf1prune.keras import _pin
from tf1prune.masks import index_mask

__all__ = ['apply_pins', 'lock', 'locked_entries', 'unlock']


def resolve_layer(model, layer):
  """`layer`, one of `model`'s layers (nested ones too) or the name of one,
  as the layer object.

  Raises:
    ValueError: `layer` is neither: another model's layer, an index, ...
  """
  if not hasattr(model, 'layers') or not hasattr(model, 'get_layer'):
    raise ValueError('model must be a Keras model (the one the layer trains '
                     'in), got %r (type %s)' % (model, type(model).__name__))
  names = [l.name for l in model.layers]
  if isinstance(layer, str):
    # Nested models' layers too, by the names Pruner reports.
    found = [l for l in _pin._layers(model) if l.name == layer]
    if len(found) == 1:
      return found[0]
    if found:
      raise ValueError('model %r has %d layers named %r (in nested models); '
                       'pass the layer object' % (model.name, len(found),
                                                  layer))
    raise ValueError('model %r has no layer named %r; its layers are %s'
                     % (model.name, layer, names))
  if any(l is layer for l in _pin._layers(model)):
    return layer
  name = getattr(layer, 'name', None)
  if isinstance(name, str):
    what = ('the %s %r, which is not in it (a layer of another model?)'
            % (type(layer).__name__, name))
  else:
    what = '%r (type %s)' % (layer, type(layer).__name__)
  raise ValueError('layer must be one of the layers of model %r or its name, '
                   'got %s; pass model.layers[i] or one of the names %s'
                   % (model.name, what, names))


def _values(value, current, what, index=None):
  """The ndarray of lock values for `value` ('current', 'zero', number, array).

  With `index`, an array that broadcasts to the shape of `weight[index]`
  gives the values of the indexed entries; else (or without `index`) it
  broadcasts to the weight's shape.
  """
  if isinstance(value, str):
    if value == 'current':
      return current
    if value == 'zero':
      return np.zeros_like(current)
    raise ValueError("lock value for %s must be 'current', 'zero', a number or "
                     "an array, got %r" % (what, value))
  if isinstance(value, numbers.Real) and not isinstance(value, bool):
    return np.full_like(current, value)
  if index is not None:
    try:
      full = np.array(current)
      full[index] = np.broadcast_to(np.asarray(value, current.dtype),
                                    full[index].shape)
      return full
    except (IndexError, TypeError, ValueError):
      pass
  try:
    return np.array(np.broadcast_to(np.asarray(value, current.dtype),
                                    current.shape))
  except (TypeError, ValueError) as e:
    raise ValueError('lock value for %s must be a number or an array that '
                     'broadcasts to shape %s, got %r (%s)'
                     % (what, list(current.shape), value, e))


def lock(model, layer, weight='kernel', index=None, mask=None, value='current'):
  """Locks entries of `layer`'s weight `weight`, in place; returns its pin.

  Args:
    model: the built Keras model (Keras 3 or tf_keras) the layer trains in.
    layer: a layer of it (the object in `model.layers`, or in a nested
      model's), or its name.
    weight: the weight's short name: 'kernel', 'bias', 'embeddings', ...
    index: NumPy index of the entries, e.g. `np.s_[:, 3]`, `...` for all.
    mask: bool array of the weight's shape, True where locked (with `index`:
      the union).
    value: 'current' (the values they have now), 'zero', a number, or an
      array: with `index` (and no `mask`), the values of `weight[index]`
      (broadcast to its shape), else broadcast to the weight's shape.

  Returns:
    The weight's `Pin` (`.locked`, `.values`, `.mask` as NumPy arrays).

  Raises:
    ValueError: `layer` is not one of the model's layers or their names, the
      layer is not built, the weight is not floating point, the index is out
      of range, the mask or value has the wrong shape.
  """
  layer = resolve_layer(model, layer)
  variable = _pin.weight_of(layer, weight)
  what = 'weight %s/%s' % (layer.name, weight)
  selected = index_mask(variable.shape, index, mask, what)
  values = _values(value, variable.numpy(), what,
                   index if mask is None else None)
  pin = _pin.pin_of(layer, weight, model)
  pin.add_lock(selected, values)
  pin.apply()
  return pin


def unlock(model, layer, weight='kernel', index=None, mask=None):
  """Releases locked entries (all of them with `index=...`); they train again."""
  layer = resolve_layer(model, layer)
  variable = _pin.weight_of(layer, weight)
  selected = index_mask(variable.shape, index, mask,
                        'weight %s/%s' % (layer.name, weight))
  _pin.pin_of(layer, weight, model).remove_locks(selected)


def locked_entries(model):
  """Returns {'layer/weight': bool ndarray of locked entries} of `model`."""
  return {'%s/%s' % (layer.name, name): pin.locked
          for layer, name, _, pin in _pin.pins(model) if pin.locked.any()}


def apply_pins(model):
  """Writes every pinned (locked or pruned) value into `model`'s weights.

  Needed only when something other than an optimizer step wrote the weights:
  a checkpoint restore, `set_weights`, or a custom loop's own
  `optimizer.finalize_variable_values` (EMA) on an optimizer that is not
  `model.optimizer`.
  """
  for _, _, variable, pin in _pin.pins(model):
    variable.assign(pin(variable))
