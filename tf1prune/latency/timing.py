"""Measuring a model's layers at a few widths on the runtime that will run it.

    >>> from tf1prune.channels.cost import Geometry, Layer, Width
    >>> from tf1prune.latency.timing import profile
    >>> conv = Layer('conv', 'conv', Width(16, ()), Width(32, ()), 9, 1, 64,
    ...              True, Geometry((8, 8), (3, 3), (1, 1), 'SAME', (1, 1),
    ...                             'Relu', (16, 32)))
    >>> table = profile([conv], fractions=(0.5, 1.0), repeats=3)
    >>> table['conv'].inputs, table['conv'].outputs, table.runtime
    ((8, 16), (16, 32), 'tf')

`profile(layers, runtime, threads, batch)` builds each layer alone (its op
with random weights, its bias and its activation, as the exported graph
fuses them) at every pair of widths on a grid (`fractions` of its full input
and output widths; a depthwise conv and an LRN have one width) and times it:

- `runtime='tf'`: a TF session with `threads` intra-op threads and one
  inter-op thread;
- `runtime='tflite'`: the TFLite interpreter with `threads` threads, each
  graph converted by TensorFlow's converter (TF 2.x).

A layer is timed as the difference between a graph of `2k` copies of it and
one of `k` copies (each copy with its own weights, one input), divided by
`k`: what one run of a graph costs besides its ops (the feed, the fetch,
the call) cancels out. Each graph's fastest of `repeats` runs is kept
(other work on the machine only ever adds time to a run), and the
table is made non-decreasing in each width (a narrower layer is taken to
cost at most what a wider one measured: what is left of the noise of
microsecond timings). A fraction of 0 is one channel. `step` finds
the runtime's channel step: the output widths a 1x1 conv runs as fast as at
the next multiple (the vector width of its kernels); a budget rounds kept
channels up to it.
"""

import time

import numpy as np

from tf1prune.channels.cost import Geometry, Layer, Width
from tf1prune.export.progress import notify
from tf1prune.latency import _machine
from tf1prune.latency.table import LatencyTable, LayerTimes

__all__ = ['RUNTIMES', 'profile', 'signature']

RUNTIMES = ('tf', 'tflite')
FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def signature(layers):
  """{layer name: its kind and geometry as a list}: what a table was
  measured for."""
  return dict((l.name, [l.kind] + [list(v) if isinstance(v, tuple) else v
                                   for v in l.geometry])
              for l in layers if l.geometry is not None)


def _grid(full, fractions):
  return tuple(sorted(set(max(1, int(round(f * full))) for f in fractions)))


