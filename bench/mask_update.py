"""Benchmark: cost of one mask update, as a multiple of one memory pass.

    python -m bench.mask_update --quick

For each weight size and each threading (one intra-op thread, and TF's
default), times inside one process, alternating within each repeat, one
`Pruning.mask_update_op()` on a single weight of that size, and the
alternatives that also write the mask: contrib's exact method (`tf.nn.top_k`
over all weights) and a full `tf.sort` (up to 1e6 elements: at 1e7 they take
seconds), tf1prune's own `threshold_method=histogram` estimate, and a plain
two-level radix select (`_radix_gather_cumsum_mask`); each divided by
`reduce_sum(abs(w))`, one memory-bound pass over the same weight. The ratio
is the median of the per-repeat ratios (`bench/_paired.py`), with their
minimum and maximum as the spread.

Idle steps: the per-run cost of `conditional_mask_update_op()` on a step where
nothing is due, and of what `PruningHook` adds to an idle step (one fetch of
the global step beside the step's own fetches), each next to a run of
`tf.no_op()` alone.

Value distributions: at one size (1e7; `--quick`: 1e5), the exact update and
the plain radix select, over the memory pass, for weights of shape
[size / 1000, 1000] drawn by NumPy (`randn`), by TF's
`random_normal_initializer` and `glorot_uniform_initializer`, fp16-valued and
bfloat16-valued float32, quantized to 1/16, all equal, and NumPy randn with
1% NaN and 1% +-Inf: `dist_rows` in the JSON. Then all eight weights in one
session, their updates alternating within each repeat (`dist_paired`):
separate runs drift apart by 15-30% on these machines, so the spread across
distributions is judged on the paired run.

Targets: <= 3x at 1e7 with one thread and with the default, <= 2x at 5e7;
every distribution <= 4x at 1e7 on one thread and within 20% of each other.
"""

import argparse

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench._paired import interleaved_samples, load_average, medians
from bench._timing import write_results

SPARSITY = 0.9
TARGETS = {10**7: 3.0, 5 * 10**7: 2.0}
DIST_TARGET = 4.0      # at 1e7, one thread, every distribution
DIST_SPREAD = 1.2      # slowest / fastest distribution
DISTRIBUTIONS = ('numpy_randn', 'tf_random_normal', 'tf_glorot_uniform',
                 'fp16_valued', 'bf16_valued', 'quantized_1_16', 'all_equal',
                 'nan_inf')


def _contrib_mask(weight, mask, sort):
  """contrib's exact method: sort every magnitude, take the k-th, compare."""
  flat = tf.reshape(tf.abs(weight), [-1])
  n = flat.get_shape().num_elements()
  k = int(round(n * (1 - SPARSITY)))
  if sort:
    values = tf.sort(flat, direction='DESCENDING')
  else:
    values = tf.nn.top_k(flat, k=n, sorted=True).values
  threshold = values[k - 1]
  return tf.assign(mask, tf.cast(tf.abs(weight) >= threshold, tf.float32)).op


def _radix_gather_cumsum_mask(weight, mask):
  """A plain two-level radix select, timed beside tf1prune's: the boundary
  bin gathered with `boolean_mask`, ties placed by a cumulative sum over
  every entry when only some are kept, and a non-finite check of its own
  pass (without the print). Its cost grows with the ties at the threshold:
  what tf1prune's select is built to avoid (`tf1prune/masks/_radix.py`)."""
  bits = tf.bitcast(tf.reshape(tf.abs(weight), [-1]), tf.int32)
  n = bits.get_shape().num_elements()
  rank = tf.constant(n - int(round(n * SPARSITY)))
  prefix, candidates, shift = tf.constant(0), bits, 31
  for level, width in enumerate((15, 16)):
    shift -= width
    digit = tf.bitwise.right_shift(candidates, shift)
    if level:
      digit = tf.bitwise.bitwise_and(digit, (1 << width) - 1)
    counts = tf.raw_ops.Bincount(arr=digit, size=1 << width,
                                 weights=tf.zeros([0], tf.int32))
    at_least = tf.cumsum(counts, reverse=True)
    chosen = tf.reduce_sum(tf.cast(at_least >= rank, tf.int32)) - 1
    rank -= at_least[chosen] - counts[chosen]
    prefix = tf.bitwise.bitwise_or(prefix, tf.bitwise.left_shift(chosen, shift))
    if level == 0:
      candidates = tf.boolean_mask(candidates, tf.equal(digit, chosen))

  def in_order():
    ties = tf.equal(bits, prefix)
    first = tf.cumsum(tf.cast(ties, tf.int32)) <= rank
    return tf.logical_or(bits > prefix, tf.logical_and(ties, first))

  flat = tf.cond(tf.equal(counts[chosen], rank), lambda: bits >= prefix,
                 in_order)
  new = tf.reshape(tf.cast(flat, tf.float32), tf.shape(weight))
  return tf.group(tf.assign(mask, new), _non_finite_check(weight))


