"""Benchmark: training step time with pruning, over the same net without masks.

    python -m bench.train_overhead --quick

Builds the graphs in one process, the CIFAR-10 example network
(`cifar10_example/model.py` via `bench/_cifar_net.py`) on a constant
`[batch, 24, 24, 3]` input with constant labels (no input pipeline), softmax
cross entropy and plain SGD:

* `unmasked`: the layers from `tf.get_variable` + `tf.nn`, no masks;
* `masked`: `tf1prune.masked_conv2d` / `masked_fully_connected` and a
  `tf1prune.Pruning` (pruning_frequency=10, sparsity from 0.5 towards 0.9,
  reached only at step 10**6: the schedule is active on every measured step,
  the masks are about half zeros and a real mask update runs every 10th step).

The weights of both twins are drawn by TF's own initializers
(`tf.truncated_normal_initializer`, as in `cifar10_example/model.py`, and the
initializers of `bench/_resnet_net.py`), seeded alike: the values a real model
starts from, with the ties TF's generators produce, not NumPy draws.

`--net=resnet`: a resnet_v1-style net with batch norm instead
(`bench/_resnet_net.py`; built where a batch_norm layer is available for both
twins: TF 1.15 with tf_slim, or a tf1prune that has its own `batch_norm`).

Candidates, each graph in its own session, interleaved step by step: a
round runs one training step of every candidate, in a fresh random order
(`bench._paired.interleaved_samples(order='shuffle')`, seeded by the
process's number), and a repeat is `FREQUENCY` rounds (so one mask update
per repeat for the ways that run it):

* `masked_no_update`: a masked twin of its own, `sess.run(train_op)` alone
  (the cost of the masks only), its masks set once to the schedule's first
  sparsity;
* `unmasked`: `sess.run(train_op)` on the never-masked twin;
* `masked_same_run`: `sess.run([train_op, conditional_mask_update_op])`;
* `unmasked_again`: the same as `unmasked` on a second never-masked twin;
* `unmasked_monitored`: a never-masked twin in a `tf.train.MonitoredSession`;
* `masked_pruning_hook`: the masked net in a `MonitoredSession` with
  `tf1prune.PruningHook` (no extra run on steps where nothing is due);
* `monitored_again`: a second never-masked twin in a `MonitoredSession`.

Each way that runs the update is divided by the mean of its two twins in
the same repeat (`BASES`): `masked_pruning_hook` by the monitored ones (both
pay the MonitoredSession), the others by the plain ones.
`unmasked_again` over `unmasked` and `monitored_again` over
`unmasked_monitored` show what the bench reads when there is nothing to
find. Why the order is shuffled: what runs just before a graph changes its
step time by as much as the effect measured (a graph run right after itself
runs up to 2% faster, and one fixed order moves a way's ratio by about 1%).
Shuffled, what runs before a candidate changes from round to round, so no
way keeps one neighbour's effect. Why step by step: step times are
correlated over a few steps, so two twins interleaved step by step give
per-repeat ratios about 3 points wide (interquartile range), blocks of 10
steps one after the other 7-11 points (TF 2.21, batch 128).

`--ways masked_no_update,masked_same_run` times only those candidates and
their bases (and `unmasked`, always): fewer candidates a round, so more
repeats in the same time and a narrower interval (on TF 2.21, 150 repeats
of those four candidates give a 95% interval of the median about 0.02 wide,
36 repeats of the full bench about 0.04). Written apart (`_ways` in the file
name): the report reads the full bench only.

Reported: median step times, and as `ratio_to_unmasked` the median over
repeats of the per-repeat ratio, with the min and max over repeats, the
interquartile range, and a 95% interval for the median
(`bench._paired.median_interval`). `--processes N` runs the repeats in N
fresh processes, one after the other, and pools them (`run` says why).
Written to bench/results/train_overhead[_resnet][_tf1][_ways][_quick].json.
Target: <= 1.01 for the ways that run the update.
"""

import argparse
import json
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench import _cifar_net, _resnet_net
from bench._paired import (interleaved_samples, load_average, median_interval,
                           medians)
from bench._timing import write_results

FREQUENCY = 10


NETS = {'cifar': (_cifar_net.inference, 24), 'resnet': (_resnet_net.inference, 32)}


