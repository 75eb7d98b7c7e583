"""Reading checkpoints and meta graphs, writing GraphDefs old runtimes load.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export import _graph_io as graph_io
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [2, 2], name='x')
    ...   y = tf.matmul(x, x, name='y')
    >>> graph_def = g.as_graph_def()
    >>> graph_io.strip_default_attrs(graph_def, graph_io.op_defs(graph_def))
    >>> sorted(graph_def.node[1].attr)   # TF 2.x's grad_a/grad_b are gone
    ['T']

`strip_default_attrs` removes every attribute whose value is its op's
registered default, in the graph and in its function library: a TF 1.15
runtime then loads a GraphDef written under TF 2.x, whose newer attributes
(MatMul's `grad_a`, `grad_b`, ...) it does not know. The op definitions come
from the meta graph of a checkpoint (`read_meta_graph`) and from the running
TensorFlow (`op_defs`), both through public API.

`write_atomically` streams a GraphDef node by node into a temporary file
next to the target and renames it into place, counting the bytes written and
their gzip size on the way, so the whole file never sits in memory.
"""

import contextlib
import gzip
import os
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

__all__ = ['ByteCounter', 'attr_functions', 'checkpoint_prefix', 'const_node',
           'const_node_chunks', 'graph_op_types', 'op_defs', 'split_input',
           'read_meta_graph', 'serialized_node', 'strip_default_attrs',
           'write_atomically']

# gzip's default level, as the `gzip` command uses it.
GZIP_LEVEL = 6


def split_input(name):
  """'^a' -> ('a', -1); 'a:2' -> ('a', 2); 'a' -> ('a', 0)."""
  if name.startswith('^'):
    return name[1:], -1
  node, sep, port = name.rpartition(':')
  if sep and port.isdigit():
    return node, int(port)
  return name, 0


def const_node(name, dtype_enum):
  """A `Const` NodeDef without its value."""
  node = tf.NodeDef(name=name, op='Const')
  node.attr['dtype'].type = dtype_enum
  return node


def attr_functions(attr_map):
  """Yields the names of the functions an attribute map refers to."""
  for value in attr_map.values():
    if value.HasField('func'):
      yield value.func.name
    for func in value.list.func:
      yield func.name


def checkpoint_prefix(checkpoint_dir):
  """Returns the latest checkpoint prefix in `checkpoint_dir`.

  Args:
    checkpoint_dir: a directory holding a `checkpoint` state file (as written
      by `tf.train.Saver` and `MonitoredTrainingSession`), or a checkpoint
      prefix itself (`.../model.ckpt-1000`).

  Returns:
    The prefix, a str, for which `<prefix>.index` exists.

  Raises:
    ValueError: the directory does not exist or holds no checkpoint.
  """
  if not checkpoint_dir:
    raise ValueError('checkpoint_dir is empty; pass the directory that holds '
                     'the training checkpoints')
  if tf.io.gfile.exists(checkpoint_dir + '.index'):
    return checkpoint_dir
  if not tf.io.gfile.isdir(checkpoint_dir):
    raise ValueError('checkpoint_dir %r does not exist (neither a directory '
                     'nor a checkpoint prefix)' % checkpoint_dir)
  prefix = tf.train.latest_checkpoint(checkpoint_dir)
  if prefix is None or not tf.io.gfile.exists(prefix + '.index'):
    raise ValueError('checkpoint_dir %r holds no checkpoint (no `checkpoint` '
                     'file naming an existing model.ckpt-N.index); train first '
                     'or pass the directory the checkpoints were saved to'
                     % checkpoint_dir)
  return prefix


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


def graph_op_types(graph_def):
  """Returns the set of op types used in `graph_def` and its function library.

  Calls of library functions are left out: they are not registered ops.
  """
  functions = set(f.signature.name for f in graph_def.library.function)
  types = set(node.op for node in graph_def.node)
  for function in graph_def.library.function:
    types.update(node.op for node in function.node_def)
  return types - functions


def _registered_op_defs(types):
  """OpDefs of the running TensorFlow for `types` (unknown ones left out)."""
  def query(names):
    graph_def = tf.GraphDef()
    for i, name in enumerate(sorted(names)):
      graph_def.node.add(name='n%d' % i, op=name)
    with tf.Graph().as_default():
      meta_graph = tf.train.export_meta_graph(graph_def=graph_def,
                                              collection_list=[])
    return list(meta_graph.meta_info_def.stripped_op_list.op)

  try:
    return query(types)
  except ValueError:  # TF 1.x refuses unknown ops: ask one at a time.
    found = []
    for name in types:
      try:
        found.extend(query([name]))
      except ValueError:
        pass
    return found


def op_defs(graph_def, op_lists=()):
  """Returns {op type: OpDef} for the ops `graph_def` uses.

  Args:
    graph_def: a `GraphDef`; only its op types are read.
    op_lists: more `OpList`s (e.g. a meta graph's
      `meta_info_def.stripped_op_list`, from the TensorFlow that wrote it);
      their definitions come first, the running TensorFlow's fill the gaps.

  Returns:
    A dict from op type to `OpDef`.
  """
  types = graph_op_types(graph_def)
  found = {}
  for op_list in op_lists:
    for op_def in op_list.op:
      if op_def.name in types:
        found.setdefault(op_def.name, op_def)
  missing = types - set(found)
  if missing:
    for op_def in _registered_op_defs(missing):
      found.setdefault(op_def.name, op_def)
  return found


