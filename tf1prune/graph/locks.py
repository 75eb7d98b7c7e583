"""Locks: pin chosen entries of a weight at zero, a value, or their current value.

    >>> import numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   w = tf.get_variable('conv2/weights', [3, 3, 32, 64])
    ...   with tf.variable_scope('conv2'):
    ...     kernel = tf1prune.lock(w, np.s_[:, :, 29, 13], value='zero')
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     sess.run(kernel)[:, :, 29, 13].tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]

`lock(x, index)` returns `where(locked, lock_value, x)`: the graph uses that
instead of `x`. Locked entries of the result are read from the non-trainable
`lock_value` variable, never from `x`, so no optimizer can move them: the
gradient of `where` is zero there, and whatever momentum, Adam moments, FTRL
accumulators or weight decay do to the hidden entries of `x` never reaches the
output. The guarantee is bit-for-bit, for every optimizer, and it survives save
and restore because the lock variables are ordinary (global, non-trainable)
variables saved in every checkpoint.

Variables, in `variable_scope(scope)` ('' the current one, as `apply_mask`):
`lock_mask` (bool, shaped like `x`, True where locked) and `lock_value` (like
`x`); with `value='current'` also `lock_captured` (bool scalar). A current-value
lock holds the value of `x` at the moment `capture_lock_values_op()` runs, once:
run it after initializing or restoring (or add `LockHook()` to a
`MonitoredTrainingSession`). It captures only locks not captured yet, so running
it again after restoring a checkpoint that already holds the lock does nothing;
`force=True` re-captures. Until captured, reading a current-value lock fails with
an error that says so (never silently zero).

With pruning: `lock(apply_mask(w))` (recommended, the masked weight keeps its
name) or `apply_mask(lock(w))`. Either way `Pruning`'s mask update keeps the
mask entries of locked positions as they are (`frozen_mask_regions`), so a lock
taken on an unpruned entry is never pruned, and a pruned-and-locked entry is
never revived: it stays zero. The magnitude selection still counts locked
entries, so a weight with locked entries can end a few entries off its target
sparsity.

`bake_masks_op()` writes `mask * weight` (and the locked values) back into the
raw variables, so a plain checkpoint is sparse and no hidden value moves.
"""

import collections
import json
import numbers

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.masks import index_mask
from tf1prune.graph.masking import (decode_name_record, graph_variables,
                                    masked_weight_records)

__all__ = ['LOCK_COLLECTION', 'Lock', 'LockHook', 'bake_masks_op',
           'capture_lock_values_op', 'frozen_mask_regions', 'index_mask',
           'lock', 'lock_records']

LOCK_COLLECTION = 'tf1prune_locks'
LOCKED_WEIGHT_NAME = 'locked_weight'


class Lock(collections.namedtuple(
    'Lock', ['name', 'input', 'locked', 'value', 'captured', 'effective'])):
  """One `lock` call: its input, variables and output together.

  Attributes:
    name: op name of the locked tensor `x` (a variable's name).
    input: the tensor `x` as the lock read it.
    locked: bool variable shaped like `x`, True where locked.
    value: variable shaped like `x`: the value of the locked entries.
    captured: bool scalar variable (value='current' only, else None): whether
      `value` holds the captured value yet.
    effective: the tensor `where(locked, value, x)` the graph uses.
  """


def _is_partitioned(x):
  return not isinstance(x, (tf.Variable, tf.Tensor)) and hasattr(x, 'as_tensor')


def _scope(scope):
  if scope:
    return tf.variable_scope(scope)
  return tf.variable_scope(tf.get_variable_scope())


def _value_initializer(value, shape, dtype, name):
  """Returns the initializer of `lock_value` for `value`."""
  if isinstance(value, str):
    if value in ('current', 'zero'):
      return tf.zeros_initializer()
    raise ValueError("lock value must be 'current', 'zero', a number or an "
                     "array, got %r" % value)
  if isinstance(value, (tf.Tensor, tf.Variable)):
    raise TypeError('lock value must be a number or a NumPy array (it is stored '
                    'in a variable), got the tensor %s; pass value=\'current\' '
                    "to lock at a tensor's value" % value.name)
  if isinstance(value, numbers.Real) and not isinstance(value, bool):
    return tf.constant_initializer(float(value))
  try:
    array = np.broadcast_to(np.asarray(value, dtype.as_numpy_dtype), shape)
  except (TypeError, ValueError) as e:
    raise ValueError('lock value for %s must broadcast to shape %s, got %r (%s)'
                     % (name, list(shape), value, e))
  return tf.constant_initializer(np.array(array))