def _build(tf, layer, w_in, w_out, batch, copies, rs):
  """Adds `copies` of `layer` at these widths on one input; returns the
  input placeholder and the fetch."""
  g = layer.geometry
  kind = layer.kind
  if kind == 'dense':
    x = tf.placeholder(tf.float32, [batch, w_in])
  else:
    x = tf.placeholder(tf.float32, [batch] + list(g.size) + [w_in])
  outputs = []
  for _ in range(copies):
    if kind == 'lrn':
      radius, bias, alpha, beta = g.padding
      y = tf.nn.lrn(x, radius, bias=bias, alpha=alpha, beta=beta)
      outputs.append(tf.reshape(y, [-1])[:1])
      continue
    if kind == 'dense':
      w = rs.randn(w_in, w_out)
      y = tf.matmul(x, w.astype(np.float32))
    elif kind == 'depthwise':
      multiplier = max(w_out // max(g.channels[0], 1), 1)
      w = rs.randn(g.kernel[0], g.kernel[1], w_in, multiplier)
      y = tf.nn.depthwise_conv2d(x, w.astype(np.float32),
                                 [1] + list(g.strides) + [1], g.padding,
                                 dilations=list(g.dilations))
    else:
      w = rs.randn(g.kernel[0], g.kernel[1], w_in, w_out)
      y = tf.nn.conv2d(x, w.astype(np.float32), [1] + list(g.strides) + [1],
                       g.padding, dilations=[1] + list(g.dilations) + [1])
    if layer.bias:
      y = tf.nn.bias_add(y, rs.randn(y.shape.as_list()[-1]).astype(
          np.float32))
    if g.activation is not None:
      y = getattr(tf.nn, {'Relu': 'relu', 'Relu6': 'relu6', 'Elu': 'elu',
                          'Selu': 'selu', 'Sigmoid': 'sigmoid',
                          'Tanh': 'tanh', 'LeakyRelu': 'leaky_relu',
                          'Softplus': 'softplus'}[g.activation])(y)
    outputs.append(tf.reshape(y, [-1])[:1])
  return x, tf.concat(outputs, 0)


def _fastest_ms(run, repeats):
  """Milliseconds of the fastest of `repeats` calls of `run` (after one
  call that warms it up)."""
  run()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  return 1000.0 * min(times)


def _time(layer, w_in, w_out, runtime, threads, batch, copies, repeats, seed):
  """Milliseconds of one copy of `layer` at these widths (see the module
  docstring)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  results = []
  for count in (copies, 2 * copies):
    rs = np.random.RandomState(seed)
    with tf.Graph().as_default():
      x, fetch = _build(tf, layer, w_in, w_out, batch, count, rs)
      feed = rs.rand(*x.shape.as_list()).astype(np.float32)
      if runtime == 'tflite':
        with tf.Session() as sess:
          converter = tf.lite.TFLiteConverter.from_session(sess, [x], [fetch])
          model = converter.convert()
        interpreter = tf.lite.Interpreter(model_content=model,
                                          num_threads=threads)
        interpreter.allocate_tensors()
        index = interpreter.get_input_details()[0]['index']
        interpreter.set_tensor(index, feed)
        results.append(_fastest_ms(interpreter.invoke, repeats))
      else:
        config = tf.ConfigProto(intra_op_parallelism_threads=threads,
                                inter_op_parallelism_threads=1)
        with tf.Session(config=config) as sess:
          results.append(_fastest_ms(lambda: sess.run(fetch, {x: feed}),
                                    repeats))
  return max((results[1] - results[0]) / copies, 0.0)


def step(runtime='tf', threads=1, batch=1, repeats=9, size=(14, 14)):
  """The runtime's channel step: 16, 8 or 4 if a 1x1 conv's time at each
  width below a multiple of it is about its time at that multiple, else 1.
  """
  times = {}
  for width in (32, 33, 40, 48, 63, 64):
    layer = Layer('step', 'conv', Width(64, ()), Width(width, ()), 1, 1,
                  size[0] * size[1], True,
                  Geometry(size, (1, 1), (1, 1), 'SAME', (1, 1), None,
                           (64, width)))
    times[width] = _time(layer, 64, width, runtime, threads, batch, 4,
                         repeats, 0)
  # 33 channels as slow as 48: multiples of 16; as slow as 40: of 8.
  slope = (times[64] - times[32]) / 32.0
  for candidate, (low, high) in ((16, (33, 48)), (8, (33, 40))):
    if slope > 0 and abs(times[low] - times[high]) < 0.25 * slope * (
        high - low):
      return candidate
  return 1


def _monotone(rows):
  """`rows` made non-decreasing along both axes (cumulative maxima)."""
  ms = np.maximum.accumulate(np.asarray(rows, np.float64), axis=0)
  ms = np.maximum.accumulate(ms, axis=1)
  return tuple(tuple(float(v) for v in row) for row in ms)


def profile(layers, runtime='tf', threads=1, batch=1, fractions=FRACTIONS,
            repeats=15, copies=8, find_step=False, progress=None):
  """Returns the `LatencyTable` of `layers` (`tf1prune.channels.cost.Layer`s
  with a `geometry`) on `runtime`.

  Args:
    layers: the layers to time (those without a geometry are left out).
    runtime: 'tf' or 'tflite'.
    threads: intra-op threads (TF) or interpreter threads (TFLite).
    batch: the batch size.
    fractions: the grid's widths, as fractions of each layer's full widths.
    repeats: timed runs per graph (the fastest is kept).
    copies: the layer copies of the smaller graph of each difference.
    find_step: also find the runtime's channel step (`step`).
    progress: optional `progress(stage, done, total, fraction)` callable.

  Raises:
    ValueError: an unknown runtime, or 'tflite' on TensorFlow 1.x.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  if runtime not in RUNTIMES:
    raise ValueError("latency_runtime must be 'tf' or 'tflite', got %r"
                     % (runtime,))
  if runtime == 'tflite' and tf.__version__.startswith('1.'):
    raise ValueError("latency_runtime='tflite' needs TensorFlow 2.x (this is "
                     "%s); profile with 'tf'" % tf.__version__)
  timed = [l for l in layers if l.geometry is not None]
  measured = []
  notify(progress, 'timing layers', 0, len(timed))
  for index, layer in enumerate(timed):
    full_in, full_out = layer.geometry.channels
    inputs = _grid(full_in, fractions if layer.kind != 'lrn' else (1.0,))
    outputs = (_grid(full_out, fractions) if layer.kind in ('conv', 'dense')
               else (full_out,))
    rows = []
    for w_in in inputs:
      if layer.kind in ('conv', 'dense'):
        rows.append(tuple(_time(layer, w_in, w_out, runtime, threads, batch,
                                copies, repeats, index)
                          for w_out in outputs))
      else:
        out = w_in * max(full_out // max(full_in, 1), 1)
        rows.append((_time(layer, w_in, out, runtime, threads, batch, copies,
                           repeats, index),))
    measured.append(LayerTimes(layer.name, layer.kind, inputs, outputs,
                               _monotone(rows)))
    notify(progress, 'timing layers', index + 1, len(timed))
  found = step(runtime, threads, batch) if find_step else 1
  return LatencyTable(measured, runtime, threads, batch, found,
                      _machine.describe(), signature(timed))
