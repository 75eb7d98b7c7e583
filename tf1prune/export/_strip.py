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
"""

import collections
import re

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export import _freeze as freeze
from tf1prune.export import _graph_io as graph_io
from tf1prune.export._report import LayerStats, StripReport

__all__ = ['graph_def_from_checkpoint', 'strip_checkpoint',
           'strip_pruning_vars_fn', 'StripReport']

_MASKED_WEIGHT = re.compile(r'(^|/)masked_weight(_\d+)?$')
_MASK = re.compile(r'(^|/)mask(_\d+)?$')


def _output_names(output_node_names):
  """Normalizes a list or comma-separated str of node (or tensor) names."""
  if isinstance(output_node_names, str):
    output_node_names = output_node_names.split(',')
  names = [graph_io.split_input(n.strip())[0] for n in output_node_names or ()
           if n.strip()]
  if not names:
    raise ValueError('output_node_names is empty; name the inference '
                     "outputs, e.g. ['logits/BiasAdd']")
  return names


# ------------------------------------------------------------------ folding

class _Fold(collections.namedtuple('_Fold', [
    'node', 'layer', 'weight', 'mask', 'read_weight', 'read_mask', 'dtype'])):
  """One masked weight folded into constant `node` (names, value thunks)."""

  def apply_mask(self, weight):
    """Returns `weight * mask`, computed in `weight`'s memory if it can."""
    if weight.dtype != self.dtype or not weight.flags.writeable:
      weight = weight.astype(self.dtype)
    np.multiply(weight, self.read_mask().astype(self.dtype, copy=False),
                out=weight)
    return weight

  def value(self):
    return self.apply_mask(self.read_weight())


def _resolve(nodes, name, lazy):
  """Follows Identity/Enter from input `name` to a constant.

  Returns:
    (const node name, [Enter nodes passed, innermost first]) or (None, []).
  """
  enters = []
  node, port = graph_io.split_input(name)
  while node in nodes:
    current = nodes[node]
    if current.op == 'Const' and port == 0:
      return current.name, enters
    if current.op in ('Identity', 'Snapshot', 'Enter') and port == 0:
      if current.op == 'Enter':
        enters.append(current)
      node, port = graph_io.split_input(current.input[0])
      continue
    break
  return None, []


_NOT_CONSTANT = re.compile(
    r'^(Placeholder.*|Enter|Merge|Switch|Exit|NextIteration|LoopCond|.*While|'
    r'.*If|.*Case|.*PartitionedCall|Random.*|Stateless.*|TruncatedNormal|'
    r'Multinomial|.*Variable.*|Iterator.*)$')


def _evaluator(lazy, nodes, tensor, mul):
  """Thunk computing `tensor` from constants with TF (e.g. a concatenation of
  the parts of a partitioned weight), or raises ValueError if it depends on
  anything else."""
  functions = set(f.signature.name for f in lazy.graph_def.library.function)
  needed, stack = set(), [graph_io.split_input(tensor)[0]]
  while stack:
    name = stack.pop()
    if name in needed:
      continue
    node = nodes.get(name)
    if node is None or _NOT_CONSTANT.match(node.op) or node.op in functions:
      raise ValueError(
          'cannot fold masked weight %r: its input %r depends on %s, not only '
          'on constants; freeze the graph first (graph_def_from_checkpoint)'
          % (mul, tensor, repr(name) if node is None else
             'node %r (op %s)' % (name, node.op)))
    needed.add(name)
    stack.extend(graph_io.split_input(i)[0] for i in node.input)
  if len(needed) == 1 and nodes[graph_io.split_input(tensor)[0]].op == 'Const':
    return lazy.source(graph_io.split_input(tensor)[0])
  order = [n for n in lazy.graph_def.node if n.name in needed]
  sources = {n.name: lazy.source(n.name) for n in order
             if n.name in lazy.values}

  def evaluate():
    graph_def = tf.GraphDef()
    graph_def.versions.CopyFrom(lazy.graph_def.versions)
    for node in order:
      copy = graph_def.node.add()
      copy.CopyFrom(node)
      if node.name in sources:
        copy.attr['value'].tensor.CopyFrom(freeze.tensor_proto(
            sources[node.name](), node.attr['dtype'].type))
    name, port = graph_io.split_input(tensor)
    with tf.Graph().as_default() as graph:
      tf.import_graph_def(graph_def, name='')
      with tf.Session(graph=graph) as session:
        return session.run('%s:%d' % (name, port))
  return evaluate


