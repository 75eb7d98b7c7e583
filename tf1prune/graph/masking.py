"""Mask and threshold variables next to a weight, and the graph collections.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   w = tf.get_variable('fc/weights', [4, 3])
    ...   with tf.variable_scope('fc'):
    ...     masked = tf1prune.apply_mask(w)
    ...   [v.op.name for v in tf1prune.get_masks()], masked.op.name
    (['fc/mask'], 'fc/weights/masked_weight')

`apply_mask` is the contract of contrib's model_pruning: the collections below
hold masks, thresholds, masked weights and raw weights in creation order. Each
call also records the four names together in `RECORD_COLLECTION` (strings, so
they survive a meta graph export and import), and `masked_weight_records` reads
them back as one `MaskedWeight` per weight: nothing pairs parallel lists.
"""

import collections
import contextlib
import json

import tensorflow.compat.v1 as tf

__all__ = [
    'MASK_COLLECTION', 'THRESHOLD_COLLECTION', 'MASKED_WEIGHT_COLLECTION',
    'WEIGHT_COLLECTION', 'MASKED_WEIGHT_NAME', 'RECORD_COLLECTION',
    'MaskedWeight', 'apply_mask', 'get_masks', 'get_thresholds',
    'get_masked_weights', 'get_weights', 'get_weight_sparsity',
    'masked_weight_records',
]

MASK_COLLECTION = 'masks'
THRESHOLD_COLLECTION = 'thresholds'
MASKED_WEIGHT_COLLECTION = 'masked_weights'
WEIGHT_COLLECTION = 'kernel'
MASKED_WEIGHT_NAME = 'weights/masked_weight'
RECORD_COLLECTION = 'tf1prune_masked_weights'


class MaskedWeight(collections.namedtuple(
    'MaskedWeight', ['name', 'weight', 'mask', 'threshold', 'masked_weight'])):
  """One pruned weight: its raw value, mask and threshold variables, product.

  Attributes:
    name: the raw weight's op name (for a partitioned variable, its full name).
    weight: the raw weight tensor, as passed to `apply_mask`.
    mask: the mask variable, same shape and dtype as `weight`.
    threshold: the scalar threshold variable, of the weight's dtype.
    masked_weight: the tensor `mask * weight`.
  """


def _is_partitioned(x):
  """True for a PartitionedVariable (not public API: duck-typed)."""
  return not isinstance(x, (tf.Variable, tf.Tensor)) and hasattr(x, 'as_tensor')


def _weight_name(x):
  return x.name if _is_partitioned(x) else x.op.name


def _home(x):
  """The variable that the mask and threshold of `x` live with, or None.

  A variable's own; a partitioned variable's first partition; none for a
  tensor (the device scope then decides).
  """
  if _is_partitioned(x):
    return next(iter(x))
  # Duck-typed: TF 2.x resource variables are no tf.compat.v1.Variable.
  if isinstance(x, tf.Tensor) or not hasattr(x, 'initializer'):
    return None
  return x


@contextlib.contextmanager
def _on_device(device):
  """Places new ops on exactly `device`: outer device functions are ignored."""
  with tf.device(None), tf.device(device):
    yield


def _add_once(collection, value):
  if value not in tf.get_collection(collection):
    tf.add_to_collection(collection, value)


def _unpartitioned(getter, *args, **kwargs):
  """Custom getter: a scope-level partitioner does not split masks."""
  kwargs['partitioner'] = None
  return getter(*args, **kwargs)


@contextlib.contextmanager
def _own_scope(scope):
  """The variable scope of a new mask or threshold, entered as contrib did.

  A scope name or `VariableScope` is entered as given: each entry opens a
  name scope, as contrib's `apply_mask` (which entered it once for the mask
  and once for the threshold) did, so the op names that follow are
  contrib's (`softmax_linear/softmax_linear_2` in its CIFAR-10 example).
  '' or None is the current variable scope, entered without a name scope (no
  op name of the model changes; TF would make `a//mask` of ''). The scope's
  partitioner, if any, is not applied: the mask of a partitioned weight is
  one variable beside its first partition.
  """
  if isinstance(scope, tf.VariableScope) or scope:
    outer = tf.variable_scope(scope)
  else:
    outer = tf.variable_scope(tf.get_variable_scope(), auxiliary_name_scope=False)
  with outer as entered:
    with tf.variable_scope(entered, custom_getter=_unpartitioned,
                           auxiliary_name_scope=False):
      yield


