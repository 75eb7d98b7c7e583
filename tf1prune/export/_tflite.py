"""A TFLite model next to the frozen graph, sparse-encoded when that is smaller.

    >>> import os, tempfile, numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export import write_tflite
    >>> work = tempfile.mkdtemp()
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [1, 64], name='x')
    ...   w = np.where(np.arange(64 * 64).reshape(64, 64) % 10 == 0, 1.0, 0.0)
    ...   y = tf.matmul(x, tf.constant(w, tf.float32), name='y')
    ...   with open(os.path.join(work, 'm.pb'), 'wb') as f:
    ...     _ = f.write(g.as_graph_def().SerializeToString())
    >>> try:
    ...   report = write_tflite(os.path.join(work, 'm.pb'), ['y'],
    ...                         os.path.join(work, 'm.tflite'))
    ...   ok = report.sparse and report.bytes < report.dense_bytes
    ... except ValueError as e:                   # TF 1.15: not available
    ...   ok = 'needs TensorFlow 2.x' in str(e)
    >>> ok
    True

TensorFlow 2.x only: its converter (`tf.lite.TFLiteConverter`) takes the
frozen graph; with `tf.lite.Optimize.EXPERIMENTAL_SPARSITY` it stores weights
that are mostly zeros in a compressed sparse format. Both encodings are made,
the smaller is kept, and the kept model is run on random inputs beside the
`.pb` in a TensorFlow session: `max_diff` is their largest difference relative
to max|y|. TF 1.15's converter is not used: see the deployment docs for it.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.atomic import write_atomically
from tf1prune.export.names import output_names


class TFLiteReport(collections.namedtuple('TFLiteReport', [
    'path', 'bytes', 'dense_bytes', 'sparse', 'max_diff'])):
  """What `write_tflite` wrote.

  Attributes:
    path: the `.tflite` file.
    bytes: its size.
    dense_bytes: the size without the sparse encoding.
    sparse: whether the sparse encoding was kept.
    max_diff: max |tflite - session| / max |session| on random inputs.
  """

  def format(self):
    return 'tflite %s: %d bytes (%s; dense encoding %d bytes), max diff %.1e' % (
        self.path, self.bytes, 'sparse encoding' if self.sparse else
        'dense encoding', self.dense_bytes, self.max_diff)


def _inputs(graph_def):
  """[(name, shape with None as 1)] of the graph's placeholders."""
  inputs = []
  for node in graph_def.node:
    if node.op == 'Placeholder':
      shape = tf.TensorShape(node.attr['shape'].shape)
      if shape.ndims is None:
        raise ValueError('placeholder %s has no known rank; TFLite needs one'
                         % node.name)
      inputs.append((node.name, [d if d is not None else 1
                                 for d in shape.as_list()]))
  if not inputs:
    raise ValueError('the graph has no Placeholder input to convert from')
  return inputs


def _convert(pb_path, inputs, outputs, sparse):
  converter = tf.lite.TFLiteConverter.from_frozen_graph(
      pb_path, [n for n, _ in inputs], outputs, dict(inputs))
  if sparse:
    converter.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
  return converter.convert()


def _max_diff(graph_def, model, inputs, outputs):
  rng = np.random.RandomState(0)
  feeds = [rng.uniform(-1, 1, shape).astype(np.float32) for _, shape in inputs]
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(graph_def, name='')
    with tf.Session(graph=graph) as sess:
      want = sess.run([o + ':0' for o in outputs],
                      {n + ':0': v for (n, _), v in zip(inputs, feeds)})
  interpreter = tf.lite.Interpreter(model_content=model)
  interpreter.allocate_tensors()
  for detail, value in zip(interpreter.get_input_details(), feeds):
    interpreter.set_tensor(detail['index'], value)
  interpreter.invoke()
  got = [interpreter.get_tensor(d['index'])
         for d in interpreter.get_output_details()]
  scale = max(max(float(np.max(np.abs(w))) for w in want), 1e-12)
  return max(float(np.max(np.abs(g - w))) for g, w in zip(got, want)) / scale


def write_tflite(pb_path, output_node_names, tflite_path):
  """Converts a frozen graph to TFLite; returns a `TFLiteReport`.

  Args:
    pb_path: a binary frozen GraphDef (e.g. from `strip_checkpoint`); its
      placeholders are the inputs (an unknown batch size becomes 1).
    output_node_names: list (or comma-separated str) of output nodes.
    tflite_path: the file to write (atomically).

  Raises:
    ValueError: on TF 1.15, or a graph without a placeholder of known rank.
    Whatever the converter raises for a graph it cannot convert.
  """
  if tf.__version__.startswith('1.'):
    raise ValueError('--tflite needs TensorFlow 2.x (this is %s); with TF '
                     "1.15 run its converter yourself (see the deployment "
                     "docs for a shrunk graph's caveat)" % tf.__version__)
  outputs = output_names(output_node_names)
  graph_def = tf.GraphDef()
  with tf.io.gfile.GFile(pb_path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  inputs = _inputs(graph_def)
  dense = _convert(pb_path, inputs, outputs, sparse=False)
  sparse = _convert(pb_path, inputs, outputs, sparse=True)
  use_sparse = len(sparse) < len(dense)
  model = sparse if use_sparse else dense
  with write_atomically(tflite_path) as f:
    f.write(model)
  return TFLiteReport(tflite_path, len(model), len(dense), use_sparse,
                      _max_diff(graph_def, model, inputs, outputs))
