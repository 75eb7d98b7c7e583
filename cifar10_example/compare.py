"""What the demo measures of each frozen .pb: size, cost and speed.

    >>> from cifar10_example import compare
    >>> compare.ratio(25, 100), compare.ratio(3, 0)
    (0.25, None)

`graph_costs` reads a frozen graph's parameters and FLOPs per image through
`tf1prune.shrink_graph_def`'s report (the same count `strip_pruning_vars
--shrink` prints: weights and biases of every Conv2D, MatMul and depthwise
layer; 2 x multiply-adds). `latencies` times several graphs side by side in
one process: each repeat runs every graph once, in a rotating order, so a
machine that gets busier or quieter affects all of them alike, and the
median of the repeats is kept with its spread. Sessions are pinned to one
intra-op and one inter-op thread, the setting where the ratios are most
stable on a shared machine.
"""

import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune

__all__ = ['graph_costs', 'latencies', 'load_graph_def', 'ratio']


def ratio(value, reference):
  """`value / reference`, or None when there is no reference."""
  return None if not reference else value / float(reference)


def load_graph_def(pb_path):
  graph_def = tf.GraphDef()
  with open(pb_path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  return graph_def


def graph_costs(pb_path, output_names):
  """Returns `{'params': int, 'flops': int}` of the layers in `pb_path`.

  Args:
    pb_path: a frozen GraphDef (binary).
    output_names: its output op names.
  """
  _, report = tf1prune.shrink_graph_def(load_graph_def(pb_path), output_names)
  return {'params': int(report.params_before),
          'flops': int(report.flops_before)}


def _calls_for(run, seconds):
  """How many calls of `run` take about `seconds` (at least 1)."""
  began = time.time()
  run()
  once = max(time.time() - began, 1e-6)
  return max(1, int(seconds / once))


def latencies(pb_paths, input_name, output_name, images, batch_sizes,
              repeats=7, seconds=0.15):
  """Seconds per `session.run` of each graph, measured side by side.

  Args:
    pb_paths: dict name -> frozen .pb path; every graph has the placeholder
      `input_name` and the output `output_name`.
    input_name, output_name: op names.
    images: float32 `[n, ...]` inputs; a batch larger than `n` repeats them.
    batch_sizes: batch sizes to time.
    repeats: interleaved repeats per batch size (the median is kept).
    seconds: about how long one graph runs per repeat.

  Returns:
    dict name -> {batch size: {'median': s, 'min': s, 'max': s}}.
  """
  config = tf.ConfigProto(intra_op_parallelism_threads=1,
                          inter_op_parallelism_threads=1)
  runners = {}
  for name, path in pb_paths.items():
    graph = tf.Graph()
    with graph.as_default():
      tf.import_graph_def(load_graph_def(path), name='')
    session = tf.Session(graph=graph, config=config)
    runners[name] = (session, graph.get_tensor_by_name(input_name + ':0'),
                     graph.get_tensor_by_name(output_name + ':0'))
  names = sorted(pb_paths)
  result = {name: {} for name in names}
  try:
    for batch in batch_sizes:
      x = np.resize(images, (batch,) + images.shape[1:])
      calls = {}
      for name in names:
        session, inputs, outputs = runners[name]
        run = lambda s=session, i=inputs, o=outputs: s.run(o, {i: x})
        run()  # warm-up
        calls[name] = (run, _calls_for(run, seconds))
      times = {name: [] for name in names}
      for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
          run, n = calls[name]
          began = time.time()
          for _ in range(n):
            run()
          times[name].append((time.time() - began) / n)
      for name in names:
        t = times[name]
        result[name][batch] = {'median': float(np.median(t)),
                               'min': float(min(t)), 'max': float(max(t))}
  finally:
    for session, _, _ in runners.values():
      session.close()
  return result
