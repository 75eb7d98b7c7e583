"""Frozen inference graphs from pruning checkpoints: masks folded into weights.

    >>> import os, tempfile, tensorflow.compat.v1 as tf, tf1prune
    >>> train_dir = tempfile.mkdtemp()
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [None, 4], name='x')
    ...   y = tf1prune.masked_fully_connected(x, 2, scope='fc')
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = tf.train.Saver().save(sess, train_dir + '/model.ckpt')
    >>> report = tf1prune.strip_checkpoint(
    ...     train_dir, ['fc/Relu'], os.path.join(train_dir, 'stripped.pb'))
    >>> [(layer.name, layer.shape, layer.nonzeros) for layer in report.layers]
    [('fc', [4, 2], 8)]

`graph_def_from_checkpoint` freezes the latest checkpoint of a directory
(variables become constants read straight from the checkpoint);
`strip_pruning_vars_fn` replaces each `.../masked_weight` multiply of a frozen
graph by a constant `weight * mask` and drops what the outputs no longer need
(masks, thresholds, raw weights). `strip_checkpoint` does both, writes the
result atomically and returns a `StripReport`, holding about one layer's
weights at a time: values are read from the checkpoint only while their node
is written.

The written GraphDef loads in TF 1.15 and TF 2.x: attributes at their op's
default value are not written, devices are cleared.

`strip_checkpoint` reads top-down, one step per module: `Checkpoint.read`
(prefix, meta graph, reader: `_checkpoint`) -> `freeze` (variables become lazy
constants: `_freeze`, `resources`) -> `fold_masks` (`_fold`) -> prune to the
outputs and drop default attributes (`_lazy_graph`, `attrs`) -> `_write`
(node by node: `stream`, `atomic`) -> `StripReport` (`_report`).
"""

import tensorflow.compat.v1 as tf

from tf1prune.export import stream as _stream
from tf1prune.export.atomic import write_atomically
from tf1prune.export.attrs import op_defs, strip_default_attrs
from tf1prune.export._checkpoint import Checkpoint
from tf1prune.export._fold import fold_masks
from tf1prune.export._freeze import freeze
from tf1prune.export._lazy_graph import LazyGraph
from tf1prune.export.names import check_outputs, output_names
from tf1prune.export.progress import notify
from tf1prune.export._report import LayerStats, StripReport
from tf1prune.export.training_ops import check_inference


def graph_def_from_checkpoint(checkpoint_dir, output_node_names,
                              allow_training_ops=False):
  """Freezes the latest checkpoint of `checkpoint_dir`.

  Args:
    checkpoint_dir: the training directory (with its `checkpoint` file and
      `model.ckpt-N.{index,data,meta}`), or a checkpoint prefix.
    output_node_names: list (or comma-separated str) of the nodes to keep.
    allow_training_ops: freeze even if the outputs need training-mode ops
      (batch norm with `is_training=True`, dropout's random ops); otherwise
      that raises (`tf1prune.export.training_ops`).

  Returns:
    A `GraphDef` of what `output_node_names` need, every variable replaced by
    a `Const` holding its checkpoint value, devices cleared, attributes at
    their op's default left out (so that TF 1.15 loads what TF 2.x made).

  Raises:
    ValueError: no checkpoint or meta graph, an unknown output node, a
      node the outputs need that writes a variable, or training-mode ops
      (`TrainingGraphError`, unless `allow_training_ops`).
  """
  outputs = output_names(output_node_names)
  checkpoint = Checkpoint.read(checkpoint_dir)
  lazy = freeze(checkpoint, outputs)
  check_inference(lazy.graph_def, outputs, allow_training_ops)
  strip_default_attrs(lazy.graph_def, op_defs(lazy.graph_def,
                                               [checkpoint.op_list]))
  return lazy.materialize()


def strip_pruning_vars_fn(input_graph_def, output_node_names):
  """Folds every mask of a frozen graph into its weight.

  Args:
    input_graph_def: a frozen `GraphDef` (e.g. from `graph_def_from_checkpoint`)
      in which the inputs of each `.../masked_weight` Mul are constants.
    output_node_names: list (or comma-separated str) of the nodes to keep.

  Returns:
    A new `GraphDef`: each masked-weight Mul replaced by a `Const` of the same
    name holding `weight * mask`; mask, threshold and raw weight nodes that
    the outputs do not otherwise need removed; default-valued attributes
    dropped. `input_graph_def` is not changed.

  Raises:
    ValueError: an unknown output node, or a masked weight whose inputs are
      not constants.
  """
  outputs = output_names(output_node_names)
  check_outputs(outputs, set(n.name for n in input_graph_def.node),
                'input_graph_def')
  lazy = LazyGraph.from_graph_def(input_graph_def).pruned(outputs)
  fold_masks(lazy)
  return _prune(lazy, outputs).materialize()


