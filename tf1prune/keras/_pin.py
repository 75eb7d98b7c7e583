"""The pin on one Keras weight: its pruning mask and its locked entries.

    >>> import numpy as np, keras
    >>> from tf1prune.keras import _pin
    >>> layer = keras.layers.Dense(2); layer.build((None, 2))
    >>> pin = _pin.pin_of(layer, 'kernel')
    >>> pin.set_mask(np.array([[1, 0], [1, 1]], bool))
    >>> pin.apply(); float(np.asarray(layer.kernel)[0, 1])
    0.0

Each pinned weight gets one `Pin`, a Keras constraint set on the variable (so
every optimizer applies it right after each update, weight decay, momentum,
EMA overwrites and clipping included) and on the layer's `<name>_constraint`
attribute (so it is part of the layer's config and comes back with
`keras.models.load_model`). A pin computes

    where(locked, values, where(mask, w, 0))

entry by entry, so kept entries pass bit for bit, pruned ones are +0.0 and
locked ones are exactly `values`. Its state lives in non-trainable
`tf.Variable`s read by the traced train step (a new mask takes effect at the
next step without retracing); its config stores them as base64 bytes, exact.
A constraint the weight had before is kept and applied first.

The optimizers' EMA (`use_ema=True`) overwrites the weights with their moving
average in `finalize_variable_values` at the end of `fit`, after the last
constraint (the average is of the values before the constraint, so it drifts
on locked entries): when a Keras gets its Pin class, its base optimizer
classes get that method wrapped so that it applies the pins of the variables
it finalized again (`hook_optimizer_class`). This holds for a model loaded
from a file too, whose pins no tf1prune function has seen.

Importing this module registers Pin (`'tf1prune>Pin'`) with each supported
Keras already imported; `import tf1prune.keras` does so with the Keras
`tf.keras` stands for. Keras 3 imports this module itself when it loads a
locked model; Keras 2 and tf_keras need `import tf1prune.keras` before
`load_model`.
"""

import base64
import collections.abc
import importlib
import sys
import weakref

import numpy as np
import tensorflow as tf

from tf1prune.keras import _version

__all__ = ['hook_optimizer', 'named_weights', 'pin_of', 'pins',
           'unpinned', 'weight_of']

_CLASSES = {}
# The layer attributes that may hold a weight's constraint, by weight name
# (default `<name>_constraint`): Keras 3's DepthwiseConv2D calls its weight
# `kernel`, tf_keras's `depthwise_kernel`; both keep `depthwise_constraint`.
_CONSTRAINT_ATTRS = {'kernel': ('kernel_constraint', 'depthwise_constraint'),
                     'depthwise_kernel': ('depthwise_constraint',),
                     'pointwise_kernel': ('pointwise_constraint',),
                     'recurrent_kernel': ('recurrent_constraint',),
                     'embeddings': ('embeddings_constraint',)}


def _encode(array):
  return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode('ascii')


def _decode(text, dtype, shape):
  raw = base64.b64decode(text.encode('ascii'))
  return np.frombuffer(raw, dtype).reshape(shape).copy()


def short_name(variable):
  """'kernel' for a Keras 3 or tf_keras variable of a layer."""
  return variable.name.split('/')[-1].split(':')[0]


def _below(layer, variable):
  """The variable's path below `layer` (`query/kernel` in a
  MultiHeadAttention named `mha`: `mha/query/kernel`), else its short name."""
  path = getattr(variable, 'path', None)
  parts = (path if isinstance(path, str) else variable.name).split(':')[0]
  parts = parts.split('/')
  for i in range(len(parts) - 2, -1, -1):
    if parts[i] == layer.name:
      return '/'.join(parts[i + 1:])
  return short_name(variable)


def named_weights(layer):
  """[(name, variable)] of `layer.weights`, in order.

  A weight's name is its short name (`kernel`), unless the layer holds
  several weights of that short name (MultiHeadAttention's four kernels,
  Bidirectional's two LSTMs): then its path below the layer
  (`query/kernel`, `forward_lstm/lstm_cell/kernel`).
  """
  shorts = [short_name(v) for v in layer.weights]
  return [(s if shorts.count(s) == 1 else _below(layer, v), v)
          for s, v in zip(shorts, layer.weights)]


