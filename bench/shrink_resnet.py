"""Benchmark: tf_slim resnet_v1_50, coupled filter groups at 50%, shrunk.

    python -m bench.shrink_resnet --quick

Builds `tf_slim.nets.resnet_v1.resnet_v1_50` (1000 classes, batch norm; on TF
2.x with `tf1prune.graph.slim_compat.use_tf1prune_batch_norm()`) under
`tf1prune.pruning_scope()`, prunes every conv but the logits by
`coupled_filter` at 50% with random weights and batch-norm statistics
(`tests.support.pruned_nets.prune_and_save`, as the shrink's tests do), strips
the checkpoint and shrinks it. Reports the groups found, the shrink's
parameter and FLOPs ratios, the outputs' largest difference, and the latency
of the shrunk graph against the unshrunk one at batch 1 and 32, both timed in
this process, interleaved, one intra-op thread each (paired ratios: both
sides of one ratio saw about the same load).
Results: bench/results/shrink_resnet.json (`--quick`, a smoke run: the same
four blocks with one unit each, 64x64 input, batch 1 and 2, written to
shrink_resnet_quick.json).
"""

import argparse
import contextlib
import os
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench._paired import interleaved_samples, load_average, medians, paired_ratio
from bench._timing import one_thread_session, write_results
from tests.support.pruned_nets import prune_and_save


def resnet_v1_50_one_unit(images, num_classes):
  """Logits of tf_slim's resnet_v1 with resnet_v1_50's four blocks of one
  unit each (its layer shapes, projection shortcuts and strides, in a third
  of the layers), under resnet_v1_50's scope, in inference mode."""
  from tf_slim.nets import resnet_v1  # pylint: disable=g-import-not-at-top
  blocks = [resnet_v1.resnet_v1_block('block%d' % (i + 1), depth, 1, stride)
            for i, (depth, stride) in enumerate(
                [(64, 2), (128, 2), (256, 2), (512, 1)])]
  return resnet_v1.resnet_v1(images, blocks, num_classes, is_training=False,
                             scope='resnet_v1_50')[0]


def _build(size, quick):
  """resnet_v1_50, or (`quick`) `resnet_v1_50_one_unit`; (images, logits)."""
  import tf_slim as slim  # pylint: disable=g-import-not-at-top
  from tf_slim.nets import resnet_v1  # pylint: disable=g-import-not-at-top
  images = tf.placeholder(tf.float32, [None, size, size, 3], name='images')
  compat = (contextlib.nullcontext() if tf.__version__.startswith('1.')
            else tf1prune.graph.slim_compat.use_tf1prune_batch_norm())
  with compat, slim.arg_scope(resnet_v1.resnet_arg_scope()):
    with tf1prune.pruning_scope():
      if quick:
        logits = resnet_v1_50_one_unit(images, 1000)
      else:
        logits, _ = resnet_v1.resnet_v1_50(images, 1000, is_training=False)
  return images, logits


def _prune(size, quick, directory):
  """Checkpoints the pruned net; returns (output name, number of groups)."""
  net = prune_and_save(lambda: _build(size, quick), directory)
  return net.output, len(net.groups)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--repeats', type=int, default=None)
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  size, batches = (64, (1, 2)) if args.quick else (224, (1, 32))
  repeats = args.repeats or (3 if args.quick else 7)
  with tempfile.TemporaryDirectory(prefix='shrink_resnet_') as work:
    result = _measure(size, args.quick, batches, repeats, work)
  write_results('shrink_resnet_quick' if args.quick else 'shrink_resnet',
                result)


def _measure(size, quick, batches, repeats, work):
  """Prunes, strips, shrinks and times the net in `work`; the results."""
  output, num_groups = _prune(size, quick, work)
  stripped = os.path.join(work, 'stripped.pb')
  small = os.path.join(work, 'shrunk.pb')
  tf1prune.strip_checkpoint(work, [output], stripped)
  report = tf1prune.shrink_pb(stripped, [output], small)
  result = dict(net='resnet_v1 (1 unit per block)' if quick
                else 'resnet_v1_50',
                tf_version=tf.__version__, size=size, coupled_groups=num_groups,
                params_ratio=report.params_after / report.params_before,
                flops_ratio=report.flops_after / report.flops_before,
                stops=[str(s) for s in report.stops], latency={})
  big, little = one_thread_session(stripped), one_thread_session(small)
  rs = np.random.RandomState(1)
  for batch in batches:
    feed = {'images:0': rs.uniform(0, 1, [batch, size, size, 3]).astype(
        np.float32)}
    want = big.run(output + ':0', feed)
    got = little.run(output + ':0', feed)
    load = load_average()
    samples = interleaved_samples(
        {'unshrunk': lambda f=feed: big.run(output + ':0', f),
         'shrunk': lambda f=feed: little.run(output + ':0', f)}, repeats)
    result['latency'][str(batch)] = dict(
        ratio=paired_ratio(samples, 'shrunk', 'unshrunk'),
        medians_s=medians(samples), samples_s=samples, load_before=load,
        load_after=load_average(),
        max_diff=float(np.abs(got - want).max() / np.abs(want).max()))
    print('batch %d: shrunk/unshrunk latency %.3f (FLOPs %.3f), max diff %.1e'
          % (batch, result['latency'][str(batch)]['ratio'],
             result['flops_ratio'], result['latency'][str(batch)]['max_diff']))
  print('%s at %dx%d: %d coupled groups, params x%.3f, FLOPs x%.3f, '
        '%d stops' % (result['net'], size, size, num_groups,
                      result['params_ratio'], result['flops_ratio'],
                      len(report.stops)))
  return result


if __name__ == '__main__':
  main()