def _build(masked, batch, net='cifar', seed=0):
  """Returns (graph, train_op, conditional update op or None, pruning, init)."""
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(seed)
    step = tf.train.get_or_create_global_step()
    rng = np.random.RandomState(seed)
    inference, side = NETS[net]
    images = tf.constant(rng.randn(batch, side, side, 3).astype(np.float32))
    labels = tf.constant(rng.randint(0, 10, size=batch).astype(np.int64))
    logits = inference(images, masked=masked)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    # Batch norm's moving averages (none in the CIFAR-10 net).
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
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


def _monitored(graph, hooks):
  """A MonitoredSession on `graph` (it finalizes the graph) with `hooks`."""
  with graph.as_default():
    return tf.train.MonitoredSession(
        session_creator=tf.train.ChiefSessionCreator(), hooks=hooks)


# The base of each ratio: the mean of these candidates' times in the same
# repeat; every other candidate is divided by the two plain unmasked twins.
BASES = {'unmasked': ['unmasked'], 'unmasked_again': ['unmasked'],
         'masked_pruning_hook': ['unmasked_monitored', 'monitored_again'],
         'monitored_again': ['unmasked_monitored']}
DEFAULT_BASE = ['unmasked', 'unmasked_again']
CANDIDATES = ('masked_no_update', 'unmasked', 'masked_same_run',
              'unmasked_again', 'unmasked_monitored', 'masked_pruning_hook',
              'monitored_again')


def with_bases(ways):
  """The candidates to time for `ways`: them, their bases and `unmasked`, in
  the bench's order; all of them for None.

  Raises:
    ValueError: a name that is no candidate.
  """
  if ways is None:
    return list(CANDIDATES)
  unknown = [w for w in ways if w not in CANDIDATES]
  if unknown:
    raise ValueError('--ways %s: no candidate %s; the candidates are %s' % (
        ','.join(ways), ', '.join(unknown), ', '.join(CANDIDATES)))
  names = {'unmasked'}
  for way in ways:
    names.add(way)
    names.update(BASES.get(way, DEFAULT_BASE))
  return [c for c in CANDIDATES if c in names]


def bases_of(names):
  """{candidate: the candidates its ratio divides by}, of those timed."""
  return {k: [b for b in BASES.get(k, DEFAULT_BASE) if b in names]
          for k in names}


def _ratios(samples, name, base):
  """Per-repeat ratios of `name` to the mean of the `base` candidates."""
  return np.array(samples[name]) / np.mean([samples[b] for b in base], 0)


def measure(batch, repeats, net='cifar', order_seed=0, ways=None):
  """Builds the graphs, times `with_bases(ways)` in the shuffled order of
  `order_seed`; returns the raw samples and parts."""
  dense_graph, dense_train, _, _, dense_init = _build(False, batch, net)
  again_graph, again_train, _, _, again_init = _build(False, batch, net)
  masked_graph, masked_train, update, pruning, masked_init = _build(True, batch,
                                                                    net)
  # Its own graph: sharing the same-run way's global step, its steps would
  # make that way's update due every FREQUENCY / 2 of its steps.
  masks_graph, masks_train, _, masks_pruning, masks_init = _build(True, batch,
                                                                  net)
  with masks_graph.as_default():
    set_masks = masks_pruning.mask_update_op()
  with masked_graph.as_default():
    full_update = pruning.mask_update_op()
    noop = tf.no_op()
  dense_sess = tf.Session(graph=dense_graph)
  again_sess = tf.Session(graph=again_graph)
  masked_sess = tf.Session(graph=masked_graph)
  masks_sess = tf.Session(graph=masks_graph)
  dense_sess.run(dense_init)
  again_sess.run(again_init)
  masked_sess.run(masked_init)
  masks_sess.run(masks_init)
  masks_sess.run(set_masks)
  mon_dense_graph, mon_dense_train, _, _, _ = _build(False, batch, net)
  mon_again_graph, mon_again_train, _, _, _ = _build(False, batch, net)
  mon_graph, mon_train, _, mon_pruning, _ = _build(True, batch, net)
  with mon_graph.as_default():
    hook = tf1prune.PruningHook(mon_pruning)
    mon_step = tf.train.get_global_step()
    mon_last = mon_pruning.last_update_step
  mon_dense = _monitored(mon_dense_graph, [])
  mon_again = _monitored(mon_again_graph, [])
  mon_masked = _monitored(mon_graph, [hook])

  # One training step each, in a fresh random order every round.
  candidates = {
      'masked_no_update': lambda: masks_sess.run(masks_train),
      'unmasked': lambda: dense_sess.run(dense_train),
      'masked_same_run': lambda: masked_sess.run([masked_train, update]),
      'unmasked_again': lambda: again_sess.run(again_train),
      'unmasked_monitored': lambda: mon_dense.run(mon_dense_train),
      'masked_pruning_hook': lambda: mon_masked.run(mon_train),
      'monitored_again': lambda: mon_again.run(mon_again_train),
  }
  timed = with_bases(ways)
  candidates = {k: v for k, v in candidates.items() if k in timed}
  samples = interleaved_samples(candidates, repeats=repeats,
                                warmup=FREQUENCY, rounds=FREQUENCY,
                                order='shuffle', seed=order_seed)
  hook_final = {'global_step': int(mon_masked.run(mon_step)),
                'last_mask_update_step': int(mon_masked.run(mon_last))}
  mon_dense.close()
  mon_again.close()
  mon_masked.close()
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
  again_sess.close()
  masked_sess.close()
  masks_sess.close()
  return {'samples': samples, 'part_seconds': parts,
          'pruning_hook_final': hook_final,
          'masked_elements': int(sum(m.shape.num_elements() for m in masks)),
          'masked_graph_final': {
              'global_step': global_step, 'last_mask_update_step': last,
              'schedule_sparsity': target,
              'mask_sparsities': [float(s) for s in sparsities]}}


