"""Inference graphs: the model rebuilt for inference, frozen with a checkpoint.

    >>> import tempfile, tensorflow.compat.v1 as tf, tf_slim as slim, tf1prune
    >>> def model_fn(is_training=False):
    ...   x = tf.placeholder(tf.float32, [None, 4], name='x')
    ...   net = tf1prune.masked_fully_connected(x, 8, scope='fc1')
    ...   net = slim.dropout(net, 0.5, is_training=is_training, scope='drop')
    ...   return tf1prune.masked_fully_connected(net, 2, scope='fc2')
    >>> train_dir = tempfile.mkdtemp()
    >>> with tf.Graph().as_default():
    ...   y = model_fn(is_training=True)
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = tf.train.Saver().save(sess, train_dir + '/model.ckpt')
    >>> graph_def = tf1prune.inference_graph_def(model_fn, train_dir, ['fc2/Relu'])
    >>> sorted(set(n.op for n in graph_def.node))
    ['BiasAdd', 'Const', 'Identity', 'MatMul', 'Placeholder', 'Relu']

A training graph (tf-slim's `is_training=True`: batch statistics, dropout)
frozen as it is gives other outputs on every run; the strip refuses it
(`training_ops`). The documented way out: build the same model again with
`is_training=False` and give it the training checkpoint's values. `model_fn`
builds it (placeholders included) in a new graph, with the same variable
names; its meta graph replaces the checkpoint's, and the variables are read
from the checkpoint.
"""

import tensorflow.compat.v1 as tf

from tf1prune.export._checkpoint import Checkpoint, checkpoint_prefix
from tf1prune.export._strip import frozen_stripped, strip_read_checkpoint


def rebuilt_checkpoint(model_fn, checkpoint_dir):
  """A `Checkpoint` whose meta graph is `model_fn`'s graph.

  Args:
    model_fn: called with no arguments in a new `tf.Graph`; builds the
      inference model (its return value is not used).
    checkpoint_dir: the training directory, or a checkpoint prefix.

  Raises:
    ValueError: no checkpoint; `model_fn` is not callable.
  """
  if not callable(model_fn):
    raise ValueError('model_fn must be a function that builds the inference '
                     'model (is_training=False) in the default graph, got %r'
                     % (model_fn,))
  prefix = checkpoint_prefix(checkpoint_dir)
  with tf.Graph().as_default() as graph:
    model_fn()
    meta_graph = tf.train.export_meta_graph(graph=graph, clear_devices=True)
  return Checkpoint(prefix, meta_graph, tf.train.load_checkpoint(prefix))


def inference_graph_def(model_fn, checkpoint_dir, output_node_names,
                        allow_training_ops=False):
  """Rebuilds the model for inference and freezes it with a checkpoint.

  Args:
    model_fn: called with no arguments in a new `tf.Graph`; builds the model
      for inference (`is_training=False`), with the variable names of the
      training graph.
    checkpoint_dir: the training directory (its latest checkpoint), or a
      checkpoint prefix.
    output_node_names: list (or comma-separated str) of the output nodes of
      `model_fn`'s graph.
    allow_training_ops: as `strip_checkpoint`'s.

  Returns:
    A frozen `GraphDef`: variables are constants from the checkpoint, every
    mask is folded into its weight (as `strip_pruning_vars_fn`).

  Raises:
    ValueError: no checkpoint, an unknown output, a variable of the model
      that the checkpoint does not hold (or of another shape), or a model
      still in training mode (`TrainingGraphError`).
  """
  return frozen_stripped(rebuilt_checkpoint(model_fn, checkpoint_dir),
                         output_node_names, allow_training_ops)


def write_inference_graph(model_fn, checkpoint_dir, output_node_names,
                          output_path, allow_no_masks=False,
                          allow_training_ops=False, progress=None):
  """`inference_graph_def` streamed to a `.pb`, as `strip_checkpoint` writes.

  Args:
    model_fn, checkpoint_dir, output_node_names: as `inference_graph_def`.
    output_path: the `.pb` to write (atomically); its directory must exist.
    allow_no_masks, allow_training_ops: as `strip_checkpoint`'s.
    progress: optional `progress(stage, done, total, fraction)` callable.

  Returns:
    A `StripReport`.

  Raises:
    ValueError: as `inference_graph_def` and `strip_checkpoint`.
  """
  return strip_read_checkpoint(rebuilt_checkpoint(model_fn, checkpoint_dir),
                               output_node_names, output_path,
                               allow_no_masks=allow_no_masks,
                               allow_training_ops=allow_training_ops,
                               progress=progress)