def _non_finite_check(weight):
  """What `Pruning` runs beside every update: a sum, and when it is not
  finite a count and a message (here to a string, not printed)."""
  count = lambda: tf.strings.as_string(tf.reduce_sum(tf.cast(
      tf.logical_not(tf.is_finite(weight)), tf.int32)))
  return tf.cond(tf.is_finite(tf.reduce_sum(weight)), lambda: tf.constant('0'),
                 count)


def _session(threads):
  """A session with `threads` intra- and inter-op threads (None: TF's)."""
  config = tf.ConfigProto()
  if threads:
    config.intra_op_parallelism_threads = threads
    config.inter_op_parallelism_threads = threads
  return tf.Session(config=config)


def _ratios(samples, base):
  """name -> (median, min, max) of the per-repeat ratio to `base`."""
  out = {}
  for name, values in samples.items():
    r = np.array(values) / np.array(samples[base])
    out[name] = (float(np.median(r)), float(r.min()), float(r.max()))
  return out


def _measure(size, repeats, alternatives, threads):
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
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
    ops['radix_gather_cumsum'] = _radix_gather_cumsum_mask(weight, mask)
    if alternatives:
      ops['contrib_top_k'] = _contrib_mask(weight, mask, sort=False)
      ops['full_sort'] = _contrib_mask(weight, mask, sort=True)
    noop = tf.no_op()
    conditional = exact.conditional_mask_update_op()   # step 0: not due
    with _session(threads) as sess:
      sess.run(tf.global_variables_initializer())
      samples = interleaved_samples(
          {name: (lambda op=op: sess.run(op)) for name, op in ops.items()},
          repeats=repeats, warmup=1)

      def inner(fn, n=200):
        def run():
          for _ in range(n):
            fn()
        return run

      idle = interleaved_samples(
          {'no_op': inner(lambda: sess.run(noop)),
           'conditional_idle': inner(lambda: sess.run(conditional)),
           'hook_idle_fetch': inner(lambda: sess.run([noop, exact.global_step]))},
          repeats=repeats, warmup=1)
      sparsity = float(sess.run(tf.nn.zero_fraction(mask)))
  ratios = _ratios(samples, 'memory_pass')
  idle_ratios = _ratios(idle, 'no_op')
  return {'size': size, 'threads': threads or 'default', 'repeats': repeats,
          'seconds': medians(samples),
          'ratio_to_memory_pass': {k: v[0] for k, v in ratios.items()},
          'ratio_spread': {k: v[1:] for k, v in ratios.items()},
          'idle_conditional_vs_no_op': idle_ratios['conditional_idle'][0],
          'idle_hook_fetch_vs_no_op': idle_ratios['hook_idle_fetch'][0],
          'idle_spread': {k: v[1:] for k, v in idle_ratios.items()},
          'idle_seconds': {k: v / 200 for k, v in medians(idle).items()},
          'final_mask_sparsity': sparsity,
          'target': TARGETS.get(size)}