def _fold_masks(lazy):
  """Replaces each masked-weight Mul of `lazy` by a constant; returns folds."""
  graph_def = lazy.graph_def
  nodes = freeze.nodes_by_name(graph_def)
  folds = []
  new_nodes = []
  for node in graph_def.node:
    if node.op != 'Mul' or not _MASKED_WEIGHT.search(node.name):
      continue
    data = [i for i in node.input if not i.startswith('^')]
    if len(data) != 2:
      raise ValueError('masked weight %r has %d inputs, expected 2 (mask, '
                       'weight)' % (node.name, len(data)))
    resolved = [_resolve(nodes, i, lazy) + (i,) for i in data]
    (a, a_enters, a_in), (b, b_enters, b_in) = resolved
    if b and _MASK.search(b) and not (a and _MASK.search(a)):
      (a, a_enters, a_in), (b, b_enters, b_in) = resolved[1], resolved[0]
    mask, weight, enters = a, b, b_enters or a_enters
    read_mask = lazy.source(mask) if mask else _evaluator(lazy, nodes, a_in,
                                                          node.name)
    read_weight = lazy.source(weight) if weight else _evaluator(
        lazy, nodes, b_in, node.name)
    mask, weight = mask or graph_io.split_input(a_in)[0], weight or (
        graph_io.split_input(b_in)[0])
    dtype = node.attr['T'].type
    np_dtype = tf.as_dtype(dtype).as_numpy_dtype

    const_name = node.name if not enters else node.name + '/folded'
    layer = re.sub(r'/mask(_\d+)?$', '', mask)
    fold = _Fold(const_name, layer, weight, mask, read_weight, read_mask,
                 np_dtype)
    lazy.values[const_name] = fold.value
    folds.append(fold)
    if enters:
      # Inside a while loop (v1 control flow): the constant lives outside,
      # the Mul becomes the chain of Enters that brought the weight in.
      new_nodes.append(graph_io.const_node(const_name, dtype))
      source = const_name
      for depth, enter in enumerate(reversed(enters)):
        hop = tf.NodeDef()
        hop.CopyFrom(enter)
        hop.attr['T'].type = dtype
        hop.attr['is_constant'].b = True
        del hop.input[:]
        hop.input.append(source)
        hop.name = node.name if depth == len(enters) - 1 else (
            '%s/folded/enter_%d' % (node.name, depth))
        if hop.name == node.name:
          node.CopyFrom(hop)
        else:
          new_nodes.append(hop)
        source = hop.name
    else:
      node.CopyFrom(graph_io.const_node(node.name, dtype))
  for node in new_nodes:
    graph_def.node.add().CopyFrom(node)
  return folds


# ---------------------------------------------------------------- output


def _finish(lazy, outputs, op_lists=()):
  """Prunes, and strips default attributes (on the structure only)."""
  lazy = freeze.prune(lazy, outputs)
  graph_io.strip_default_attrs(
      lazy.graph_def, graph_io.op_defs(lazy.graph_def, op_lists))
  return lazy