def weight_of(layer, name):
  """Returns the built variable `name` of `layer` (clear errors otherwise).

  `name` as `named_weights` gives it.

  Raises:
    ValueError: the layer is not built or has no such weight.
  """
  if not getattr(layer, 'built', False):
    raise ValueError(
        'layer %r is not built yet, so it has no weight %r: build the model '
        'first (model.build(input_shape), or call it on a batch, or give it an '
        'Input) before locking or pruning' % (layer.name, name))
  named = named_weights(layer)
  found = [v for n, v in named if n == name]
  if len(found) != 1:
    shared = [n for n, v in named if short_name(v) == name]
    if shared:
      raise ValueError('layer %r has %d weights named %r; name one by its '
                       'path below the layer: %s' % (layer.name, len(shared),
                                                     name, shared))
    raise ValueError('layer %r has no weight %r; its weights are %s'
                     % (layer.name, name, [n for n, _ in named]))
  variable = found[0]
  dtype = tf.as_dtype(variable.dtype)
  if not dtype.is_floating:
    raise ValueError('weight %s/%s has dtype %s; only floating-point weights '
                     'can be locked or pruned' % (layer.name, name, dtype.name))
  return variable


def _settable(owner, attr):
  """Whether `owner.attr` can be assigned: not a property without setter
  (an RNN layer's `kernel_constraint` reads its cell's)."""
  found = getattr(type(owner), attr, None)
  return not isinstance(found, property) or found.fset is not None


def _direct_owner(layer, variable, keras):
  """The innermost layer, among `layer` and the layers its attributes hold
  (a cell, MultiHeadAttention's dense layers, Bidirectional's two RNNs, and
  theirs), whose weights include `variable`."""
  owner, pending, seen = layer, [layer], {id(layer)}
  while pending:
    current = pending.pop()
    for value in list(vars(current).values()):
      if isinstance(value, keras.layers.Layer) and id(value) not in seen:
        seen.add(id(value))
        if any(v is variable for v in value.weights):
          owner = value
          pending.append(value)
  return owner


def _owner_and_attr(layer, name, variable):
  """(object, attribute) holding the constraint of weight `name` (the
  `variable`) in config: on the layer that owns the variable directly, or
  its RNN cell."""
  layer = _direct_owner(layer, variable, _version.keras_of(layer))
  short = name.split('/')[-1]
  attrs = _CONSTRAINT_ATTRS.get(short, (short + '_constraint',))
  for owner in (layer, getattr(layer, 'cell', None)):
    for attr in attrs:
      if owner is not None and hasattr(owner, attr) and \
          _settable(owner, attr):
        return owner, attr
  return None, None


_PIN_FIELDS = frozenset(['shape', 'dtype', 'mask', 'locked', 'values',
                         'inner'])


def _is_serialized_pin(config):
  """Whether `config` is a pin as a layer's get_config holds it."""
  if not isinstance(config, collections.abc.Mapping):
    return False
  inner = config.get('config')
  return (isinstance(inner, collections.abc.Mapping) and
          set(inner) == _PIN_FIELDS and
          'Pin' in str(config.get('registered_name') or
                       config.get('class_name')))


def unpinned(config):
  """(`config` with every serialized pin, at any depth, replaced by the
  constraint it wrapped (serialized) or None, how many there were).

  `config` is a layer's, as get_config gives it: the layers of a nested
  model and an RNN's cell are inside. tf_keras configs hold TensorFlow's
  tracking wrappers of dicts and lists: rebuilt as plain ones.
  """
  if _is_serialized_pin(config):
    return config['config']['inner'], 1
  if isinstance(config, collections.abc.Mapping):
    items = [(key, unpinned(value)) for key, value in config.items()]
    return ({key: value for key, (value, _) in items},
            sum(count for _, (_, count) in items))
  if isinstance(config, collections.abc.Sequence) and not isinstance(
      config, (str, bytes)):
    items = [unpinned(value) for value in config]
    kind = tuple if isinstance(config, tuple) else list
    return kind(value for value, _ in items), sum(c for _, c in items)
  return config, 0


def _saved_pins(layer):
  """How many pins `layer.get_config()` holds (-1: it has no config)."""
  try:
    return unpinned(layer.get_config())[1]
  except (NotImplementedError, TypeError, ValueError):
    return -1


