"""Freezing a checkpoint: variables become constants, read lazily.

    >>> import os, tempfile, tensorflow.compat.v1 as tf
    >>> from tf1prune.export._checkpoint import Checkpoint
    >>> from tf1prune.export._freeze import freeze
    >>> train_dir = tempfile.mkdtemp()
    >>> with tf.Graph().as_default():
    ...   v = tf.get_variable('v', initializer=[1.0, 2.0])
    ...   y = tf.multiply(v, 2.0, name='y')
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = tf.train.Saver().save(sess, os.path.join(train_dir, 'model.ckpt'))
    >>> lazy = freeze(Checkpoint.read(train_dir), ['y'])
    >>> lazy.deferred(), lazy.node('v').op, lazy.source('v')().tolist()
    (['v'], 'Const', [1.0, 2.0])

For the nodes the outputs need, `VariableV2`/`VarHandleOp` become `Const`
nodes of a `LazyGraph` whose values are read from the checkpoint when written,
and `_resources.values_for_variables` rewrites what read them (functional
control flow included). A node that writes a variable cannot be frozen: that
raises `ValueError`. Devices are cleared.
"""

import tensorflow.compat.v1 as tf

from tf1prune.export import resources as _resources
from tf1prune.export._lazy_graph import LazyGraph
from tf1prune.export.names import check_outputs

_VARIABLE_OPS = ('VariableV2', 'Variable', 'VarHandleOp')


def freeze(checkpoint, outputs):
  """Returns a LazyGraph of what `outputs` need, variables as constants.

  Args:
    checkpoint: a `_checkpoint.Checkpoint` (meta graph and reader).
    outputs: list of output node names (`_names.output_names`).

  Returns:
    A `LazyGraph`; each former variable is a Const whose thunk reads the
    checkpoint. Devices are cleared.

  Raises:
    ValueError: an unknown output, a variable missing from the checkpoint or
      of another shape or dtype, or a node that writes a variable.
  """
  check_outputs(outputs, set(n.name for n in checkpoint.graph_def.node),
                'the meta graph of the checkpoint')
  lazy = LazyGraph(checkpoint.graph_def).pruned(outputs)
  variables = []
  for node in lazy.graph_def.node:
    node.device = ''
    if node.op not in _VARIABLE_OPS:
      continue
    read = checkpoint.variable_value(node)
    dtype = tf.as_dtype(node.attr['dtype'].type).base_dtype.as_datatype_enum
    shape = type(node.attr['shape'].shape)()
    shape.CopyFrom(node.attr['shape'].shape)
    variables.append(_resources.Variable(node.name, dtype, shape))
    lazy.make_const(node, dtype, read, keep_colocation=True)
  _resources.values_for_variables(lazy.graph_def, variables)
  for function in lazy.graph_def.library.function:
    for node in function.node_def:
      node.device = ''
  return lazy.pruned(outputs)
