"""Reading a checkpoint: its prefix, its meta graph, each variable's value.

    >>> import os, tempfile, tensorflow.compat.v1 as tf
    >>> from tf1prune.export._checkpoint import Checkpoint
    >>> train_dir = tempfile.mkdtemp()
    >>> with tf.Graph().as_default():
    ...   v = tf.get_variable('v', initializer=[1.0, 2.0])
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = tf.train.Saver().save(sess, os.path.join(train_dir, 'model.ckpt'))
    >>> checkpoint = Checkpoint.read(train_dir)
    >>> os.path.basename(checkpoint.prefix)
    'model.ckpt'
    >>> variable = [n for n in checkpoint.meta_graph.graph_def.node
    ...             if n.name == 'v'][0]
    >>> checkpoint.variable_value(variable)().tolist()
    [1.0, 2.0]

`checkpoint_prefix` accepts a training directory (its latest checkpoint) or
a prefix, through `tf.io.gfile` (so `gs://...` works). Which checkpoint entry
holds a variable is read from the meta graph's saver: custom `var_list` names
and partitioned slices work. `variable_value` checks the entry now and reads
it later, when the returned thunk is called.
"""

import re

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.graph_index import GraphIndex
from tf1prune.export.names import split_input


class NoCheckpoint(ValueError):
  """`checkpoint_prefix` found no checkpoint; `reason` says which case.

  Attributes:
    reason: `EMPTY` (no path given), `MISSING` (neither a directory nor a
      prefix), `FILE` (one of a checkpoint's files, not its prefix) or
      `NONE_SAVED` (a directory without a checkpoint).
    prefix: for `FILE`, the prefix of that checkpoint; else None.
  """
  EMPTY, MISSING, FILE, NONE_SAVED = 'empty', 'missing', 'file', 'none saved'

  def __init__(self, message, reason, prefix=None):
    super(NoCheckpoint, self).__init__(message)
    self.reason, self.prefix = reason, prefix


def checkpoint_prefix(checkpoint_dir):
  """Returns the latest checkpoint prefix in `checkpoint_dir`.

  Args:
    checkpoint_dir: a directory holding a `checkpoint` state file (as written
      by `tf.train.Saver` and `MonitoredTrainingSession`), or a checkpoint
      prefix itself (`.../model.ckpt-1000`).

  Returns:
    The prefix, a str, for which `<prefix>.index` exists.

  Raises:
    NoCheckpoint: (a ValueError) the directory does not exist or holds no
      checkpoint.
  """
  if not checkpoint_dir:
    raise NoCheckpoint('checkpoint_dir is empty; pass the directory that '
                       'holds the training checkpoints', NoCheckpoint.EMPTY)
  if tf.io.gfile.exists(checkpoint_dir + '.index'):
    return checkpoint_dir
  if not tf.io.gfile.isdir(checkpoint_dir):
    owner = _file_prefix(checkpoint_dir)
    if owner is not None:
      raise NoCheckpoint('checkpoint_dir %r is a file of checkpoint %r: pass '
                         'that prefix (without the file\'s suffix) or its '
                         'directory' % (checkpoint_dir, owner),
                         NoCheckpoint.FILE, owner)
    raise NoCheckpoint('checkpoint_dir %r does not exist (neither a directory '
                       'nor a checkpoint prefix)' % checkpoint_dir,
                       NoCheckpoint.MISSING)
  prefix = tf.train.latest_checkpoint(checkpoint_dir)
  if prefix is None or not tf.io.gfile.exists(prefix + '.index'):
    raise NoCheckpoint('checkpoint_dir %r holds no checkpoint (no `checkpoint` '
                       'file naming an existing model.ckpt-N.index); train '
                       'first or pass the directory the checkpoints were '
                       'saved to' % checkpoint_dir, NoCheckpoint.NONE_SAVED)
  return prefix


def _file_prefix(path):
  """The prefix of the checkpoint whose `.index`, `.meta` or data shard
  `path` is, or None."""
  match = re.match(r'(.+)\.(?:index|meta|data-\d+-of-\d+)$', path)
  if match and tf.io.gfile.exists(match.group(1) + '.index'):
    return match.group(1)
  return None


def read_meta_graph(prefix):
  """Returns the `MetaGraphDef` saved next to checkpoint `prefix`.

  Raises:
    ValueError: `<prefix>.meta` does not exist or does not parse.
  """
  path = prefix + '.meta'
  if not tf.io.gfile.exists(path):
    raise ValueError('checkpoint %r has no meta graph %r; save it with '
                     'tf.train.Saver(...).save(..., write_meta_graph=True)'
                     % (prefix, path))
  meta_graph = tf.MetaGraphDef()
  with tf.io.gfile.GFile(path, 'rb') as f:
    try:
      meta_graph.ParseFromString(f.read())
    except Exception as e:  # protobuf's DecodeError differs by version.
      raise ValueError('cannot parse meta graph %r: %s' % (path, e))
  return meta_graph