def _pin_class(keras):
  """The Pin class for one Keras module (a subclass of its Constraint)."""
  if keras.__name__ in _CLASSES:
    return _CLASSES[keras.__name__]

  class Pin(keras.constraints.Constraint):
    """Pins the pruned and locked entries of one weight (see module doc)."""

    def __init__(self, shape, dtype, mask=None, locked=None, values=None,
                 inner=None):
      self.shape = tuple(int(d) for d in shape)
      self.dtype = tf.as_dtype(dtype)
      self.inner = inner
      self._owners = []
      np_dtype = self.dtype.as_numpy_dtype
      with tf.init_scope():
        self._mask = tf.Variable(
            np.ones(self.shape, bool) if mask is None else mask,
            trainable=False, dtype=tf.bool, name='tf1prune_mask')
        self._locked = tf.Variable(
            np.zeros(self.shape, bool) if locked is None else locked,
            trainable=False, dtype=tf.bool, name='tf1prune_locked')
        self._values = tf.Variable(
            np.zeros(self.shape, np_dtype) if values is None else values,
            trainable=False, dtype=self.dtype, name='tf1prune_values')

    def __call__(self, w):
      if self.inner is not None:
        w = self.inner(w)
      w = tf.convert_to_tensor(w)
      w = tf.where(self._mask, w, tf.zeros_like(w))
      return tf.where(self._locked, tf.cast(self._values, w.dtype), w)

    @property
    def mask(self):
      """bool ndarray, True where the weight is kept."""
      return self._mask.numpy()

    @property
    def locked(self):
      """bool ndarray, True where the weight is locked."""
      return self._locked.numpy()

    @property
    def values(self):
      """ndarray of the locked values (meaningful where `locked`)."""
      return self._values.numpy()

    def set_mask(self, mask):
      self._mask.assign(np.asarray(mask, bool))

    def add_lock(self, selected, values):
      self._locked.assign(np.logical_or(self.locked, selected))
      self._values.assign(np.where(selected, values, self.values))

    def remove_locks(self, selected):
      self._locked.assign(np.logical_and(self.locked, ~selected))

    def fold(self, value):
      """NumPy: the pinned version of `value` (an ndarray like the weight)."""
      value = np.asarray(value)
      value = np.where(self.mask, value, np.zeros_like(value))
      return np.where(self.locked, self.values.astype(value.dtype), value)

    def attach(self, layer, variable):
      if not any(v is variable for _, v in self._owners):
        self._owners.append((weakref.ref(layer), variable))

    def attach_model(self, model):
      hook_optimizer(getattr(model, 'optimizer', None))

    def apply(self):
      """Writes the pinned value into every variable this pin is set on."""
      for _, variable in self._owners:
        variable.assign(self(variable))

    def get_config(self):
      return {'shape': list(self.shape), 'dtype': self.dtype.name,
              'mask': _encode(self.mask), 'locked': _encode(self.locked),
              'values': _encode(self.values),
              'inner': (keras.constraints.serialize(self.inner)
                        if self.inner is not None else None)}

    @classmethod
    def from_config(cls, config):
      shape, dtype = tuple(config['shape']), tf.as_dtype(config['dtype'])
      inner = config.get('inner')
      return cls(shape, dtype,
                 mask=_decode(config['mask'], bool, shape),
                 locked=_decode(config['locked'], bool, shape),
                 values=_decode(config['values'], dtype.as_numpy_dtype, shape),
                 inner=keras.constraints.get(inner) if inner else None)

  Pin.__name__ = Pin.__qualname__ = 'Pin'
  Pin = _register(keras)(Pin)
  if not _version.is_keras3(keras):
    # Keras 2 reads `.h5` configs by the bare class_name: register 'Pin'
    # too, unless another class has that name already.
    keras.utils.get_custom_objects().setdefault('Pin', Pin)
  _CLASSES[keras.__name__] = Pin
  _hook_optimizer_classes(keras)
  return Pin


def _register(keras):
  """`register_keras_serializable('tf1prune', 'Pin')` of that Keras."""
  for owner in (getattr(keras, 'saving', None), keras.utils):
    register = getattr(owner, 'register_keras_serializable', None)
    if register is not None:
      return register('tf1prune', 'Pin')
  # Keras 2.10: exported only as tf.keras.utils, defined here.
  generic_utils = importlib.import_module(keras.__name__ +
                                          '.utils.generic_utils')
  return generic_utils.register_keras_serializable('tf1prune', 'Pin')


def is_pin(obj):
  return any(obj.__class__ is cls for cls in _CLASSES.values())


def _set_variable_constraint(variable, pin):
  """Sets `pin` as the constraint that optimizers read from `variable`."""
  try:
    variable.constraint = pin          # Keras 3 variables have a setter.
    return
  except AttributeError:
    pass
  # Keras 2 / tf_keras: a tf.Variable (no setter), maybe wrapped by an
  # AutoCastVariable (mixed precision) around a distributed variable whose
  # components each answer `.constraint` for themselves.
  pending = [variable]
  while pending:
    current = pending.pop()
    current._constraint = pin          # pylint: disable=protected-access
    inner = getattr(current, '_variable', None)
    if inner is not None:
      pending.append(inner)
    for component in getattr(current, '_values', None) or ():
      pending.append(component)