def _strip_node(node, defs):
  op_def = defs.get(node.op)
  if op_def is None:
    return
  for attr in op_def.attr:
    if (attr.HasField('default_value') and attr.name in node.attr and
        node.attr[attr.name] == attr.default_value):
      del node.attr[attr.name]


def strip_default_attrs(graph_def, defs):
  """Removes, in place, node attributes equal to their op's default value.

  Args:
    graph_def: the `GraphDef` to edit; its function library is edited too.
    defs: {op type: OpDef}, as `op_defs` returns.
  """
  for node in graph_def.node:
    _strip_node(node, defs)
  for function in graph_def.library.function:
    for node in function.node_def:
      _strip_node(node, defs)


def serialized_node(node):
  """Returns `node`'s bytes as one `GraphDef.node` entry.

  A GraphDef's serialization is its nodes' entries followed by the rest
  (library, versions): concatenating them gives the same message. Map
  entries (attributes) are written sorted by key: the bytes are canonical.
  """
  wrapper = tf.GraphDef()
  wrapper.node.add().CopyFrom(node)
  return wrapper.SerializeToString(deterministic=True)


def _varint(value):
  out = bytearray()
  while True:
    byte, value = value & 0x7f, value >> 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


def _field(number, length):
  """Tag and length prefix of a length-delimited protobuf field."""
  return _varint(number << 3 | 2) + _varint(length)


# Field numbers: GraphDef.node 1, NodeDef.attr 5, map entry key 1 / value 2,
# AttrValue.tensor 8, TensorProto.tensor_content 4.
def const_node_chunks(node, value):
  """Serialized GraphDef entry of Const `node` holding ndarray `value`.

  Returns a list of bytes-like chunks whose concatenation equals
  `serialized_node` of `node` with `attr['value']` set to `value`, without
  copying the array: the last chunk is a view of `value`'s memory.

  Args:
    node: a Const NodeDef without a `value` attribute (its `dtype` set).
    value: ndarray of that dtype (any shape).
  """
  # ascontiguousarray would turn a 0-d value into shape [1].
  array = np.require(value, requirements='C')
  if array.dtype.hasobject or array.dtype.kind in 'OSUV':
    copy = tf.NodeDef()
    copy.CopyFrom(node)
    copy.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(
        array, dtype=tf.as_dtype(node.attr['dtype'].type)))
    return [serialized_node(copy)]
  content = array.reshape(-1).view(np.uint8)
  tensor = tf.AttrValue().tensor.__class__()
  tensor.dtype = node.attr['dtype'].type
  tensor.tensor_shape.CopyFrom(tf.TensorShape(array.shape).as_proto())
  tensor_head = tensor.SerializeToString(deterministic=True)
  if content.nbytes:  # proto3 does not write an empty bytes field.
    tensor_head += _field(4, content.nbytes)
  tensor_size = len(tensor_head) + content.nbytes
  attr_head = _field(8, tensor_size)
  attr_size = len(attr_head) + tensor_size
  entry_head = _field(1, 5) + b'value' + _field(2, attr_size)
  entry_size = len(entry_head) + attr_size
  node_head = (node.SerializeToString(deterministic=True) +
               _field(5, entry_size) + entry_head + attr_head + tensor_head)
  return [_field(1, len(node_head) + content.nbytes) + node_head,
          memoryview(content)]


class ByteCounter(object):
  """Counts bytes written, raw and as a gzip file (level 6, mtime 0)."""

  class _Sink(object):
    def __init__(self):
      self.size = 0

    def write(self, data):
      size = memoryview(data).nbytes
      self.size += size
      return size

    def flush(self):
      pass

  def __init__(self):
    self.raw_bytes = 0
    self._sink = self._Sink()
    self._gzip = gzip.GzipFile(fileobj=self._sink, mode='wb',
                               compresslevel=GZIP_LEVEL, mtime=0, filename='')

  def write(self, data):
    self.raw_bytes += memoryview(data).nbytes
    self._gzip.write(data)

  def close(self):
    """Finishes the gzip stream; returns (raw bytes, gzip bytes)."""
    self._gzip.close()
    return self.raw_bytes, self._sink.size


def _umask():
  mask = os.umask(0o22)
  os.umask(mask)
  return mask


@contextlib.contextmanager
def write_atomically(path):
  """Yields a binary file; on success it replaces `path` in one rename.

  The file is created in `path`'s directory (so `os.replace` is atomic) and
  removed if the block raises: `path` is then left as it was.

  Raises:
    ValueError: the directory does not exist or is not writable.
  """
  directory = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(directory):
    raise ValueError('output directory %r does not exist; create it first'
                     % directory)
  try:
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path),
                               suffix='.tmp', dir=directory)
  except OSError as e:
    raise ValueError('output directory %r is not writable: %s'
                     % (directory, e.strerror or e))
  try:
    with os.fdopen(fd, 'wb') as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