def _weights(kind, size):
  """A [size // 1000, 1000] float32 variable holding `kind` values."""
  shape = [size // 1000, 1000]
  initializers = {'tf_random_normal': tf.random_normal_initializer(),
                  'tf_glorot_uniform': tf.glorot_uniform_initializer()}
  if kind in initializers:
    return tf.get_variable('w', shape, initializer=initializers[kind])
  rs = np.random.RandomState(0)
  w = rs.randn(*shape).astype(np.float32)
  if kind == 'fp16_valued':
    w = w.astype(np.float16).astype(np.float32)
  elif kind == 'bf16_valued':
    w = (w.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
  elif kind == 'quantized_1_16':
    w = np.round(w * 16) / 16
  elif kind == 'all_equal':
    w = np.full(shape, 0.5, np.float32)
  elif kind == 'nan_inf':
    special = rs.rand(*shape)
    w[special < 0.01] = np.nan
    w[(special >= 0.01) & (special < 0.015)] = np.inf
    w[(special >= 0.015) & (special < 0.02)] = -np.inf
  elif kind != 'numpy_randn':
    raise ValueError('unknown distribution %r, expected one of %s' %
                     (kind, DISTRIBUTIONS))
  return tf.get_variable('w', initializer=w.astype(np.float32))


def _measure_distribution(kind, size, repeats, threads):
  """The exact update and the plain radix select over the memory pass."""
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    tf.train.get_or_create_global_step()
    weight = _weights(kind, size)
    tf1prune.apply_mask(weight, 'layer')
    mask = tf1prune.get_masks()[0]
    exact = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse('name=exact'),
                             sparsity=tf.constant(SPARSITY))
    ops = {'memory_pass': tf.reduce_sum(tf.abs(weight)).op,
           'tf1prune_exact': exact.mask_update_op(),
           'radix_gather_cumsum': _radix_gather_cumsum_mask(weight, mask)}
    with _session(threads) as sess:
      sess.run(tf.global_variables_initializer())
      w = sess.run(weight)
      samples = interleaved_samples(
          {name: (lambda op=op: sess.run(op)) for name, op in ops.items()},
          repeats=repeats, warmup=1)
      kept = int(sess.run(tf.reduce_sum(mask)))
  scores = np.abs(w[np.isfinite(w)])
  ratios = _ratios(samples, 'memory_pass')
  fastest = {k: float(np.min(v)) for k, v in samples.items()}
  return {'distribution': kind, 'size': size, 'threads': threads or 'default',
          'repeats': repeats, 'seconds': medians(samples),
          'fastest_seconds': fastest,
          'ratio_to_memory_pass': {k: v[0] for k, v in ratios.items()},
          'ratio_spread': {k: v[1:] for k, v in ratios.items()},
          # Fastest repeat over fastest repeat: what a loaded machine's
          # interruptions disturb least.
          'ratio_of_minimums': {k: v / fastest['memory_pass']
                                for k, v in fastest.items()},
          'distinct_values': int(np.unique(w).size),
          'kept': kept, 'finite_max': float(scores.max()) if scores.size
          else None}


def _measure_distributions_paired(size, repeats, threads):
  """Every distribution's exact update in one session, alternating.

  The separate runs of `_measure_distribution` drift apart by 15-30% from
  run to run on these machines (the allocator's state, page faults); here
  the distributions share every repeat, so their spread is the update's own.
  """
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    tf.train.get_or_create_global_step()
    weights = {}
    for kind in DISTRIBUTIONS:
      with tf.variable_scope(kind):
        weights[kind] = _weights(kind, size)
      tf1prune.apply_mask(weights[kind], kind)
    ops = {'memory_pass': tf.reduce_sum(tf.abs(weights['numpy_randn'])).op}
    for kind in DISTRIBUTIONS:
      others = ','.join(k for k in DISTRIBUTIONS if k != kind)
      ops[kind] = tf1prune.Pruning(
          tf1prune.get_pruning_hparams().parse(
              'name=exact_%s,do_not_prune=[%s]' % (kind, others)),
          sparsity=tf.constant(SPARSITY)).mask_update_op()
    with _session(threads) as sess:
      sess.run(tf.global_variables_initializer())
      samples = interleaved_samples(
          {name: (lambda op=op: sess.run(op)) for name, op in ops.items()},
          repeats=repeats, warmup=1)
  ratios = _ratios(samples, 'memory_pass')
  seconds = medians(samples)
  slowest = max(DISTRIBUTIONS, key=seconds.get)
  fastest = min(DISTRIBUTIONS, key=seconds.get)
  return {'size': size, 'threads': threads or 'default', 'repeats': repeats,
          'seconds': seconds,
          'quartile_seconds': {k: [float(np.percentile(v, 25)),
                                   float(np.percentile(v, 75))]
                               for k, v in samples.items()},
          'ratio_to_memory_pass': {k: v[0] for k, v in ratios.items()},
          'ratio_spread': {k: v[1:] for k, v in ratios.items()},
          'slowest': slowest, 'fastest': fastest,
          'slowest_over_fastest': seconds[slowest] / seconds[fastest]}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='small sizes, few repeats (CI smoke run)')
  parser.add_argument('--sizes', default='',
                      help='comma-separated sizes to run (default: the plan)')
  parser.add_argument('--dist_only', action='store_true',
                      help='only the value distributions, written to '
                      'mask_update_dist[_tf1].json')
  parser.add_argument('--dist_repeats', type=int, default=7,
                      help='repeats of each distribution run')
  parser.add_argument('--paired_repeats', type=int, default=0,
                      help='repeats of the paired run (0: --dist_repeats)')
  parser.add_argument('--dist_size', type=float, default=1e7,
                      help='size of the value-distribution runs (0: none; '
                      '--quick: 1e5)')
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  if args.quick:
    plan = [(10**4, 3, True), (10**5, 3, True)]
  else:
    plan = [(10**5, 9, True), (10**6, 9, True), (10**7, 9, False),
            (5 * 10**7, 5, False)]
  if args.dist_only:
    plan = []
  if args.sizes and not args.quick:
    wanted = [int(float(s)) for s in args.sizes.split(',')]
    plan = [p for p in plan if p[0] in wanted]
  load_before = load_average()
  rows = []
  for size, repeats, alternatives in plan:
    for threads in (1, None):
      row = _measure(size, repeats, alternatives, threads)
      row['load_average_1min'] = load_average()
      rows.append(row)
      print('n=%-9d threads=%-7s ' % (size, row['threads']) + '  '.join(
          '%s %.2fx [%.2f-%.2f]' % ((k, v) + tuple(row['ratio_spread'][k]))
          for k, v in sorted(row['ratio_to_memory_pass'].items())
          if k != 'memory_pass') +
            '  idle conditional/no_op %.2f, hook fetch/no_op %.2f  load %.1f' % (
                row['idle_conditional_vs_no_op'],
                row['idle_hook_fetch_vs_no_op'], row['load_average_1min']),
            flush=True)
  dist_rows = []
  dist_size = 10**5 if args.quick else int(args.dist_size)
  for threads in ((1, None) if dist_size else ()):
    for kind in DISTRIBUTIONS:
      row = _measure_distribution(kind, dist_size, 3 if args.quick else
                                  args.dist_repeats, threads)
      row['load_average_1min'] = load_average()
      dist_rows.append(row)
      print('n=%-9d threads=%-7s %-18s exact %.2fx [%.2f-%.2f]  plain radix '
            '%.2fx  load %.1f' % (
                dist_size, row['threads'], kind,
                row['ratio_to_memory_pass']['tf1prune_exact'],
                row['ratio_spread']['tf1prune_exact'][0],
                row['ratio_spread']['tf1prune_exact'][1],
                row['ratio_to_memory_pass']['radix_gather_cumsum'],
                row['load_average_1min']), flush=True)
  paired = []
  for threads in ((1, None) if dist_size else ()):
    row = _measure_distributions_paired(
        dist_size, 3 if args.quick else
        args.paired_repeats or args.dist_repeats, threads)
    row['load_average_1min'] = load_average()
    paired.append(row)
    print('n=%-9d threads=%-7s paired: %s  slowest/fastest %.2f (%s / %s)  '
          'load %.1f' % (dist_size, row['threads'], '  '.join(
              '%s %.1f ms %.2fx' % (k, row['seconds'][k] * 1e3,
                                    row['ratio_to_memory_pass'][k])
              for k in DISTRIBUTIONS), row['slowest_over_fastest'],
                         row['slowest'], row['fastest'],
                         row['load_average_1min']), flush=True)
  name = 'mask_update' + ('_dist' if args.dist_only else '') + (
      '_tf1' if tf.__version__.startswith('1.') else '')
  path = write_results(name + ('_quick' if args.quick else ''),
                       {'sparsity': SPARSITY, 'rows': rows,
                        'dist_rows': dist_rows, 'dist_paired': paired,
                        'dist_targets': {'ratio': DIST_TARGET,
                                         'spread': DIST_SPREAD},
                        'load_average_1min': [load_before, load_average()]})
  print('wrote', path)


if __name__ == '__main__':
  main()