class Checkpoint(object):
  """A checkpoint's prefix, meta graph and reader.

  Args:
    prefix: the checkpoint prefix.
    meta_graph: its `MetaGraphDef` (graph and saver).
    reader: its reader (`tf.train.load_checkpoint(prefix)`).
  """

  def __init__(self, prefix, meta_graph, reader):
    self.prefix = prefix
    self.meta_graph = meta_graph
    self.reader = reader
    self._keys = None

  @classmethod
  def read(cls, checkpoint_dir):
    """The latest checkpoint of `checkpoint_dir` (or that prefix).

    Raises:
      ValueError: no checkpoint, or no meta graph next to it.
    """
    prefix = checkpoint_prefix(checkpoint_dir)
    meta_graph = read_meta_graph(prefix)
    return cls(prefix, meta_graph, tf.train.load_checkpoint(prefix))

  @property
  def graph_def(self):
    return self.meta_graph.graph_def

  @property
  def op_list(self):
    """The `OpList` of the TensorFlow that wrote the meta graph."""
    return self.meta_graph.meta_info_def.stripped_op_list

  def variable_value(self, node):
    """Returns a thunk reading variable `node`'s value, checked now.

    Args:
      node: a variable `NodeDef` of the meta graph (its `dtype` and `shape`
        attributes are compared with the checkpoint's entry).

    Raises:
      ValueError: the variable is not in the checkpoint, or has another
        dtype or shape there.
    """
    if self._keys is None:
      self._keys = _checkpoint_keys(self.meta_graph)
    key, spec = self._keys.get(node.name, (node.name, ''))
    return _variable_source(self.reader, key, spec, node)


def _parse_slice(spec):
  """Tuple of slices from a saver 'd0 d1 a,b:-' spec; None for ''."""
  if not spec:
    return None
  slices = []
  for dim in spec.split(' ')[-1].split(':'):
    if dim == '-':
      slices.append(slice(None))
    else:
      start, length = (int(x) for x in dim.split(','))
      slices.append(slice(start, start + length))
  return tuple(slices)


def _checkpoint_keys(meta_graph):
  """{variable node: (checkpoint key, slice spec)} from the savers' graph.

  Reads which `RestoreV2` output each `Assign`/`AssignVariableOp` writes, so
  savers built with a custom `var_list` and partitioned variables map right.
  The meta graph's own saver (`saver_def`) wins over other savers.
  """
  graph_def = meta_graph.graph_def
  nodes = GraphIndex(graph_def.node).nodes

  def producer(name):
    node, port = split_input(name)
    while node in nodes and nodes[node].op == 'Identity':
      node, port = split_input(nodes[node].input[0])
    return nodes.get(node), port

  def strings(name):
    const, _ = producer(name)
    if const is None or const.op != 'Const':
      return None
    return [s.decode('utf-8') for s in
            tf.make_ndarray(const.attr['value'].tensor).ravel()]

  scope = meta_graph.saver_def.restore_op_name.rpartition('/')[0]
  assigns = [n for n in graph_def.node
             if n.op in ('Assign', 'AssignVariableOp') and len(n.input) >= 2]
  assigns.sort(key=lambda n: not (scope and n.name.startswith(scope + '/')))
  keys = {}
  for assign in assigns:
    restore, port = producer(assign.input[1])
    if restore is None or restore.op != 'RestoreV2' or len(restore.input) < 3:
      continue
    names, slices = strings(restore.input[1]), strings(restore.input[2])
    if names is None or slices is None or port >= len(names):
      continue
    variable, _ = producer(assign.input[0])
    if variable is not None:
      keys.setdefault(variable.name, (names[port], slices[port]))
  return keys


def _variable_source(reader, key, spec, node):
  """Returns a thunk reading `node`'s value from the checkpoint, checked now."""
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  if key not in shapes:
    raise ValueError('variable %r (checkpoint key %r) is not in the '
                     'checkpoint; was the checkpoint written by this graph?'
                     % (node.name, key))
  dtype = tf.as_dtype(node.attr['dtype'].type).base_dtype
  if dtypes[key].base_dtype != dtype:
    raise ValueError('variable %r is %s in the graph but %s in the checkpoint'
                     % (node.name, dtype.name, dtypes[key].name))
  index = _parse_slice(spec)
  shape = list(shapes[key])
  if index is not None:
    shape = [len(range(*s.indices(d))) for s, d in zip(index, shape)]
  want = tf.TensorShape(node.attr['shape'].shape)
  if want.ndims is not None and not want.is_compatible_with(shape):
    raise ValueError('variable %r has shape %s in the graph but %s in the '
                     'checkpoint' % (node.name, want, shape))

  def read():
    # The reader gives scalars as NumPy scalars: keep every value an ndarray.
    value = np.asarray(reader.get_tensor(key))
    if index is not None:
      value = np.ascontiguousarray(value[index])
    return value
  return read
