"""Benchmark: latency of a shrunk frozen graph against the unshrunk one.

    python -m bench.shrink_latency --quick

The CIFAR-10 example network's shape (24x24x3 input; conv1 5x5x3x64 SAME,
relu, max pool 3x3/2; conv2 5x5x64x64 SAME, relu, max pool 3x3/2; local3 384,
local4 192, softmax_linear 10), built with tf1prune layers and the example's
initialisers (biases: conv1 0, others 0.1). Filter pruning at 50% and 75% of
conv1, conv2, local3 and local4 (`granularity_map`, the logits are not
pruned); then `strip_pruning_vars_fn` and `shrink_graph_def`. For each
sparsity, times `session.run` of both frozen graphs in one process (one
thread each, alternating) at batch 1 and 128, checks that the outputs agree,
and reports the latency ratio (of the medians, and of the minima over the
repeats) next to the FLOPs ratio.

The machine's load average is recorded: on a busy machine batch-1 latencies
(a millisecond or less, much of it session overhead) are noisy; batch 128
tracks the FLOPs. The example's LRN layers are left out: the shrink keeps
every removed channel that is not 0 at an LRN (it adds to the LRN's sums),
such as conv2's, whose bias is 0.1; `with_lrn` in the results is the shrink
report of the net with them, at 50%.
Results: bench/results/shrink_latency.json (`--quick`: a smaller run, written
to shrink_latency_quick.json).
"""

import argparse
import os
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench._timing import one_thread_session, write_results

PRUNED = 'conv1:filter,conv2:filter,local3:filter,local4:filter'


def _network(images, lrn):
  normal = tf.truncated_normal_initializer
  const = tf.constant_initializer

  def conv(net, bias, scope):
    return tf1prune.masked_conv2d(net, 64, 5, weights_initializer=normal(
        stddev=5e-2, seed=1), biases_initializer=const(bias), scope=scope)

  def fc(net, size, stddev, bias, scope, relu=True):
    return tf1prune.masked_fully_connected(
        net, size, activation_fn=tf.nn.relu if relu else None,
        weights_initializer=normal(stddev=stddev, seed=2),
        biases_initializer=const(bias), scope=scope)

  net = conv(images, 0.0, 'conv1')
  net = tf.nn.max_pool(net, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME', name='pool1')
  if lrn:
    net = tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75,
                    name='norm1')
  net = conv(net, 0.1, 'conv2')
  if lrn:
    net = tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75,
                    name='norm2')
  net = tf.nn.max_pool(net, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME', name='pool2')
  net = tf.reshape(net, [-1, 6 * 6 * 64], name='flatten')
  net = fc(net, 384, 0.04, 0.1, 'local3')
  net = fc(net, 192, 0.04, 0.1, 'local4')
  net = fc(net, 10, 1 / 192.0, 0.0, 'softmax_linear', relu=False)
  return tf.identity(net, name='logits')


def frozen_pruned_graph(sparsity, lrn=False):
  """Returns the stripped frozen GraphDef (input 'images', output 'logits')."""
  with tf.Graph().as_default():
    step = tf.train.get_or_create_global_step()
    images = tf.placeholder(tf.float32, [None, 24, 24, 3], name='images')
    _network(images, lrn)
    p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
        'target_sparsity=%s,granularity_map=[%s]' % (sparsity, PRUNED)))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.assign(step, 10 ** 6))
      sess.run(p.mask_update_op())
      frozen = tf.graph_util.convert_variables_to_constants(
          sess, tf.get_default_graph().as_graph_def(), ['logits'])
  return tf1prune.strip_pruning_vars_fn(frozen, ['logits'])


def _timings(candidates, repeats, inner):
  """Seconds per call of each callable: {name: (median, min)}.

  Alternates the candidates within each repeat, after one warm-up call each.
  The minimum is the run least disturbed by other processes.
  """
  samples = {name: [] for name in candidates}
  for fn in candidates.values():
    fn()
  names = list(candidates)
  for r in range(repeats):
    for name in (names if r % 2 == 0 else names[::-1]):
      start = time.perf_counter()
      for _ in range(inner):
        candidates[name]()
      samples[name].append((time.perf_counter() - start) / inner)
  return {name: (float(np.median(v)), float(np.min(v)))
          for name, v in samples.items()}



def measure(sparsity, batches, repeats, inner):
  """Times both graphs at `sparsity`; returns a dict for the results file."""
  stripped = frozen_pruned_graph(sparsity)
  shrunk, report = tf1prune.shrink_graph_def(stripped, ['logits'])
  sessions = {'unshrunk': one_thread_session(stripped),
              'shrunk': one_thread_session(shrunk)}
  rs = np.random.RandomState(0)
  out = {'sparsity': sparsity, 'report': report.to_dict(),
         'flops_ratio': report.to_dict()['totals']['flops_ratio'],
         'params_ratio': report.to_dict()['totals']['params_ratio'],
         'bytes': {'unshrunk': stripped.ByteSize(), 'shrunk': shrunk.ByteSize()},
         'batches': {}}
  for batch in batches:
    feed = {'images:0': rs.randn(batch, 24, 24, 3).astype(np.float32)}
    results = {name: sess.run('logits:0', feed)
               for name, sess in sessions.items()}
    diff = float(np.abs(results['shrunk'] - results['unshrunk']).max())
    candidates = {name: (lambda s=sess: s.run('logits:0', feed))
                  for name, sess in sessions.items()}
    times = _timings(candidates, repeats,
                     inner if batch == 1 else max(1, inner // 10))
    out['batches'][str(batch)] = {
        'median_seconds': {k: v[0] for k, v in times.items()},
        'min_seconds': {k: v[1] for k, v in times.items()},
        'latency_ratio': times['shrunk'][0] / times['unshrunk'][0],
        'latency_ratio_of_min': times['shrunk'][1] / times['unshrunk'][1],
        'max_abs_output_difference': diff}
  for sess in sessions.values():
    sess.close()
  return out, report


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='small run for CI: fewer repeats, batch 1 and 8')
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  if args.quick:
    batches, repeats, inner = (1, 8), 3, 5
  else:
    batches, repeats, inner = (1, 128), 31, 50
  runs = []
  for sparsity in (0.5, 0.75):
    result, report = measure(sparsity, batches, repeats, inner)
    runs.append(result)
    print('filter sparsity %.2f' % sparsity)
    print(report.format_table())
    for batch, numbers in sorted(result['batches'].items(), key=lambda kv:
                                 int(kv[0])):
      print('batch %4s: latency x%.3f median, x%.3f min (median shrunk %.3f '
            'ms, unshrunk %.3f ms), FLOPs x%.3f, max |diff| %.2g' % (
                batch, numbers['latency_ratio'],
                numbers['latency_ratio_of_min'],
                1e3 * numbers['median_seconds']['shrunk'],
                1e3 * numbers['median_seconds']['unshrunk'],
                result['flops_ratio'], numbers['max_abs_output_difference']))
    print()
  _, with_lrn = tf1prune.shrink_graph_def(frozen_pruned_graph(0.5, lrn=True),
                                          ['logits'])
  print('with the LRN layers, at 0.50:')
  print(with_lrn.format_table())
  path = write_results('shrink_latency_quick' if args.quick else
                       'shrink_latency', {
                           'network': 'cifar10 example shape without LRN',
                           'pruned': PRUNED, 'threads': 1, 'repeats': repeats,
                           'load_average_1_5_15min': list(os.getloadavg()),
                           'runs': runs, 'with_lrn': with_lrn.to_dict()})
  print('wrote %s' % path)
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
