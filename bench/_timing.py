"""Side-by-side timing helpers shared by the benchmarks.

    >>> from bench._timing import interleaved_medians
    >>> medians = interleaved_medians({'a': lambda: None, 'b': lambda: None},
    ...                               repeats=3)
    >>> sorted(medians)
    ['a', 'b']

Every comparison is measured inside one process, the candidates alternating
within each repeat, and reported as medians and ratios: these machines are
noisy, so one absolute time means little.
"""

import json
import os
import platform
import time

import numpy as np

from bench._paired import interleaved_samples


def interleaved_medians(candidates, repeats=7, inner=1, warmup=1):
  """Times each callable `inner` times per repeat, alternating candidates.

  Returns:
    dict name -> median seconds per call.
  """

  def repeated(fn):
    def run():
      for _ in range(inner):
        fn()
    return run

  samples = interleaved_samples(
      {name: repeated(fn) for name, fn in candidates.items()}, repeats,
      warmup=warmup)
  return {name: float(np.median(v)) / inner for name, v in samples.items()}


# Vector extensions that change which kernels TF and oneDNN run.
_VECTOR_FLAGS = ('avx2', 'avx512f', 'avx512_bf16', 'amx_tile')


def cpu_model(cpuinfo):
  """'<model name> [<vector extensions>]' from the text of /proc/cpuinfo
  (its first processor), '' without a model name."""
  fields = {}
  for line in cpuinfo.splitlines():
    key, sep, value = line.partition(':')
    if sep and key.strip() not in fields:
      fields[key.strip()] = value.strip()
  model = fields.get('model name', '')
  flags = set(fields.get('flags', '').split())
  vector = ' '.join(f for f in _VECTOR_FLAGS if f in flags)
  return '%s [%s]' % (model, vector) if model and vector else model


def _cpu():
  try:
    with open('/proc/cpuinfo') as f:
      return cpu_model(f.read())
  except OSError:
    return platform.processor()


def machine_info():
  """The machine, TF version and date, for the results files.

  `cpu`: the CPU model and its vector extensions (Linux), since a step's
  time, and so an overhead's share of it, depends on them: the same bench
  measured a CIFAR-10 training step at 246 ms on one machine of this
  project and 93 ms on another.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {'machine': platform.machine(), 'cpu': _cpu(),
          'cpus': os.cpu_count(), 'python': platform.python_version(),
          'tensorflow': tf.__version__,
          'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}


def write_results(name, payload):
  """Writes bench/results/<name>.json atomically and returns its path."""
  out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, name + '.json')
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    json.dump(dict(payload, **{'info': machine_info()}), f, indent=2, sort_keys=True)
  os.replace(tmp, path)
  return path


def one_thread_session(graph_def):
  """A session on `graph_def` (a GraphDef, or the path of a binary one) with
  one intra-op and one inter-op thread: latencies compare like for like."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  if isinstance(graph_def, str):
    path, graph_def = graph_def, tf.GraphDef()
    with open(path, 'rb') as f:
      graph_def.ParseFromString(f.read())
  graph = tf.Graph()
  with graph.as_default():
    tf.import_graph_def(graph_def, name='')
  config = tf.ConfigProto(intra_op_parallelism_threads=1,
                          inter_op_parallelism_threads=1)
  return tf.Session(graph=graph, config=config)