def _add_record(name, locked, value, captured, x, effective):
  for entry in tf.get_collection(LOCK_COLLECTION):
    if decode_name_record(entry)['locked'] == locked.op.name:
      return
  tf.add_to_collection(LOCK_COLLECTION, json.dumps({
      'name': name, 'input': x.name, 'locked': locked.op.name,
      'value': value.op.name,
      'captured': captured.op.name if captured is not None else None,
      'effective': effective.name}))


def lock(x, index=None, mask=None, value='current', scope=''):
  """Returns `x` with the chosen entries pinned: use it in place of `x`.

  Args:
    x: a float variable, partitioned variable or tensor of fully defined
      shape (a raw weight, a bias, or the output of `apply_mask`).
    index: NumPy index expression of the entries to lock, e.g.
      `np.s_[:, :, 29, 13]`, `np.s_[..., 0]`, `...` (every entry).
    mask: bool array of `x`'s shape, True where locked (or with `index`: the
      union).
    value: 'current' (the value `x` has when `capture_lock_values_op()` runs),
      'zero', or a number or array broadcastable to `x`'s shape.
    scope: variable scope of the new `lock_mask`, `lock_value` (and
      `lock_captured`) variables; '' uses the current one. Under reuse the
      existing ones are used and nothing is recorded twice.

  Returns:
    A tensor like `x`: `where(lock_mask, lock_value, x)`, named
    `<name scope>/<x's last name part>/locked_weight` (`conv1/weights` locked
    in scope `conv1`: `conv1/weights/locked_weight`).

  Raises:
    ValueError: `x` is not floating point or has an unknown shape, or `index`,
      `mask` or `value` does not fit it.
    TypeError: `value` is a tensor.
  """
  name = x.name if _is_partitioned(x) else x.op.name
  if _is_partitioned(x):
    x = x.as_tensor()
  x = tf.convert_to_tensor(x) if not isinstance(x, tf.Variable) else x
  dtype = x.dtype.base_dtype
  shape = x.get_shape()
  if not dtype.is_floating:
    raise ValueError('lock needs a floating-point tensor; %s has dtype %s'
                     % (name, dtype.name))
  if not shape.is_fully_defined():
    raise ValueError('lock needs a tensor of fully defined shape; %s has shape '
                     '%s' % (name, shape))
  shape = shape.as_list()
  selected = index_mask(shape, index, mask, 'weight %s' % name)
  current = isinstance(value, str) and value == 'current'
  initializer = _value_initializer(value, shape, dtype, name)
  with _scope(scope):
    locked = tf.get_variable('lock_mask', shape, tf.bool,
                             initializer=tf.constant_initializer(selected),
                             trainable=False)
    stored = tf.get_variable('lock_value', shape, dtype, initializer=initializer,
                             trainable=False)
    captured = None
    if current:
      captured = tf.get_variable('lock_captured', [], tf.bool,
                                 initializer=tf.zeros_initializer(),
                                 trainable=False)
  if list(locked.get_shape().as_list()) != shape:
    raise ValueError('lock variables %s have shape %s but %s has shape %s; '
                     'use another scope' % (locked.op.name,
                                            locked.get_shape().as_list(),
                                            name, shape))
  read = tf.identity(stored)
  if captured is not None:
    check = tf.Assert(captured, [
        'tf1prune lock %s holds value=\'current\' but was never captured: run '
        'tf1prune.capture_lock_values_op() after initializing or restoring, '
        'or add tf1prune.LockHook() to the session' % locked.op.name])
    with tf.control_dependencies([check]):
      read = tf.identity(stored)
  tensor = x if isinstance(x, tf.Tensor) else x.value()
  # Named after x (conv1/weights -> <name scope>/weights/locked_weight), so
  # regexes of weight_sparsity_map still match apply_mask(lock(w)).
  effective = tf.where_v2(locked, read, tensor,
                          name=name.rpartition('/')[2] + '/' + LOCKED_WEIGHT_NAME)
  _add_record(name, locked, stored, captured, tensor, effective)
  return effective


def lock_records(graph=None):
  """Returns one `Lock` per `lock` call in `graph`, in creation order."""
  graph = graph or tf.get_default_graph()
  variables = graph_variables(graph)
  records = []
  for entry in graph.get_collection(LOCK_COLLECTION):
    names = decode_name_record(entry)
    records.append(Lock(
        name=names['name'], input=graph.get_tensor_by_name(names['input']),
        locked=variables[names['locked']], value=variables[names['value']],
        captured=(variables[names['captured']] if names['captured'] else None),
        effective=graph.get_tensor_by_name(names['effective'])))
  return records