def _in_processes(batch, repeats, net, processes, ways=None):
  """`measure` in `processes` fresh processes, one after the other."""
  runs = []
  for i in range(processes):
    with tempfile.NamedTemporaryFile(suffix='.json') as out:
      subprocess.check_call([
          sys.executable, '-m', 'bench.train_overhead', '--batch', str(batch),
          '--repeats', str(repeats), '--net', net, '--worker_out', out.name,
          '--worker_order_seed', str(i)] +
                            (['--ways', ','.join(ways)] if ways else []))
      with open(out.name) as f:
        runs.append(json.load(f))
    print('process %d of %d done' % (i + 1, processes), flush=True)
  return runs


def run(batch, repeats, net='cifar', processes=1, ways=None):
  """Measures and returns the result dict: `repeats` repeats in each of
  `processes` processes (in this one when 1), pooled; `ways` as `measure`.

  Every process builds the graphs anew: where their buffers lie and how
  their ops share the threads can favour one graph for a whole process
  (two unmasked twins read 0.992, the 95% interval of the median
  0.982-1.002, in one process of 41 repeats), so more processes average
  that out where more repeats cannot.
  """
  if processes == 1:
    runs = [measure(batch, repeats, net, ways=ways)]
  else:
    runs = _in_processes(batch, repeats, net, processes, ways)
  samples = {k: sum((r['samples'][k] for r in runs), []) for k in
             runs[0]['samples']}
  per_step = {k: v / FREQUENCY for k, v in medians(samples).items()}
  bases = bases_of(samples)
  ratios = {k: _ratios(samples, k, bases[k]) for k in samples}
  spread, quartiles, intervals, per_process = {}, {}, {}, {}
  for k, r in ratios.items():
    spread[k] = [float(r.min()), float(r.max())]
    quartiles[k] = [float(np.percentile(r, 25)), float(np.percentile(r, 75))]
    intervals[k] = list(median_interval(r))
    per_process[k] = [float(np.median(_ratios(run['samples'], k, bases[k])))
                      for run in runs]
  parts = {k: float(np.median([r['part_seconds'][k] for r in runs]))
           for k in runs[0]['part_seconds']}
  last = runs[-1]
  return {
      'net': net, 'batch': batch, 'repeats': repeats * len(runs),
      'processes': len(runs), 'steps_per_repeat': FREQUENCY,
      'pruning_frequency': FREQUENCY,
      'median_step_seconds': per_step,
      'ratio_base': bases,
      'ratio_to_unmasked': {k: float(np.median(r))
                            for k, r in ratios.items()},
      'ratio_spread': spread,
      'ratio_quartiles': quartiles,
      'ratio_median_95': intervals,
      'ratio_per_process': per_process,
      'interleaving': 'step by step, shuffled',
      'weights': 'TF initializers (truncated normal), seed 0',
      'ratio_of_medians': {k: v / np.mean([per_step[b] for b in bases[k]])
                           for k, v in per_step.items()},
      'pruning_hook_final': last['pruning_hook_final'],
      'part_seconds': parts,
      'masked_elements': last['masked_elements'],
      'mask_update_fraction_of_unmasked_step': (parts['mask_update_op'] /
                                                per_step['unmasked']),
      'masked_graph_final': last['masked_graph_final'],
      'target': 1.01,
  }


