"""Benchmark: memory and time of strip_checkpoint on a model of >= 50M weights.

    python -m bench.strip_large --quick     # a 0.2M-weight model (CI smoke)
    python -m bench.strip_large             # 50.4M weights: ~1 GB on disk

Builds a stack of masked fully connected layers (4096 wide: three 4096x4096
kernels and a 4096x10 one, 50.4M weights), prunes every mask to 90%, saves a
checkpoint (weights and masks, ~400 MB), then strips it in fresh
subprocesses, each reporting its peak resident memory (VmHWM of
/proc/self/status) and wall time:

  - `strip_checkpoint`: the streamed path (the `strip_pruning_vars` command);
  - the in-memory library path, `strip_pruning_vars_fn(
    graph_def_from_checkpoint(...))` serialized and written, for comparison;
  - a process that only imports TensorFlow and tf1prune: the baseline.

The figure of merit is the peak over the baseline, in copies of the weights
(float32 bytes of all masked weights). Results: bench/results/strip_large.json
(`strip_large_quick.json` with --quick).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

OUTPUT = 'logits/BiasAdd'


def _peak_rss_bytes():
  """Peak resident set size of this process (VmHWM), in bytes."""
  try:
    with open('/proc/self/status') as f:
      for line in f:
        if line.startswith('VmHWM:'):
          return int(line.split()[1]) * 1024
  except IOError:
    pass
  import resource  # pylint: disable=g-import-not-at-top
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _build(checkpoint_dir, width, depth, sparsity):
  """Builds, prunes and checkpoints the model; returns its weight count."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  import tf1prune  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  with tf.Graph().as_default():
    net = tf.placeholder(tf.float32, [None, width], name='x')
    for i in range(depth):
      net = tf1prune.masked_fully_connected(
          net, width, scope='fc%d' % (i + 1),
          weights_initializer=tf.random_normal_initializer(stddev=0.02))
    tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                    scope='logits')
    tf.train.get_or_create_global_step()
    update = tf1prune.Pruning(sparsity=tf.constant(sparsity)).mask_update_op()
    weights = sum(int(np.prod(w.shape.as_list()))
                  for w in tf1prune.get_weights())
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update)
      tf.train.Saver().save(sess, os.path.join(checkpoint_dir, 'model.ckpt'),
                            global_step=0)
  return weights


def _child(mode, checkpoint_dir, output_path):
  """Runs one measured job in this (fresh) process; prints a JSON line."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  import tf1prune  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  result = {}
  start = time.time()
  if mode == 'stream':
    report = tf1prune.strip_checkpoint(checkpoint_dir, [OUTPUT], output_path)
    result['report'] = {k: v for k, v in report.to_dict().items()
                        if k != 'layers'}
  elif mode == 'in_memory':
    frozen = tf1prune.graph_def_from_checkpoint(checkpoint_dir, [OUTPUT])
    stripped = tf1prune.strip_pruning_vars_fn(frozen, [OUTPUT])
    del frozen
    data = stripped.SerializeToString()
    with open(output_path, 'wb') as f:
      f.write(data)
    result['file_bytes'] = len(data)
  result['seconds'] = time.time() - start
  result['peak_rss_bytes'] = _peak_rss_bytes()
  print(json.dumps(result))


def _run_child(mode, checkpoint_dir, output_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run(
      [sys.executable, '-m', 'bench.strip_large', '--child', mode,
       checkpoint_dir, output_path], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, env=env,
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  if proc.returncode != 0:
    raise RuntimeError('%s run failed:\n%s' % (mode,
                                               proc.stderr.decode()[-3000:]))
  return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def _directory_bytes(directory):
  return sum(os.path.getsize(os.path.join(directory, n))
             for n in os.listdir(directory))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='small model (0.2M weights), for CI smoke runs')
  parser.add_argument('--skip_in_memory', action='store_true',
                      help='do not measure the in-memory library path')
  parser.add_argument('--child', nargs=3, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    _child(*args.child)
    return 0
  from bench._timing import write_results  # pylint: disable=g-import-not-at-top
  width, depth = (256, 3) if args.quick else (4096, 3)
  sparsity = 0.9
  work = tempfile.mkdtemp(prefix='strip_large_')
  try:
    checkpoint_dir = os.path.join(work, 'ckpt')
    os.makedirs(checkpoint_dir)
    start = time.time()
    weights = _build(checkpoint_dir, width, depth, sparsity)
    build_seconds = time.time() - start
    checkpoint_bytes = _directory_bytes(checkpoint_dir)
    weight_bytes = 4 * weights
    baseline = _run_child('baseline', checkpoint_dir, '')
    runs = {'stream': _run_child('stream', checkpoint_dir,
                                 os.path.join(work, 'stream.pb'))}
    if not args.skip_in_memory:
      runs['in_memory'] = _run_child('in_memory', checkpoint_dir,
                                     os.path.join(work, 'in_memory.pb'))
    for run in runs.values():
      over = run['peak_rss_bytes'] - baseline['peak_rss_bytes']
      run['peak_over_baseline_bytes'] = over
      run['peak_over_baseline_weight_copies'] = over / float(weight_bytes)
    report = runs['stream']['report']
    payload = {
        'model': '%d masked fc layers %dx%d and one %dx10, sparsity %.2f' % (
            depth, width, width, width, sparsity),
        'weights': weights,
        'weight_bytes_float32': weight_bytes,
        'checkpoint_bytes': checkpoint_bytes,
        'build_and_save_seconds': build_seconds,
        'baseline_peak_rss_bytes': baseline['peak_rss_bytes'],
        'runs': runs,
        'pb_bytes': report['file']['bytes'],
        'pb_gzip_bytes': report['file']['gzip_bytes'],
        'dense_pb_gzip_bytes': report['dense_file']['gzip_bytes'],
        'sparsity': report['totals']['sparsity'],
    }
    path = write_results('strip_large_quick' if args.quick else 'strip_large',
                         payload)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  mib = 1024.0 * 1024.0
  print('model: %s, %.1fM weights (%.0f MiB float32), checkpoint %.0f MiB' % (
      payload['model'], weights / 1e6, weight_bytes / mib,
      checkpoint_bytes / mib))
  print('baseline (import TF + tf1prune): peak RSS %.0f MiB' % (
      baseline['peak_rss_bytes'] / mib))
  for name, run in sorted(runs.items()):
    print('%-9s peak RSS %6.0f MiB (+%.0f MiB over baseline = %.2f weight '
          'copies), %.1f s' % (name, run['peak_rss_bytes'] / mib,
                               run['peak_over_baseline_bytes'] / mib,
                               run['peak_over_baseline_weight_copies'],
                               run['seconds']))
  print('stripped .pb %.0f MiB, gzip %.0f MiB (dense weights: gzip %.0f MiB)'
        % (payload['pb_bytes'] / mib, payload['pb_gzip_bytes'] / mib,
           payload['dense_pb_gzip_bytes'] / mib))
  print('wrote %s' % path)
  return 0


if __name__ == '__main__':
  sys.exit(main())