def capture_lock_values_op(force=False, locks=None):
  """Returns the op that stores each current-value lock's input in its value.

  Args:
    force: False: only locks not captured yet (safe to run after every
      session start); True: every current-value lock, again.
    locks: the `Lock`s to capture; default all of the graph.

  Returns:
    An op (a no-op if there is no current-value lock).
  """
  locks = lock_records() if locks is None else locks
  ops = []
  for record in locks:
    if record.captured is None:
      continue
    with tf.name_scope(record.locked.op.name + '_capture'):
      new = record.input
      if not force:
        new = tf.where_v2(record.captured, record.value.read_value(), new)
      assign = tf.assign(record.value, new)
      with tf.control_dependencies([assign]):
        ops.append(tf.assign(record.captured, True))
  return tf.group(*ops, name='capture_lock_values')


def frozen_mask_regions(records, graph=None):
  """Returns {record name: bool tensor} of mask entries a mask update must keep.

  A lock freezes the mask entries of the `MaskedWeight` it wraps (the lock's
  input is the masked weight) or feeds (the lock's output is the weight given
  to `apply_mask`). Several locks on one weight: their union.

  Args:
    records: `MaskedWeight`s, e.g. from `masked_weight_records()`.
  """
  regions = {}
  lock_list = lock_records(graph)
  for record in records:
    hits = [l.locked for l in lock_list
            if l.input.name == record.masked_weight.name
            or l.effective.name == record.weight.name]
    if hits:
      region = hits[0]
      for other in hits[1:]:
        region = tf.logical_or(region, other)
      regions[record.name] = region
  return regions


def bake_masks_op(include_locks=True, graph=None):
  """Returns an op writing each masked weight's value into its raw variable.

  A masked variable `w` gets `mask * w`, so a plain checkpoint is sparse too
  and nothing hidden is left for momentum or weight decay to move. With
  `include_locks`, locks are baked in as well: `lock(apply_mask(w))` writes
  `where(lock_mask, lock_value, mask * w)`, `apply_mask(lock(w))` writes
  `mask * where(lock_mask, lock_value, w)`, and `lock(w)` without a mask
  writes `where(lock_mask, lock_value, w)`. A `value='current'` lock not
  captured yet writes nothing at its entries (it has no value yet; the capture
  then takes what is there), so the op may run before `LockHook`. Weights that
  are no variable (tensors, partitioned variables) are left alone. The locks'
  own variables keep the pin: baking only makes the raw variable agree with
  it.

  To bake every new mask, build it under the mask update:

      with tf.control_dependencies([pruning.conditional_mask_update_op()]):
        update = tf1prune.bake_masks_op()
      hooks = [tf1prune.PruningHook(update)]

  Args:
    include_locks: also write the locked values.
    graph: default the default graph.

  Returns:
    An op.
  """
  graph = graph or tf.get_default_graph()
  variables = graph_variables(graph)
  locks = lock_records(graph) if include_locks else []
  by_effective = {l.effective.name: l for l in locks}
  by_input = collections.defaultdict(list)
  for l in locks:
    by_input[l.input.name].append(l)

  def pinned(l, value):
    # A current-value lock not captured yet has no value to write: its
    # entries keep `value`, which is what a capture will then take.
    locked = l.locked
    if l.captured is not None:
      locked = tf.logical_and(locked, l.captured)
    return tf.where_v2(locked, l.value.read_value(), value)

  def pin(value, tensor_name):
    for l in by_input.get(tensor_name, []):
      value = pinned(l, value)
    return value

  ops, baked = [], set()
  for record in masked_weight_records(graph):
    inner = by_effective.get(record.weight.name)
    var = variables.get(inner.name if inner is not None else record.name)
    if var is None or var.op.name in baked:
      continue
    with tf.name_scope(var.op.name + '_bake'):
      value = var.read_value()
      if inner is not None:
        value = pinned(inner, value)
      value = pin(record.mask.read_value() * value, record.masked_weight.name)
      ops.append(tf.assign(var, value))
    baked.add(var.op.name)
  for l in locks:
    var = variables.get(l.name)
    if var is None or var.op.name in baked:
      continue
    with tf.name_scope(var.op.name + '_bake'):
      ops.append(tf.assign(var, pin(var.read_value(), l.input.name)))
    baked.add(var.op.name)
  return tf.group(*ops, name='bake_masks')


class LockHook(tf.train.SessionRunHook):
  """Captures current-value locks once the session is initialized or restored.

  Runs `capture_lock_values_op()` in `after_create_session`: after the
  `MonitoredTrainingSession` initialized the variables or restored a
  checkpoint. Locks already captured (restored from a checkpoint that holds
  them) keep their value.

  Args:
    force: passed to `capture_lock_values_op`.
  """

  def __init__(self, force=False):
    self._force = force
    self._op = None

  def begin(self):
    self._op = capture_lock_values_op(force=self._force)

  def after_create_session(self, session, coord):
    session.run(self._op)