def apply_mask(x, scope=''):
  """Returns `mask * x`, creating the mask and threshold of weight `x`.

  Args:
    x: the weight: a variable, a partitioned variable (pruned as one weight)
      or a float tensor with a fully defined shape of rank >= 1.
    scope: variable scope (name or `VariableScope`) for the new `mask` and
      `threshold` variables, entered as contrib's `apply_mask` did (the op
      names that follow are contrib's); '' uses the current one and opens
      no name scope. Under `reuse=True` the existing ones are used. A
      partitioner of the scope is not applied to them. They are placed on
      the device of a variable `x` (of the first partition of a partitioned
      one), so they live on the weight's parameter server.

  Returns:
    The masked weight, an op named `<name scope>/weights/masked_weight`.
    The mask and the scalar threshold have the weight's dtype, as in contrib.

  Raises:
    ValueError: `x` is not floating point, is a scalar or has no elements.
  """
  dtype = x.dtype.base_dtype
  shape = x.get_shape()
  name = _weight_name(x)
  if not dtype.is_floating:
    raise ValueError('apply_mask needs a floating-point weight; %s has dtype %s. '
                     'Cast it, or leave it unpruned.' % (name, dtype.name))
  if not shape.is_fully_defined() or shape.ndims == 0 or shape.num_elements() == 0:
    raise ValueError('apply_mask needs a weight of known, non-empty shape with '
                     'rank >= 1; %s has shape %s.' % (name, shape))
  home = _home(x)
  # On the weight's device (e.g. its parameter server under
  # replica_device_setter), whatever the device scope says. (tf.colocate_with
  # would not do: TF 2.x variables ignore it.)
  placement = (_on_device(home.device) if home is not None and home.device
               else contextlib.nullcontext())
  with placement:
    with _own_scope(scope):
      mask = tf.get_variable('mask', shape, dtype,
                             initializer=tf.ones_initializer(), trainable=False)
    with _own_scope(scope):
      threshold = tf.get_variable('threshold', [], dtype,
                                  initializer=tf.zeros_initializer(),
                                  trainable=False)
  if _is_partitioned(x):
    x = x.as_tensor()
  masked = tf.multiply(mask, x, name=MASKED_WEIGHT_NAME)
  if mask not in tf.get_collection(MASK_COLLECTION):
    for collection, value in ((MASK_COLLECTION, mask),
                              (THRESHOLD_COLLECTION, threshold),
                              (MASKED_WEIGHT_COLLECTION, masked),
                              (WEIGHT_COLLECTION, x)):
      _add_once(collection, value)
    tf.add_to_collection(RECORD_COLLECTION, json.dumps({
        'name': name, 'weight': masked.op.inputs[1].name, 'mask': mask.op.name,
        'threshold': threshold.op.name, 'masked_weight': masked.name}))
  return masked


def decode_name_record(entry):
  """Returns the dict of graph names stored as one JSON collection entry.

  Entries come back as bytes after a meta graph import, and
  `import_meta_graph(import_scope='s')` turns '{...}' into 's/{...}': the
  scope is put in front of every name (None values stay None).
  """
  if isinstance(entry, bytes):
    entry = entry.decode('utf-8')
  scope, brace, text = entry.partition('{')
  return {k: (scope + v if v is not None else None)
          for k, v in json.loads(brace + text).items()}


def graph_variables(graph):
  """Returns {op name: variable} of the global variables of `graph`."""
  return {v.op.name: v
          for v in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}


def masked_weight_records(graph=None):
  """Returns one `MaskedWeight` per `apply_mask` call in `graph`, in order."""
  graph = graph or tf.get_default_graph()
  variables = graph_variables(graph)
  records = []
  for entry in graph.get_collection(RECORD_COLLECTION):
    names = decode_name_record(entry)
    records.append(MaskedWeight(
        name=names['name'],
        weight=graph.get_tensor_by_name(names['weight']),
        mask=variables[names['mask']],
        threshold=variables[names['threshold']],
        masked_weight=graph.get_tensor_by_name(names['masked_weight'])))
  return records


def get_masks():
  """Returns the mask variables, in creation order."""
  return tf.get_collection(MASK_COLLECTION)


def get_thresholds():
  """Returns the threshold variables, in creation order."""
  return tf.get_collection(THRESHOLD_COLLECTION)


def get_masked_weights():
  """Returns the `mask * weight` tensors, in creation order."""
  return tf.get_collection(MASKED_WEIGHT_COLLECTION)


def get_weights():
  """Returns the raw weights passed to `apply_mask`, in creation order."""
  return tf.get_collection(WEIGHT_COLLECTION)


def get_weight_sparsity():
  """Returns one `tf.nn.zero_fraction(mask)` tensor per mask."""
  return [tf.nn.zero_fraction(mask) for mask in get_masks()]
