"""Benchmark: what the shrink's self-check costs beside the export.

    python -m bench.shrink_check --quick

Prunes tf_slim resnet_v1_50 (`bench.shrink_resnet`'s net and pruning:
`coupled_filter` at 50%, 224x224; `--quick`: one unit per block, 64x64) and
checkpoints it, then times in this process, `--repeats` times each: the
export without the check (`strip_checkpoint`, then `shrink_pb(...,
check=False)`) and the check alone (`tf1prune.export.verify
.compare_graph_defs` of the stripped and the shrunk graph: both imported,
two runs on random inputs at batch 2 and 1), and reports the medians and
their ratio, check / export. Results: bench/results/shrink_check.json
(`shrink_check_quick.json`).
"""

import argparse
import os
import tempfile
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench import shrink_resnet
from bench._paired import load_average
from bench._timing import write_results
from tf1prune.export.verify import compare_graph_defs


def _read(path):
  graph_def = tf.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  return graph_def


def _seconds(fn):
  start = time.time()
  result = fn()
  return time.time() - start, result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--repeats', type=int, default=None)
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  size = 64 if args.quick else 224
  repeats = args.repeats or (1 if args.quick else 3)
  with tempfile.TemporaryDirectory(prefix='shrink_check_') as work:
    output, groups = shrink_resnet._prune(size, args.quick, work)
    stripped = os.path.join(work, 'stripped.pb')
    small = os.path.join(work, 'shrunk.pb')
    load = load_average()
    strip_s, shrink_s, check_s = [], [], []
    for _ in range(repeats):
      strip_s.append(_seconds(lambda: tf1prune.strip_checkpoint(
          work, [output], stripped))[0])
      seconds, report = _seconds(lambda: tf1prune.shrink_pb(
          stripped, [output], small, check=False))
      shrink_s.append(seconds)
      seconds, found = _seconds(lambda: compare_graph_defs(
          _read(stripped), _read(small), [output]))
      check_s.append(seconds)
  export = float(np.median(strip_s) + np.median(shrink_s))
  result = dict(
      net='resnet_v1 (1 unit per block)' if args.quick else 'resnet_v1_50',
      size=size, coupled_groups=groups, repeats=repeats,
      params_before=report.params_before, params_after=report.params_after,
      strip_s=strip_s, shrink_s=shrink_s, check_s=check_s,
      export_median_s=export, check_median_s=float(np.median(check_s)),
      check_over_export=float(np.median(check_s)) / export,
      max_diff=found.max_diff, inputs=found.inputs,
      load_before=load, load_after=load_average())
  print('%s at %dx%d: export (strip + shrink) %.1f s, check %.1f s: x%.3f '
        'of the export; max diff %.1e' % (
            result['net'], size, size, export, result['check_median_s'],
            result['check_over_export'], found.max_diff))
  write_results('shrink_check_quick' if args.quick else 'shrink_check',
                result)


if __name__ == '__main__':
  main()
