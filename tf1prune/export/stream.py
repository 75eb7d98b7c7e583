"""A GraphDef serialized node by node, and the bytes counted on the way.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export import stream as _stream
    >>> node = _stream.const_node('w', tf.float32.as_datatype_enum)
    >>> chunks = _stream.const_node_chunks(node, np.ones([2, 2], np.float32))
    >>> graph_def = tf.GraphDef()
    >>> _ = graph_def.ParseFromString(b''.join(bytes(c) for c in chunks))
    >>> tf.make_ndarray(graph_def.node[0].attr['value'].tensor).tolist()
    [[1.0, 1.0], [1.0, 1.0]]

A GraphDef's serialization is its nodes' entries followed by the rest
(library, versions): `serialized_node` gives one entry, and
`const_node_chunks` the entry of a constant without copying its array, so a
large graph is written one node at a time. `ByteCounter` counts what went by,
raw and gzipped; `file_sizes` counts a file that is already written.
"""

import gzip

import numpy as np
import tensorflow.compat.v1 as tf

# gzip's default level, as the `gzip` command uses it.
GZIP_LEVEL = 6


def const_node(name, dtype_enum):
  """A `Const` NodeDef without its value."""
  node = tf.NodeDef(name=name, op='Const')
  node.attr['dtype'].type = dtype_enum
  return node


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


def file_sizes(path, chunk_bytes=1 << 20):
  """(raw bytes, gzip bytes) of file `path`, read `chunk_bytes` at a time.

  The gzip size is `ByteCounter`'s: level 6, as the `gzip` command.
  """
  counter = ByteCounter()
  with tf.io.gfile.GFile(path, 'rb') as f:
    while True:
      chunk = f.read(chunk_bytes)
      if not chunk:
        return counter.close()
      counter.write(chunk)
