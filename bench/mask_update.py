"""Benchmark: cost of one mask update, as a multiple of one memory pass.

    python -m bench.mask_update --quick

For each weight size, times inside one process (alternating, median of
repeats) one `Pruning.mask_update_op()` on a single weight of that size, and
the alternatives that also write the mask: the old contrib method (`tf.nn.top_k`
over all weights), a full `tf.sort`, and tf1prune's own `threshold_method=
histogram` estimate; each divided by `reduce_sum(abs(w))`, one memory-bound pass
over the same weight. Also the per-step cost of `conditional_mask_update_op()`
on a step where it does nothing, next to a `tf.no_op()` run.
"""

import argparse

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench._timing import interleaved_medians, write_results

SPARSITY = 0.9


def _old_contrib_mask(weight, mask, sort):
  """The old exact method: sort every magnitude, take the k-th, compare."""
  flat = tf.reshape(tf.abs(weight), [-1])
  n = flat.get_shape().num_elements()
  k = int(round(n * (1 - SPARSITY)))
  if sort:
    values = tf.sort(flat, direction='DESCENDING')
  else:
    values = tf.nn.top_k(flat, k=n, sorted=True).values
  threshold = values[k - 1]
  return tf.assign(mask, tf.cast(tf.abs(weight) >= threshold, tf.float32)).op


def _measure(size, repeats, alternatives):
  with tf.Graph().as_default():
    step = tf.train.get_or_create_global_step()
    init = np.random.RandomState(0).randn(size).astype(np.float32)
    weight = tf.get_variable('w', initializer=init)
    tf1prune.apply_mask(weight, 'layer')
    mask = tf1prune.get_masks()[0]
    exact = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse('name=exact'),
                             sparsity=tf.constant(SPARSITY))
    histogram = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
        'name=hist,threshold_method=histogram'), sparsity=tf.constant(SPARSITY))
    ops = {'memory_pass': tf.reduce_sum(tf.abs(weight)).op,
           'tf1prune_exact': exact.mask_update_op(),
           'tf1prune_histogram_256': histogram.mask_update_op()}
    if alternatives:
      ops['old_top_k'] = _old_contrib_mask(weight, mask, sort=False)
      ops['full_sort'] = _old_contrib_mask(weight, mask, sort=True)
    noop = tf.no_op()
    conditional = exact.conditional_mask_update_op()   # step 0: not due
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      times = interleaved_medians(
          {name: (lambda op=op: sess.run(op)) for name, op in ops.items()},
          repeats=repeats)
      step_times = interleaved_medians(
          {'no_op': lambda: sess.run(noop),
           'conditional_idle': lambda: sess.run(conditional)},
          repeats=repeats, inner=200)
      sparsity = float(sess.run(tf.nn.zero_fraction(mask)))
  base = times['memory_pass']
  return {'size': size, 'seconds': times,
          'ratio_to_memory_pass': {k: v / base for k, v in times.items()},
          'idle_conditional_vs_no_op': step_times['conditional_idle'] /
                                       step_times['no_op'],
          'idle_seconds': step_times, 'final_mask_sparsity': sparsity}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='small sizes, few repeats (CI smoke run)')
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  if args.quick:
    plan = [(10**4, 3, True), (10**5, 3, True)]
  else:
    plan = [(10**5, 9, True), (10**6, 9, True), (10**7, 7, True),
            (5 * 10**7, 5, False)]
  rows = []
  for size, repeats, alternatives in plan:
    row = _measure(size, repeats, alternatives)
    rows.append(row)
    print('n=%-9d ' % size + '  '.join(
        '%s %.1fx' % (k, v) for k, v in sorted(row['ratio_to_memory_pass'].items())
        if k != 'memory_pass') +
          '  idle conditional / no_op %.2f' % row['idle_conditional_vs_no_op'],
          flush=True)
  path = write_results('mask_update_quick' if args.quick else 'mask_update',
                       {'sparsity': SPARSITY, 'rows': rows})
  print('wrote', path)


if __name__ == '__main__':
  main()