def pin_of(layer, name, model=None):
  """Returns the `Pin` of weight `name` of `layer`, setting one if needed.

  `model` (the model the layer trains in) gets its optimizer hooked for EMA.
  """
  variable = weight_of(layer, name)
  if not variable.trainable and getattr(layer, 'trainable', True):
    raise ValueError(
        'weight %s/%s is not trainable: its layer updates it itself (moving '
        'statistics), where no constraint applies, so a lock or mask on it '
        'would not hold; lock or prune the trainable weights %s' % (
            layer.name, name, [short_name(v) for v in layer.trainable_weights]))
  current = variable.constraint
  if is_pin(current):
    current.attach(layer, variable)
    current.attach_model(model)
    return current
  keras = _version.keras_of(layer)
  pin = _pin_class(keras)(variable.shape, variable.dtype, inner=current)
  pin.attach(layer, variable)
  pin.attach_model(model)
  _set_variable_constraint(variable, pin)
  owner, attr = _owner_and_attr(layer, name, variable)
  before = _saved_pins(layer)
  if owner is not None:
    setattr(owner, attr, pin)
  if owner is None or before < 0 or _saved_pins(layer) <= before:
    # No attribute, or one the layer's config does not hold
    # (MultiHeadAttention rebuilds its dense layers from its own arguments).
    tf.get_logger().warning(
        'tf1prune.keras: the config of layer %s does not hold a constraint of '
        'its weight %s; the pin on it works in training but is not saved '
        'with the model config', layer.name, name)
  return pin


def pins(model):
  """Returns [(layer, weight name, variable, Pin)] of every pinned weight."""
  out = []
  for layer in _layers(model):
    for name, variable in named_weights(layer):
      if is_pin(getattr(variable, 'constraint', None)):
        pin = variable.constraint
        pin.attach(layer, variable)
        pin.attach_model(model)
        out.append((layer, name, variable, pin))
  seen, unique = set(), []
  for entry in out:
    if id(entry[2]) not in seen:
      seen.add(id(entry[2]))
      unique.append(entry)
  return unique


def _layers(model):
  """Every layer of `model`, depth first, each once (the model excluded)."""
  out, seen = [], set()

  def visit(layer):
    for child in getattr(layer, 'layers', []) or []:
      if id(child) not in seen:
        seen.add(id(child))
        out.append(child)
        visit(child)

  visit(model)
  if not out:
    out.append(model)
  return out


def _finalize_with_pins(original):
  """`original` finalize_variable_values, then each pinned variable re-pinned."""

  def finalize_variable_values(self, var_list):
    result = original(self, var_list)
    for variable in var_list:
      pin = getattr(variable, 'constraint', None)
      if is_pin(pin):
        variable.assign(pin(variable))
    return result

  finalize_variable_values._tf1prune_pins = True
  return finalize_variable_values


def hook_optimizer_class(cls):
  """Makes `cls.finalize_variable_values` re-apply the pins of its var_list.

  The method is wrapped where the class hierarchy defines it, once; an
  optimizer class without it (Keras 2's OptimizerV2: no EMA) is left alone.
  Only variables whose constraint is a pin are touched.
  """
  for owner in getattr(cls, '__mro__', ()):
    method = owner.__dict__.get('finalize_variable_values')
    if method is None:
      continue
    if not getattr(method, '_tf1prune_pins', False):
      setattr(owner, 'finalize_variable_values', _finalize_with_pins(method))
    return


def hook_optimizer(optimizer, model=None):
  """Hooks the class of `optimizer` (see `hook_optimizer_class`); None: no-op."""
  del model  # the hook re-pins the var_list it is given
  if optimizer is not None:
    hook_optimizer_class(type(optimizer))


def _hook_optimizer_classes(keras):
  """Hooks the base optimizer classes of `keras` (a model loaded from a file
  trains with them before any tf1prune function sees it)."""
  optimizers = keras.optimizers
  for owner in (optimizers, getattr(optimizers, 'experimental', None)):
    cls = getattr(owner, 'Optimizer', None)
    if isinstance(cls, type):
      hook_optimizer_class(cls)


def register(keras):
  """Registers the Pin class with `keras` and hooks its optimizers; the class."""
  return _pin_class(keras)


def register_imported():
  """Registers Pin with every supported Keras already imported (no import).

  Runs when this module is imported: Keras 3 imports it by itself when it
  loads a model whose config names `tf1prune.keras._pin`.
  """
  for name in ('keras', 'tf_keras'):
    module = sys.modules.get(name)
    if module is None or not hasattr(module, '__version__'):
      continue
    try:
      _version.check_keras_version(name, module.__version__)
    except ValueError:
      continue
    register(module)


register_imported()