def strip_checkpoint(checkpoint_dir, output_node_names, output_path,
                     allow_no_masks=False, allow_training_ops=False,
                     progress=None):
  """Freezes, strips and writes the latest checkpoint of `checkpoint_dir`.

  Equivalent to `strip_pruning_vars_fn(graph_def_from_checkpoint(...))`
  written to `output_path`, but reads each weight from the checkpoint only
  while writing it: memory stays near one layer's weights. The checkpoint is
  only read.

  Args:
    checkpoint_dir: the training directory, or a checkpoint prefix.
    output_node_names: list (or comma-separated str) of the nodes to keep.
    output_path: the `.pb` to write; its directory must exist. Written to a
      temporary file in that directory, then renamed.
    allow_no_masks: strip even if the outputs depend on no masked weight;
      otherwise that raises.
    allow_training_ops: strip even if the outputs need training-mode ops
      (batch norm with `is_training=True`, dropout); otherwise that raises
      `TrainingGraphError` saying how to export an inference graph.
    progress: optional `progress(stage, done, total, fraction)` callable
      (`tf1prune.export.progress`), called as variables are written.

  Returns:
    A `StripReport`.

  Raises:
    ValueError: no checkpoint or meta graph, an unknown output node, no
      masked weight (unless `allow_no_masks`), training-mode ops (unless
      `allow_training_ops`), an unwritable output directory, or a graph that
      cannot be frozen. No file is written then.
  """
  return strip_read_checkpoint(Checkpoint.read(checkpoint_dir),
                               output_node_names, output_path, allow_no_masks,
                               allow_training_ops, progress)


def strip_read_checkpoint(checkpoint, output_node_names, output_path,
                          allow_no_masks=False, allow_training_ops=False,
                          progress=None):
  """`strip_checkpoint` of a `_checkpoint.Checkpoint` (maybe a rebuilt graph)."""
  outputs = output_names(output_node_names)
  lazy = freeze(checkpoint, outputs)
  check_inference(lazy.graph_def, outputs, allow_training_ops)
  folds = fold_masks(lazy)
  if not folds and not allow_no_masks:
    raise ValueError(
        'checkpoint %r has no masked weights that the outputs %s depend on '
        '(no .../masked_weight multiply of apply_mask); nothing to strip. '
        'Pass allow_no_masks=True (--allow_no_masks) to freeze it anyway'
        % (checkpoint.prefix, ', '.join(outputs)))
  lazy = _prune(lazy, outputs, [checkpoint.op_list])
  sizes, dense_sizes, layers = _write(lazy, folds, output_path, progress,
                                      _elements(checkpoint, folds))
  return StripReport(
      checkpoint=checkpoint.prefix, output_path=output_path,
      output_nodes=outputs, layers=layers, file_bytes=sizes[0],
      file_bytes_gzip=sizes[1], dense_file_bytes=dense_sizes[0],
      dense_file_bytes_gzip=dense_sizes[1], num_nodes=len(lazy.graph_def.node))


def frozen_stripped(checkpoint, output_node_names, allow_training_ops=False):
  """The frozen GraphDef of a `Checkpoint`, masks folded, in memory."""
  outputs = output_names(output_node_names)
  lazy = freeze(checkpoint, outputs)
  check_inference(lazy.graph_def, outputs, allow_training_ops)
  fold_masks(lazy)
  return _prune(lazy, outputs, [checkpoint.op_list]).materialize()


def _prune(lazy, outputs, op_lists=()):
  """What `outputs` need, attributes at their default dropped (structure)."""
  lazy = lazy.pruned(outputs)
  strip_default_attrs(lazy.graph_def, op_defs(lazy.graph_def, op_lists))
  return lazy


def _elements(checkpoint, folds):
  """{constant: entries} of the frozen variables and folded weights.

  From the variables' shapes in the meta graph: what the progress line's
  time left is estimated from (the last layers of a net are the biggest).
  """
  elements = {}
  for node in checkpoint.graph_def.node:
    if 'shape' in node.attr and node.op in ('VariableV2', 'Variable',
                                            'VarHandleOp'):
      elements[node.name] = tf.TensorShape(
          node.attr['shape'].shape).num_elements() or 1
  for fold in folds:
    elements[fold.node] = elements.get(fold.weight, 1)
  return elements


def _write(lazy, folds, path, progress=None, elements=None):
  """Streams `lazy` into `path`; returns (file sizes, dense sizes, layers).

  Sizes are (raw bytes, gzip bytes). Each constant is read, written and
  dropped in turn; a folded weight is first counted as it is (the dense
  graph's size), then multiplied by its mask in place and written: at most a
  weight and its mask are in memory.
  """
  fold_by_node = {f.node: f for f in folds}
  out, dense = _stream.ByteCounter(), _stream.ByteCounter()
  layers = []
  elements = elements or {}
  deferred = lazy.deferred()
  total, done = len(deferred), 0
  work = float(sum(elements.get(name, 1) for name in deferred))
  worked = 0
  stage = 'writing variables'
  notify(progress, stage, 0, total, 0.0)
  with write_atomically(path) as f:

    def emit(chunks, to_dense=True):
      for chunk in chunks:
        f.write(chunk)
        out.write(chunk)
        if to_dense:
          dense.write(chunk)

    for node, read in lazy.items():
      if read is None:
        emit([_stream.serialized_node(node)])
        continue
      done += 1
      worked += elements.get(node.name, 1)
      fold = fold_by_node.get(node.name)
      if fold is None:
        value = read()
        emit(_stream.const_node_chunks(node, value))
        del value
        notify(progress, stage, done, total, worked / work)
        continue
      value = fold.read_weight()
      for chunk in _stream.const_node_chunks(node, value):
        dense.write(chunk)
      value = fold.apply_mask(value)
      layers.append(LayerStats.from_array(fold.layer, fold.weight, fold.node,
                                          value))
      emit(_stream.const_node_chunks(node, value), to_dense=False)
      del value
      notify(progress, stage, done, total, worked / work)
    emit([lazy.tail().SerializeToString(deterministic=True)])
  return out.close(), dense.close(), layers