def _results_name(quick, net='cifar', ways=None):
  """'train_overhead', '_resnet' for that net, '_tf1' on TF 1.x, '_ways' for
  a subset of the candidates, '_quick'."""
  name = 'train_overhead' + ('_resnet' if net == 'resnet' else '')
  name += '_tf1' if tf.__version__.startswith('1.') else ''
  name += '_ways' if ways else ''
  return name + ('_quick' if quick else '')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='few steps (CI smoke run)')
  parser.add_argument('--batch', type=int, default=128,
                      help='batch size (--quick caps it at 32)')
  parser.add_argument('--net', choices=sorted(NETS), default='cifar',
                      help='the CIFAR-10 example CNN, or a resnet_v1-style '
                      'net with batch norm')
  parser.add_argument('--repeats', type=int, default=21,
                      help='repeats per process (%d steps of each candidate, '
                      'interleaved step by step)' % FREQUENCY)
  parser.add_argument('--processes', type=int, default=1,
                      help='run the repeats in this many fresh processes, '
                      'one after the other, and pool them (each builds the '
                      'graphs anew)')
  parser.add_argument('--ways', type=lambda text: text.split(','),
                      help='comma-separated candidates to time, with their '
                      'bases (default: all of %s)' % ', '.join(CANDIDATES))
  parser.add_argument('--worker_out', help=argparse.SUPPRESS)
  parser.add_argument('--worker_order_seed', type=int, default=0,
                      help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  try:
    with_bases(args.ways)
  except ValueError as e:
    parser.error(str(e))
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  if args.worker_out:
    with open(args.worker_out, 'w') as f:
      json.dump(measure(args.batch, args.repeats, args.net,
                        args.worker_order_seed, args.ways), f)
    return 0
  if args.net == 'resnet' and not _resnet_net.available():
    print('skipped: no batch_norm layer for both twins on TF %s (tf_slim needs '
          'Keras 2, tf1prune.batch_norm is not there)' % tf.__version__)
    return 0
  load_before = load_average()
  if args.quick:
    result = run(min(args.batch, 32), repeats=3, net=args.net, ways=args.ways)
  else:
    result = run(args.batch, repeats=args.repeats, net=args.net,
                 processes=args.processes, ways=args.ways)
  result['load_average_1min'] = [load_before, load_average()]
  print('median step (s): ' + '  '.join(
      '%s %.4f' % kv for kv in sorted(result['median_step_seconds'].items())))
  print('ratio to unmasked twin [min-max] (25-75%) {95% for the median}: ' +
        '  '.join('%s %.3f [%.2f-%.2f] (%.3f-%.3f) {%.3f-%.3f}' % (
            (k, v) + tuple(result['ratio_spread'][k]) +
            tuple(result['ratio_quartiles'][k]) +
            tuple(result['ratio_median_95'][k]))
                  for k, v in sorted(result['ratio_to_unmasked'].items())))
  if result['processes'] > 1:
    print('per process: ' + '  '.join(
        '%s %s' % (k, ' '.join('%.3f' % x for x in v))
        for k, v in sorted(result['ratio_per_process'].items())))
  print('load average', result['load_average_1min'],
        'hook run:', result['pruning_hook_final'])
  print('parts (s): ' + '  '.join(
      '%s %.5f' % kv for kv in sorted(result['part_seconds'].items())))
  print('masked graph after the run:', result['masked_graph_final'])
  path = write_results(_results_name(args.quick, args.net, args.ways), result)
  print('wrote', path)


if __name__ == '__main__':
  main()
