"""Run unchanged tf-slim models (`tf_slim.nets`) with tf1prune's batch norm.

    >>> import tensorflow.compat.v1 as tf, tf_slim as slim, tf1prune
    >>> from tf1prune import slim_compat
    >>> with tf.Graph().as_default(), slim_compat.use_tf1prune_batch_norm():
    ...   net = slim.conv2d(tf.zeros([2, 8, 8, 3]), 4, 3,
    ...                     normalizer_fn=slim.batch_norm, scope='conv1')
    ...   slim.batch_norm is tf1prune.batch_norm, [v.op.name for v in tf.global_variables()]
    (True, ['conv1/weights', 'conv1/BatchNorm/beta', 'conv1/BatchNorm/moving_mean', 'conv1/BatchNorm/moving_variance'])

tf-slim 1.1.0 builds `slim.batch_norm` on a Keras layer that no longer exists
on TF 2.x with Keras 3, so every model using it (ResNet, Inception, ...) fails
there. Inside `use_tf1prune_batch_norm()`, the names through which models
reach it, `tf_slim.batch_norm`, `tf_slim.layers.batch_norm` and
`tf_slim.layers.layers.batch_norm` (the nets' `slim.batch_norm`,
`layers.batch_norm`, `layers_lib.batch_norm`), are `tf1prune.batch_norm`; on
exit they are restored. Build both the model and its arg scope
(`resnet_arg_scope()`, `inception_v3_arg_scope()`, ...) inside it: `arg_scope`
keys its defaults by function, so defaults set for slim's own `batch_norm`
do not apply to ours. The other layers the nets use (conv2d, max_pool2d,
avg_pool2d, dropout, fully_connected, flatten, softmax) run on TF 2.x as they
are. The variables keep their names, so checkpoints written by TF 1.15 slim
restore, and the reverse.

The patch is process-wide (module attributes), not per graph or thread.

A module that keeps slim's `batch_norm` itself, captured when it was imported
(tf-slim's MobileNet v2 and v3 nets keep it in module-level dicts of arg-scope
defaults, `normalizer_fn=slim.batch_norm`), still calls slim's own: on TF 2.x
that fails with `No module named 'tf_keras'`. Import such modules inside the
context. On entering it, a warning names every imported module that holds
slim's own `batch_norm` in a module-level value (a dict, list or tuple) and
says so.
"""

import contextlib
import importlib
import sys

import tensorflow.compat.v1 as tf
import tf_slim  # pylint: disable=unused-import

from tf1prune.graph.batch_norm import batch_norm

__all__ = ['use_tf1prune_batch_norm']

# By module name: the package `tf_slim` rebinds its attribute `layers` to the
# module `tf_slim.layers.layers`.
_MODULES = tuple(importlib.import_module(name) for name in
                 ('tf_slim', 'tf_slim.layers', 'tf_slim.layers.layers'))


_DEPTH = 4   # how deep module-level dicts, lists and tuples are searched


def _holds(value, target, depth):
  """True if `value` is `target` or holds it (as a key or an item) within
  `depth` levels of dicts, lists and tuples."""
  if value is target:
    return True
  if depth <= 0:
    return False
  if isinstance(value, dict):
    return any(_holds(k, target, depth - 1) or _holds(v, target, depth - 1)
               for k, v in value.items())
  if isinstance(value, (list, tuple)):
    return any(_holds(v, target, depth - 1) for v in value)
  return False


def _captured(original):
  """['module.name' of every imported module outside tf_slim.layers that
  holds `original` in a module-level dict, list or tuple], sorted."""
  if original is None:
    return []
  found = []
  for name, module in list(sys.modules.items()):
    if module is None or name == 'tf_slim' or name.startswith(
        ('tf_slim.layers', 'tf1prune.', 'tensorflow.', 'keras.')):
      continue
    try:
      values = list(vars(module).items())
    except TypeError:
      continue
    if not any(v is original or any(v is m for m in _MODULES)
               for _, v in values):
      continue   # it never imported slim
    for key, value in values:
      if isinstance(value, (dict, list, tuple)) and \
          _holds(value, original, _DEPTH):
        found.append('%s.%s' % (name, key))
  return sorted(found)


@contextlib.contextmanager
def use_tf1prune_batch_norm():
  """A context in which tf-slim's `batch_norm` is `tf1prune.batch_norm`.

  Logs a warning naming the imported modules that hold slim's own
  `batch_norm` in a module-level value: they must be imported inside the
  context (see the module docstring).

  Yields:
    `tf1prune.batch_norm`.
  """
  saved = [(module, module.__dict__.get('batch_norm')) for module in _MODULES]
  held = _captured(saved[0][1])
  if held:
    tf.logging.warning(
        '%s hold tf-slim\'s own batch_norm, taken when they were imported: '
        'use_tf1prune_batch_norm() does not replace it there, and on TF 2.x '
        'it fails with "No module named \'tf_keras\'". Import these modules '
        'inside use_tf1prune_batch_norm() (tf-slim\'s MobileNet v2/v3 nets '
        'keep it in module-level dicts).', ', '.join(held))
  for module in _MODULES:
    module.batch_norm = batch_norm
  try:
    yield batch_norm
  finally:
    for module, original in saved:
      module.batch_norm = original
