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
"""

import contextlib
import importlib

import tf_slim  # pylint: disable=unused-import

from tf1prune.graph.batch_norm import batch_norm

__all__ = ['use_tf1prune_batch_norm']

# By module name: the package `tf_slim` rebinds its attribute `layers` to the
# module `tf_slim.layers.layers`.
_MODULES = tuple(importlib.import_module(name) for name in
                 ('tf_slim', 'tf_slim.layers', 'tf_slim.layers.layers'))


@contextlib.contextmanager
def use_tf1prune_batch_norm():
  """A context in which tf-slim's `batch_norm` is `tf1prune.batch_norm`.

  Yields:
    `tf1prune.batch_norm`.
  """
  saved = [(module, module.__dict__.get('batch_norm')) for module in _MODULES]
  for module in _MODULES:
    module.batch_norm = batch_norm
  try:
    yield batch_norm
  finally:
    for module, original in saved:
      module.batch_norm = original
