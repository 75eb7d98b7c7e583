"""Benchmark: the stripped frozen graph against the same net never masked.

    python -m bench.inference --quick

For each sparsity (0, 50, 75, 90, 95%): builds the CIFAR-10 example network
(`cifar10_example/model.py` via `bench/_cifar_net.py`) with tf1prune's masked
layers on an `images` placeholder `[None, 24, 24, 3]`, sets every mask by
magnitude to that sparsity (`tf1prune.Pruning(sparsity=...)` +
`mask_update_op()`), saves a checkpoint and strips it with
`tf1prune.strip_checkpoint`. Then builds the same architecture never masked
(`tf.get_variable` + `tf.nn` layers), loads it with the same effective weights
(`weights * mask`, and the biases) and freezes it with
`tf.graph_util.convert_variables_to_constants`.

Both `.pb` files are loaded into their own graph and session; their outputs
are compared on one batch, and their latencies timed alternately at batch 1
and batch 128: median time per run, and the median of the per-repeat ratios
(`bench/_paired.py`). Also reported: each file's size, raw and
gzipped. Results: bench/results/inference[_quick].json.
"""

import argparse
import gzip
import os
import shutil
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench import _cifar_net
from bench._paired import (interleaved_samples, load_average, medians,
                           paired_ratio)
from bench._timing import write_results

OUTPUT = _cifar_net.LOGITS_NAME




def _masked_checkpoint(sparsity, ckpt_dir, seed):
  """Saves the masked net at `sparsity`; returns {var name: effective value}."""
  with tf.Graph().as_default():
    tf.set_random_seed(seed)
    tf.train.get_or_create_global_step()
    images = tf.placeholder(tf.float32, [None, 24, 24, 3], name='images')
    _cifar_net.inference(images, masked=True)
    target = tf.placeholder(tf.float32, [], name='target_sparsity')
    pruning = tf1prune.Pruning(sparsity=target)
    update = pruning.mask_update_op()
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update, {target: sparsity})
      values = {}
      for record in tf1prune.masked_weight_records():
        values[record.name] = sess.run(record.masked_weight)
      for var in tf.trainable_variables():
        values.setdefault(var.op.name, sess.run(var))
      mask_sparsity = [float(s) for s in
                       sess.run(tf1prune.get_weight_sparsity())]
      saver.save(sess, os.path.join(ckpt_dir, 'model.ckpt'))
  return values, mask_sparsity


def _frozen_unmasked(values, path):
  """Freezes the never-masked net holding `values`; writes it to `path`."""
  with tf.Graph().as_default() as graph:
    images = tf.placeholder(tf.float32, [None, 24, 24, 3], name='images')
    _cifar_net.inference(images, masked=False)
    with tf.Session() as sess:
      for var in tf.global_variables():
        var.load(values[var.op.name], sess)
      frozen = tf.graph_util.convert_variables_to_constants(
          sess, graph.as_graph_def(), [OUTPUT])
  with open(path, 'wb') as f:
    f.write(frozen.SerializeToString())


def _load(path):
  graph_def = tf.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  graph = tf.Graph()
  with graph.as_default():
    tf.import_graph_def(graph_def, name='')
  sess = tf.Session(graph=graph)
  return sess, graph.get_tensor_by_name('images:0'), graph.get_tensor_by_name(
      OUTPUT + ':0')


def _sizes(path):
  with open(path, 'rb') as f:
    data = f.read()
  return {'raw_bytes': len(data), 'gzip_bytes': len(gzip.compress(data, 9))}


def measure(sparsity, work_dir, batches, repeats, seed=0):
  """Returns the result row for one sparsity."""
  ckpt_dir = os.path.join(work_dir, 'ckpt_%02d' % int(round(sparsity * 100)))
  os.makedirs(ckpt_dir)
  values, mask_sparsity = _masked_checkpoint(sparsity, ckpt_dir, seed)
  stripped_pb = os.path.join(work_dir, 'stripped_%s.pb' % sparsity)
  unmasked_pb = os.path.join(work_dir, 'unmasked_%s.pb' % sparsity)
  tf1prune.strip_checkpoint(ckpt_dir, [OUTPUT], stripped_pb)
  _frozen_unmasked(values, unmasked_pb)
  sessions = {'stripped': _load(stripped_pb), 'unmasked': _load(unmasked_pb)}
  rng = np.random.RandomState(seed)
  row = {'sparsity': sparsity, 'mask_sparsities': mask_sparsity,
         'size': {'stripped': _sizes(stripped_pb),
                  'unmasked': _sizes(unmasked_pb)},
         'latency': {}}
  check = rng.randn(8, 24, 24, 3).astype(np.float32)
  outs = [s.run(o, {i: check}) for s, i, o in sessions.values()]
  row['max_abs_output_difference'] = float(np.max(np.abs(outs[0] - outs[1])))
  for batch, inner in batches:
    feed = rng.randn(batch, 24, 24, 3).astype(np.float32)
    def block(sess, images, logits, feed=feed):
      for _ in range(inner):
        sess.run(logits, {images: feed})
    samples = interleaved_samples(
        {name: (lambda args=args: block(*args))
         for name, args in sessions.items()}, repeats=repeats, warmup=2)
    row['latency']['batch_%d' % batch] = {
        'median_seconds': {k: v / inner for k, v in medians(samples).items()},
        'ratio_stripped_to_unmasked': paired_ratio(samples, 'stripped',
                                                   'unmasked')}
  for sess, _, _ in sessions.values():
    sess.close()
  return row


def _results_name(quick):
  """'inference', plus '_tf1' on TF 1.x, plus '_quick' for the smoke run."""
  name = 'inference' + ('_tf1' if tf.__version__.startswith('1.') else '')
  return name + ('_quick' if quick else '')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='one sparsity, few repeats (CI smoke run)')
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  if args.quick:
    sparsities, batches, repeats = [0.9], [(1, 20), (128, 1)], 3
  else:
    sparsities = [0.0, 0.5, 0.75, 0.9, 0.95]
    batches, repeats = [(1, 50), (128, 3)], 21
  load_before = load_average()
  work_dir = tempfile.mkdtemp(prefix='bench_inference_')
  rows = []
  try:
    for sparsity in sparsities:
      row = measure(sparsity, work_dir, batches, repeats)
      rows.append(row)
      print('sparsity %.2f  ' % sparsity + '  '.join(
          '%s ratio %.3f' % (k, v['ratio_stripped_to_unmasked'])
          for k, v in sorted(row['latency'].items())) +
            '  stripped %(raw_bytes)d B (gzip %(gzip_bytes)d B)' %
            row['size']['stripped'] +
            '  unmasked %(raw_bytes)d B (gzip %(gzip_bytes)d B)' %
            row['size']['unmasked'] +
            '  max |diff| %.2g' % row['max_abs_output_difference'], flush=True)
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)
  path = write_results(_results_name(args.quick),
                       {'rows': rows, 'output_node': OUTPUT,
                        'load_average_1min': [load_before, load_average()],
                        'target_latency_ratio': 1.0})
  print('wrote', path)


if __name__ == '__main__':
  main()
