"""A plain copy of a Keras model: masks and locks folded into its weights.

    >>> import numpy as np, keras, tf1prune.keras as tk
    >>> from tf1prune.keras._strip import plain_copy
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    >>> _ = tk.lock(model, model.layers[0], 'kernel', np.s_[0, 0], value=0.0)
    >>> plain = plain_copy(model)
    >>> plain.layers[0].kernel_constraint is None
    True

`plain_copy(model)` is what `strip_model` returns and what `shrink_model`
shrinks: a clone of a Sequential or functional model with every pin removed
from its layers' configs (a constraint the weight had before stays) and the
pinned values (`where(locked, values, where(mask, w, 0))`) as its weights.
"""

import numpy as np

from tf1prune.keras import _pin, _version

__all__ = ['plain_copy']


def plain_copy(model):
  """Returns a plain copy of `model` with masks and locks folded in.

  Args:
    model: a Sequential or functional Keras model.

  Raises:
    ValueError: `model` is a subclassed model (`clone_model` needs a
      Sequential or functional one), or Keras 3's safe mode keeps
      `clone_model` from copying a `Lambda` layer's Python function (the
      fix: `keras.config.enable_unsafe_deserialization()`).
  """
  keras = _version.keras_of(model)
  pinned = {id(v): pin for _, _, v, pin in _pin.pins(model)}

  def clone(layer):
    return layer.__class__.from_config(_pin.unpinned(layer.get_config())[0])

  try:
    plain = keras.models.clone_model(model, clone_function=clone)
  except (ValueError, TypeError, NotImplementedError) as e:
    if 'enable_unsafe_deserialization' in str(e):   # Keras 3's safe mode
      raise ValueError(
          'strip_model copies %r with keras.models.clone_model, which Keras '
          "3's safe mode stops at a layer holding a Python function (%s). If "
          'you trust the model, call keras.config.'
          'enable_unsafe_deserialization() first.' % (model.name, e))
    raise ValueError('strip_model needs a Sequential or functional model that '
                     'keras.models.clone_model can copy; %r cannot be (%s). '
                     'Build the model with keras.Sequential or keras.Model('
                     'inputs, outputs).' % (model.name, e))
  values = []
  for variable in model.weights:
    value = np.array(variable)
    pin = pinned.get(id(variable))
    values.append(pin.fold(value) if pin is not None else value)
  plain.set_weights(values)
  return plain