def graph_def_from_checkpoint(checkpoint_dir, output_node_names):
  """Freezes the latest checkpoint of `checkpoint_dir`.

  Args:
    checkpoint_dir: the training directory (with its `checkpoint` file and
      `model.ckpt-N.{index,data,meta}`), or a checkpoint prefix.
    output_node_names: list (or comma-separated str) of the nodes to keep.

  Returns:
    A `GraphDef` of what `output_node_names` need, every variable replaced by
    a `Const` holding its checkpoint value, devices cleared.

  Raises:
    ValueError: no checkpoint or meta graph, an unknown output node, or a
      node the outputs need that writes a variable.
  """
  outputs = _output_names(output_node_names)
  prefix = graph_io.checkpoint_prefix(checkpoint_dir)
  meta_graph = graph_io.read_meta_graph(prefix)
  lazy = freeze.freeze(meta_graph, tf.train.load_checkpoint(prefix), outputs)
  return freeze.materialize(lazy)


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
  outputs = _output_names(output_node_names)
  freeze.check_outputs(input_graph_def, outputs, 'input_graph_def')
  lazy = freeze.prune(freeze.lazy_from_graph_def(input_graph_def), outputs)
  _fold_masks(lazy)
  return freeze.materialize(_finish(lazy, outputs))


def _write(lazy, folds, path):
  """Streams `lazy` into `path`; returns (file sizes, dense sizes, layers).

  Each constant is read, written and dropped in turn; a folded weight is
  first counted as it is (the dense graph's size), then multiplied by its
  mask in place and written: at most a weight and its mask are in memory.
  """
  fold_by_node = {f.node: f for f in folds}
  out, dense = graph_io.ByteCounter(), graph_io.ByteCounter()
  layers = []
  with graph_io.write_atomically(path) as f:

    def emit(chunks, to_dense=True):
      for chunk in chunks:
        f.write(chunk)
        out.write(chunk)
        if to_dense:
          dense.write(chunk)

    for node in lazy.graph_def.node:
      if node.name not in lazy.values:
        emit([graph_io.serialized_node(node)])
        continue
      fold = fold_by_node.get(node.name)
      if fold is None:
        value = lazy.values[node.name]()
        if not isinstance(value, np.ndarray):
          value = tf.make_ndarray(value)
        emit(graph_io.const_node_chunks(node, value))
        del value
        continue
      value = fold.read_weight()
      for chunk in graph_io.const_node_chunks(node, value):
        dense.write(chunk)
      value = fold.apply_mask(value)
      layers.append(LayerStats.from_array(fold.layer, fold.weight, fold.node,
                                          value))
      emit(graph_io.const_node_chunks(node, value), to_dense=False)
      del value
    tail = tf.GraphDef()
    tail.versions.CopyFrom(lazy.graph_def.versions)
    if lazy.graph_def.HasField('library'):
      tail.library.CopyFrom(lazy.graph_def.library)
    emit([tail.SerializeToString(deterministic=True)])
  return out.close(), dense.close(), layers


def strip_checkpoint(checkpoint_dir, output_node_names, output_path,
                     allow_no_masks=False):
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

  Returns:
    A `StripReport`.

  Raises:
    ValueError: no checkpoint or meta graph, an unknown output node, no
      masked weight (unless `allow_no_masks`), an unwritable output
      directory, or a graph that cannot be frozen. No file is written then.
  """
  outputs = _output_names(output_node_names)
  prefix = graph_io.checkpoint_prefix(checkpoint_dir)
  meta_graph = graph_io.read_meta_graph(prefix)
  lazy = freeze.freeze(meta_graph, tf.train.load_checkpoint(prefix), outputs)
  folds = _fold_masks(lazy)
  if not folds and not allow_no_masks:
    raise ValueError(
        'checkpoint %r has no masked weights that the outputs %s depend on '
        '(no .../masked_weight multiply of apply_mask); nothing to strip. '
        'Pass allow_no_masks=True (--allow_no_masks) to freeze it anyway'
        % (prefix, ', '.join(outputs)))
  lazy = _finish(lazy, outputs, [meta_graph.meta_info_def.stripped_op_list])
  (raw, gz), (dense_raw, dense_gz), layers = _write(lazy, folds, output_path)
  return StripReport(
      checkpoint=prefix, output_path=output_path, output_nodes=outputs,
      layers=layers, file_bytes=raw, file_bytes_gzip=gz,
      dense_file_bytes=dense_raw, dense_file_bytes_gzip=dense_gz,
      num_nodes=len(lazy.graph_def.node))
