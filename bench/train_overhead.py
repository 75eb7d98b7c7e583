"""Benchmark: training step time with pruning, over the same net without masks.

    python -m bench.train_overhead --quick

Builds two graphs in one process, the CIFAR-10 example network
(`cifar10_example/model.py` via `bench/_cifar_net.py`) on a constant
`[batch, 24, 24, 3]` input with constant labels (no input pipeline), softmax
cross entropy and plain SGD:

* `unmasked`: the layers from `tf.get_variable` + `tf.nn`, no masks;
* `masked`: `tf1prune.masked_conv2d` / `masked_fully_connected` and a
  `tf1prune.Pruning` (pruning_frequency=10, sparsity from 0.5 towards 0.9,
  reached only at step 10**6: the schedule is active on every measured step,
  the masks are about half zeros and a real mask update runs every 10th step).

The masked graph is run three ways, the unmasked one once, alternating inside
each repeat (`inner` steps per candidate per repeat, median over repeats):

* `masked_same_run`: `sess.run([train_op, conditional_mask_update_op])`;
* `masked_hook`: `sess.run(train_op)` then `sess.run(conditional_mask_update_op)`,
  what `tf1prune.PruningHook` does;
* `masked_no_update`: `sess.run(train_op)` alone (the cost of the masks only).

Reported: median step times, and as `ratio_to_unmasked` the median over
repeats of the per-repeat ratio (each repeat runs every candidate back to
back, so both sides of a ratio saw the same load; `bench/_paired.py`); the
ratio of the medians is kept too. Written to
bench/results/train_overhead[_tf1][_quick].json.
Target: <= 1.03 for the ways that run the update.
"""

import argparse

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench import _cifar_net
from bench._paired import (interleaved_samples, load_average, medians,
                           paired_ratio)
from bench._timing import write_results

FREQUENCY = 10


def _build(masked, batch, seed=0):
  """Returns (graph, train_op, conditional update op or None, pruning)."""
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(seed)
    step = tf.train.get_or_create_global_step()
    rng = np.random.RandomState(seed)
    images = tf.constant(rng.randn(batch, 24, 24, 3).astype(np.float32))
    labels = tf.constant(rng.randint(0, 10, size=batch).astype(np.int64))
    logits = _cifar_net.inference(images, masked=masked)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=step)
    update, pruning = None, None
    if masked:
      spec = tf1prune.get_pruning_hparams().parse(
          'pruning_frequency=%d,initial_sparsity=0.5,target_sparsity=0.9,'
          'sparsity_function_end_step=1000000' % FREQUENCY)
      pruning = tf1prune.Pruning(spec)
      update = pruning.conditional_mask_update_op()
    init = tf.global_variables_initializer()
  return graph, train_op, update, pruning, init


def run(batch, repeats, inner):
  """Measures and returns the result dict."""
  dense_graph, dense_train, _, _, dense_init = _build(False, batch)
  masked_graph, masked_train, update, pruning, masked_init = _build(True, batch)
  dense_sess = tf.Session(graph=dense_graph)
  masked_sess = tf.Session(graph=masked_graph)
  dense_sess.run(dense_init)
  masked_sess.run(masked_init)

  def steps(fn):
    def go():
      for _ in range(inner):
        fn()
    return go

  candidates = {
      'unmasked': steps(lambda: dense_sess.run(dense_train)),
      'masked_same_run': steps(lambda: masked_sess.run([masked_train, update])),
      'masked_hook': steps(lambda: (masked_sess.run(masked_train),
                                    masked_sess.run(update))),
      'masked_no_update': steps(lambda: masked_sess.run(masked_train)),
  }
  samples = interleaved_samples(candidates, repeats=repeats, warmup=1)
  with masked_graph.as_default():
    full_update = pruning.mask_update_op()
    noop = tf.no_op()
  # The parts of the overhead: one unconditional mask update of all five
  # weights, and the conditional op on a step where nothing is due (just
  # after the update, the step not moving), next to an empty session.run.
  masked_sess.run(update)
  parts = medians(interleaved_samples(
      {'mask_update_op': lambda: masked_sess.run(full_update),
       'conditional_idle': lambda: masked_sess.run(update),
       'no_op': lambda: masked_sess.run(noop)},
      repeats=max(5, repeats // 2), warmup=2))
  with masked_graph.as_default():
    masks = tf1prune.get_masks()
    sparsities = masked_sess.run(tf1prune.get_weight_sparsity())
    target = float(masked_sess.run(pruning.sparsity))
    last = int(masked_sess.run(pruning.last_update_step))
    global_step = int(masked_sess.run(tf.train.get_global_step()))
  dense_sess.close()
  masked_sess.close()
  per_step = {k: v / inner for k, v in medians(samples).items()}
  base = per_step['unmasked']
  return {
      'batch': batch, 'repeats': repeats, 'steps_per_repeat': inner,
      'pruning_frequency': FREQUENCY,
      'median_step_seconds': per_step,
      'ratio_to_unmasked': {k: paired_ratio(samples, k, 'unmasked')
                            for k in samples},
      'ratio_of_medians': {k: v / base for k, v in per_step.items()},
      'part_seconds': parts,
      'masked_elements': int(sum(m.shape.num_elements() for m in masks)),
      'mask_update_fraction_of_unmasked_step': parts['mask_update_op'] / base,
      'masked_graph_final': {
          'global_step': global_step, 'last_mask_update_step': last,
          'schedule_sparsity': target,
          'mask_sparsities': [float(s) for s in sparsities]},
      'target': 1.03,
  }


def _results_name(quick):
  """'train_overhead', plus '_tf1' on TF 1.x, plus '_quick' for the smoke run."""
  name = 'train_overhead' + ('_tf1' if tf.__version__.startswith('1.') else '')
  return name + ('_quick' if quick else '')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='few steps (CI smoke run)')
  parser.add_argument('--batch', type=int, default=128,
                      help='batch size (--quick caps it at 32)')
  parser.add_argument('--repeats', type=int, default=31,
                      help='repeats of the full run (10 steps per candidate '
                      'each)')
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  load_before = load_average()
  if args.quick:
    result = run(min(args.batch, 32), repeats=3, inner=10)
  else:
    result = run(args.batch, repeats=args.repeats, inner=10)
  result['load_average_1min'] = [load_before, load_average()]
  print('median step (s): ' + '  '.join(
      '%s %.4f' % kv for kv in sorted(result['median_step_seconds'].items())))
  print('ratio to unmasked: ' + '  '.join(
      '%s %.3f' % kv for kv in sorted(result['ratio_to_unmasked'].items())))
  print('parts (s): ' + '  '.join(
      '%s %.5f' % kv for kv in sorted(result['part_seconds'].items())))
  print('masked graph after the run:', result['masked_graph_final'])
  path = write_results(_results_name(args.quick), result)
  print('wrote', path)


if __name__ == '__main__':
  main()
