"""The prose of docs/performance.md: its summary and its design section.

`summary(results)` writes the page's first section from the benchmark
results (`{name: the JSON of bench/results/NAME.json, or None}`), each
statement only when the files it rests on are there. `DESIGN` is the last
section, the design of the exact mask update and its limits, written by
hand: its figures come from traced runs of the update, which no benchmark
file records.
"""

# The files `summary` reads.
NAMES = ('train_overhead', 'train_overhead_tf1', 'train_overhead_keras',
         'mask_update', 'mask_update_tf1', 'mask_update_dist',
         'mask_update_dist_tf1', 'inference', 'quality_digits',
         'budget_compare')

_WAYS = (('masked_pruning_hook', '`PruningHook`'),
         ('masked_same_run', 'the update op in the step\'s own `session.run`'))


def _stack(data):
  return 'TF ' + data['info']['tensorflow']


def _sci(n):
  """10000000 -> '1e7'."""
  mantissa, exponent = ('%.0e' % n).split('e')
  return '%se%d' % (mantissa, int(exponent))


def _range(values, fmt='%.1f'):
  low, high = min(values), max(values)
  if fmt % low == fmt % high:
    return fmt % low
  return (fmt + '-' + fmt) % (low, high)


def _training(results):
  runs = [d for d in (results.get('train_overhead'),
                      results.get('train_overhead_tf1')) if d]
  runs = [d for d in runs
          if all(k in d['ratio_to_unmasked'] for k, _ in _WAYS)]
  if not runs:
    return ''
  text = ['**Training costs about 1%% more a step.** A pruned step of the '
          'CIFAR-10 CNN (section 1) takes longer than the unpruned twin\'s '
          'by %s, whether `PruningHook` or the step\'s own `session.run` '
          'runs the update' % ' and '.join(
              '%s on %s' % (_range([100 * (d['ratio_to_unmasked'][k] - 1)
                                    for k, _ in _WAYS]) + '%', _stack(d))
              for d in runs)]
  keras = results.get('train_overhead_keras')
  if keras:
    text.append('; with tfmot\'s `prune_low_magnitude` a step takes %.1f%% '
                'longer than its own twin\'s' % (
                    100 * (keras['ratio_pruned_to_unpruned'] - 1)))
  text.append('. What the overhead is made of, measured by parts: the masks '
              '(`mask * w` forward and the gradient\'s multiply by the mask '
              'backward, the contract of a masked weight; the masked net '
              'without updates reads %s)' % ' and '.join(
                  '%.3f' % d['ratio_to_unmasked']['masked_no_update']
                  for d in runs
                  if 'masked_no_update' in d['ratio_to_unmasked']))
  parted = [d for d in runs if 'part_seconds' in d]
  if parted:
    text.append(', the mask update (%s every %d steps: %s of a step), and '
                'on the steps between, the conditional op (%s against %s '
                'for an empty `session.run`; `PruningHook` runs no op then, '
                'it only fetches the global step in the step\'s own run)' % (
                    ' and '.join('%.1f ms' % (1e3 * d['part_seconds'][
                        'mask_update_op']) for d in parted),
                    parted[0]['pruning_frequency'],
                    ' and '.join('%.2f%%' % (
                        100 * d['mask_update_fraction_of_unmasked_step'] /
                        d['pruning_frequency']) for d in parted),
                    ' and '.join('%.2f ms' % (1e3 * d['part_seconds'][
                        'conditional_idle']) for d in parted),
                    ' and '.join('%.2f ms' % (1e3 * d['part_seconds']['no_op'])
                                 for d in parted)))
  widths = [(i[1] - i[0]) / 2 for d in runs
            for i in (d.get('ratio_median_95', {}).get(k) for k, _ in _WAYS)
            if i]
  text.append('. Together they come to about 1%, the target itself')
  if widths:
    text.append(', and the 95%% intervals of the medians are +-%.1f%% wide '
                'or more: whether the overhead is just under or just over '
                '1%% is finer than this bench resolves' % (
                    100 * min(widths)))
  text.append('. Fewer updates (a larger `pruning_frequency`) lower the '
              'update\'s share in proportion; the masks\' share is fixed.\n')
  return ''.join(text)


def _mask_update(results):
  paired = []
  for names in (('mask_update', 'mask_update_dist'),
                ('mask_update_tf1', 'mask_update_dist_tf1')):
    runs = [results.get(n) for n in names]
    runs = [d for d in runs if d and any(
        str(r['threads']) == '1' for r in d.get('dist_paired') or [])]
    if runs:
      data = max(runs, key=lambda d: d['info']['date'])   # the latest
      paired.append((data, [r for r in data['dist_paired']
                            if str(r['threads']) == '1'][0]))
  if not paired:
    return ''

  def ratios(row):
    return [v for k, v in row['ratio_to_memory_pass'].items()
            if k != 'memory_pass']

  def update_ms(row):
    return [1e3 * v for k, v in row['seconds'].items() if k != 'memory_pass']

  text = ['**An exact mask update costs a few memory passes, whatever the '
          'values.** One `mask_update_op()` of a weight of %s entries at '
          '%.0f%% sparsity costs %s `reduce_sum(abs(w))` passes (one '
          'thread; section 2: eight value '
          'distributions, continuous, fp16- and bf16-valued, quantized, all '
          'equal, with NaN and Inf, timed in one session), the slowest '
          'distribution within %s of the fastest: ties and non-finite '
          'values take no slower path. The update itself is faster on TF '
          '2.x, its memory pass more so: %s. TF 1.15\'s allocator maps '
          'each output above 32 MB afresh and faults in every page, which '
          'slows its pass, not the update, which works on blocks of 4 '
          'MB.' % (
              _sci(paired[0][1]['size']), 100 * paired[0][0]['sparsity'],
              ' and '.join('%s on %s' % (
                  _range(ratios(row)), _stack(data)) for data, row in paired),
              _range([row['slowest_over_fastest'] for _, row in paired],
                     '%.2fx'),
              ' against '.join('%s ms (pass %.1f ms) on %s' % (
                  _range(update_ms(row), '%.0f'),
                  1e3 * row['seconds']['memory_pass'], _stack(data))
                               for data, row in paired))]
  sweep = [r for d in (results.get('mask_update'),
                       results.get('mask_update_tf1')) if d
           for r in d['rows'] if 'contrib_top_k' in r['ratio_to_memory_pass']
           and r['size'] >= 10**6]
  if sweep:
    text.append(' `tf.nn.top_k` (contrib\'s method, and tfmot\'s) and a full '
                'sort take %.0fx a pass or more at %s entries, and grow '
                'faster than linearly.' % (
                    min(min(r['ratio_to_memory_pass']['contrib_top_k'],
                            r['ratio_to_memory_pass']['full_sort'])
                        for r in sweep), _sci(sweep[0]['size'])))
  text.append(' On TF 2.x the update stays above the targets of 3x a pass '
              'at 1e7 entries and 4x for every distribution: with stock '
              'TensorFlow ops one exact count of every entry costs about two '
              'of its memory passes on its own, and doing better needs a '
              'fused kernel (section 5).\n')
  return ''.join(text)


def _inference(results):
  data = results.get('inference')
  if not data:
    return ''
  rows = data['rows']
  ratios = [lat['ratio_stripped_to_unmasked'] for row in rows
            for lat in row['latency'].values()]
  first, last = rows[0], rows[-1]
  return ('**A stripped graph runs as fast as the never-pruned one; it is '
          'smaller only compressed.** The `.pb` that `strip_pruning_vars` '
          'writes holds dense constants, zeros included: its latency is '
          'within %.0f%% of the never-masked twin\'s at every sparsity '
          '(section 3), its raw size the same, while gzip takes it from '
          '%.2f MB at %.0f%% to %.2f MB at %.0f%%. Fewer FLOPs need fewer '
          'channels: structured pruning and the shrink '
          '([structured.md](structured.md), '
          '[channel_groups.md](channel_groups.md)).\n' % (
              100 * max(abs(r - 1.0) for r in ratios),
              first['size']['stripped']['gzip_bytes'] / 1e6,
              100 * first['sparsity'],
              last['size']['stripped']['gzip_bytes'] / 1e6,
              100 * last['sparsity']))


def _quality(results):
  data = results.get('quality_digits')
  if not data:
    return ''
  acc = data['accuracy']
  high = [s for s in data['sparsities'] if str(float(s)) in acc['gradual']]
  at = max(s for s in high if s <= 0.95)
  key = str(float(at))
  return ('**Gradual pruning keeps accuracy longest.** On the digits '
          '(section 4) the schedule keeps %.1f%% test accuracy at %.0f%% '
          'sparsity (dense: %.1f%%), one-shot pruning with fine-tuning '
          '%.1f%% and lottery rewinding %.1f%%, with the same step '
          'budget.\n' % (100 * acc['gradual'][key], 100 * at,
                         100 * acc['gradual']['0.0'],
                         100 * acc['one_shot'][key],
                         100 * acc['lottery_rewind'][key]))


_CRITERIA = {'uniform': 'uniform', 'l2': '`l2`', 'taylor': '`taylor`',
             'bn_scale': '`bn_scale`'}


def _accuracy(stats):
  """'97.1% (96.4-97.8)' of a `budget_compare` statistic."""
  text = '%.1f%%' % (100 * stats['mean'])
  if stats['n'] > 1 and '%.1f' % (100 * stats['min']) != \
      '%.1f' % (100 * stats['max']):
    text += ' (%.1f-%.1f)' % (100 * stats['min'], 100 * stats['max'])
  return text


def _budget_rows(entry, target):
  """[(method, summary row)] of the methods run at `target`, with an
  accuracy, best mean first."""
  rows = [(m, entry['summary'][m].get(str(target))) for m in entry['methods']]
  rows = [(m, r) for m, r in rows if r and r['accuracy']]
  return sorted(rows, key=lambda mr: -mr[1]['accuracy']['mean'])


def _apart(rows):
  """True when the best method's worst seed beats every other method's
  best seed: a lead that the seeds' spread does not cover."""
  if len(rows) < 2:
    return False
  best = rows[0][1]['accuracy']
  return best['n'] > 1 and all(best['min'] > r['accuracy']['max']
                               for _, r in rows[1:])


def _budget_net(name, entry, targets):
  dense = entry['summary']['dense']['accuracy']
  parts = []
  ties = True
  for target in targets:
    rows = _budget_rows(entry, target)
    if not rows:
      continue
    apart = _apart(rows)
    ties = ties and not apart and (rows[0][1]['accuracy']['mean'] -
                                   rows[-1][1]['accuracy']['mean'] < 0.01)
    text = 'at FLOPs x%g %s' % (target, ', '.join(
        '%s %s' % (_CRITERIA[m], _accuracy(r['accuracy'])) for m, r in rows))
    diverged = ['%s in %d of %d seeds' % (_CRITERIA[m], r['diverged'],
                                          r['runs'])
                for m, r in ((m, entry['summary'][m].get(str(target)))
                             for m in entry['methods'])
                if r and r['diverged']]
    if diverged:
      text += ' (training diverged: %s)' % ', '.join(diverged)
    if apart:
      text += ', %s ahead of every seed of the others' % _CRITERIA[rows[0][0]]
    parts.append(text)
  verdict = ('the methods tie within about a point and the seeds\' spread'
             if ties else 'they part')
  return 'On %s, dense %s, %s: %s' % (name, _accuracy(dense), verdict,
                                      '; '.join(parts))


def _kept(entry, method, target, suffix):
  """The fraction of their output channels that the layers ending in
  `suffix` keep (mean over the layers, then over the seeds), or None."""
  found = []
  for run in entry['runs']:
    if run['method'] == method and run['target'] == target and \
        run.get('widths'):
      kept = [after / float(before) for layer, (before, after)
              in run['widths'].items() if layer.endswith(suffix)]
      if kept:
        found.append(sum(kept) / len(kept))
  return sum(found) / len(found) if found else None


def _residual(entry, target):
  """How the global ranking splits MobileNet v2's channels at `target`,
  when its projections (the residual stream) lose far more than uniform's
  and its expansions less: one sentence, else ''."""
  kept = {m: (_kept(entry, m, target, 'project/Conv2D'),
              _kept(entry, m, target, 'expand/Conv2D'),
              _kept(entry, m, target, 'conv0/Conv2D'))
          for m in entry['methods']}
  ranked = [m for m in entry['methods'] if m != 'uniform' and
            None not in kept[m]]
  if 'uniform' not in kept or None in kept['uniform'] or not ranked:
    return ''
  uniform = kept['uniform']
  if not all(kept[m][0] < uniform[0] / 2 and kept[m][1] > uniform[1]
             for m in ranked):
    return ''
  return (
      'On MobileNet v2 the global ranking takes the residual stream down '
      'far more than uniform pruning: at x%g its projections keep %s of '
      'their channels and its expansions %s (uniform: %.0f%% and %.0f%%), '
      'and the stem keeps %s of its channels. ' % (
          target, _range([100 * kept[m][0] for m in ranked], '%.0f%%'),
          _range([100 * kept[m][1] for m in ranked], '%.0f%%'),
          100 * uniform[0], 100 * uniform[1],
          _range([100 * kept[m][2] for m in ranked], '%.0f%%')))


def _budget(results):
  data = results.get('budget_compare')
  if not data:
    return ''
  names = {'demo': 'the demo CNN', 'mobilenet_v2': 'MobileNet v2'}
  targets = data['targets']
  low = min(targets)
  text = ['**Pruning to a budget: at equal exported FLOPs, uniform pruning '
          'is not beaten here.** ' if _uniform_leads(data) else
          '**Pruning to a budget: the criteria at equal exported '
          'FLOPs.** ']
  seeds = len(data['seeds'])
  text.append('Test accuracy of the shrunk `.pb`, mean (min-max) over %d '
              'seed%s, same start and steps per seed (section 6). ' % (
                  seeds, '' if seeds == 1 else 's'))
  text.append('. '.join(_budget_net(names.get(n, n), e, targets)
                        for n, e in data['nets'].items()) + '. ')
  mobile = data['nets'].get('mobilenet_v2')
  if mobile:
    text.append(_residual(mobile, low))
  latency, slower = [], False
  for name, entry in data['nets'].items():
    batches = entry['settings']['latency_batches']
    rows = [(m, entry['summary'][m].get(str(low))) for m in entry['methods']]
    rows = [r for _, r in rows if r and r['latency_ratio'].get(str(
        batches[-1]))]
    if rows:
      slower = slower or min(r['latency_ratio'][str(batches[-1])]['mean']
                             for r in rows) > 1.5 * low
      latency.append('%s at x%g runs in %s of the dense time at batch %d '
                     'and %s at batch 1' % (
                         names.get(name, name), low,
                         _range([r['latency_ratio'][str(batches[-1])]['mean']
                                 for r in rows], '%.2f'), batches[-1],
                         _range([r['latency_ratio']['1']['mean']
                                 for r in rows], '%.2f')))
  if latency:
    text.append('%s: %s.' % ('Time falls less than the FLOPs' if slower
                             else 'Time falls with the FLOPs',
                             '; '.join(latency)))
  return ''.join(text) + '\n'


def _uniform_leads(data):
  """True when uniform's mean accuracy is the best, or within a point of
  it, at every net and target."""
  for entry in data['nets'].values():
    for target in data['targets']:
      rows = _budget_rows(entry, target)
      means = dict((m, r['accuracy']['mean']) for m, r in rows)
      if 'uniform' not in means or \
          means['uniform'] < max(means.values()) - 0.01:
        return False
  return True


_RERUN = (
    '**Rerunning.** `bench/run_all` runs every benchmark on the project\'s '
    'venvs and then writes this page (tens of minutes on 2 cores; '
    '`--quick` is the smoke run); `python -m bench.NAME` runs one benchmark, '
    'and `python -m bench.report` renders the page from `bench/results/` '
    '([bench/README.md](../bench/README.md)). Read ratios, not times, and '
    'only from a quiet machine: the tables flag runs that began with a '
    '1-minute load average above 1.5. For a question of one percent, give '
    'the training bench more repeats in fresh processes (`python -m '
    'bench.train_overhead --processes 3 --repeats 12`, about 15 minutes a '
    'stack); for the spread across value distributions, `python -m '
    'bench.mask_update --dist_only --dist_repeats 15 --paired_repeats 41`.\n')


def summary(results):
  """The page's summary: what is fast, the limits and why, how to rerun."""
  parts = [_training(results), _mask_update(results), _inference(results),
           _quality(results), _budget(results), _RERUN]
  return '## Summary\n\n' + '\n'.join(p for p in parts if p)


DESIGN = '''## 5. The exact mask update: design and limits

`magnitude_mask` ([tf1prune/masks/_select.py](../tf1prune/masks/_select.py))
keeps exactly the k largest scores, ties broken by position. Up to 16384
scores it is one `tf.nn.top_k` of the scores' bit patterns: a handful of ops,
as fast as the select below at those sizes. Above that, float32 scores go
through a radix select over the bit patterns of |w|, which order like the
floats ([tf1prune/masks/_radix.py](../tf1prune/masks/_radix.py)):

1. Every pass works on blocks of 2**20 entries (4 MB,
   [_blocks.py](../tf1prune/masks/_blocks.py)); only the bool mask is
   written at full size. TF 1.15's allocator maps each buffer above 32 MB
   afresh and faults in every 4 kB page on its first write: an abs of 1e7
   entries, summed, takes 5.8x as long whole as by blocks. On TF 2.x the
   blocks stay in cache (1.5x).
2. One `HistogramFixedWidth` of the high 16 bits of every key gives the
   boundary bin and the rank inside it, and, in its top 256 bins, the count
   of NaN and infinite scores that `Pruning`'s warning reads instead of a
   pass of its own.
3. A key XOR the bin's first key is below 2**15 exactly for the bin's
   members, so a row minimum finds the rows of 16 positions that hold one;
   only those rows are gathered, and a 2**15-bin histogram of their low bits
   gives the threshold. A large bin (tied or quantized values) takes a
   strided sample for its value and one counting pass (uint8 sums over rows
   of 128) instead.
4. Per-row counts of the ties and one row's cumulative sum give the position
   of the last kept tie; the mask is `key >= t` before it and `key > t`
   after it, on slices that share the keys' buffers, joined by one bool
   concat, cast and assigned (whole to a resource variable on TF 2.x, which
   adopts the buffer; by blocks of rows otherwise).

So the update makes a fixed number of passes whatever the values. It sorts
nothing (`top_k` and `tf.sort` grow faster than linearly) and neither
gathers nor takes a cumulative sum of all n entries: TF's CPU cumsum is
serial, about 7-10 ns an entry, about 9x a memory pass. A plain radix
select needs one to place the ties at the threshold, and they are common:
weights drawn by TF's own initializers have them at 1e7 entries.

**Where the time goes.** A traced update of a 1e7-entry weight (TF 2.21, one
thread, `random_normal_initializer`, sparsity 0.9) spends 18.9 ms in its
ops: `HistogramFixedWidth` 7.7, finding the boundary bin's rows 3.7 (XOR 1.7,
row minimum 1.1, `Where`, compares and gathers 0.9), writing the mask 3.8
(compares 1.7, bool concat 0.6, cast 1.5), `Abs` 2.1, about 640 small ops
1.6. The memory pass it is compared with takes 3.5-5.5 ms there.

**Why it is not cheaper with stock ops.** TF's CPU histogram kernel makes an
int32 NaN flag for every value, divides in double to find each bin and
counts in a serial loop: about 0.8 ns a key whatever the bin count or dtype,
about two of TF 2.x's memory passes (0.45 ns an entry) on its own, where TF
1.15's slower pass hides it. `Bincount`, `DenseBincount` and
`unsorted_segment_sum` count slower. Every exact update also takes the abs
(about 0.5x a pass) and writes the mask (about 0.9x): about 3.2x on TF 2.x
before the boundary bin's members are found (about 0.85x) and the small ops
run, which take it past 4x. Selects without
the full histogram cost as much: a bracket around the threshold from a
sample of 2**17 keys is about ten times wider than the histogram's boundary
bin, so gathering and selecting its members costs what dropping the
histogram saves (24.8 ms against the update's 24.4, side by side), and with
the bracket given, its two counts, `Where` and the write alone take 4.0x a
pass.

**What would be needed: a fused kernel** that counts and selects in one read.
XLA (`tf.xla.experimental.jit_scope` compiles `compat.v1` graph ops on CPU)
does not get there: the select alone, compiled, takes about 3.7x a pass
before the mask is written, and the whole update compiled runs slower than
without XLA. A select around a sampled bracket with XLA-fused counts is
estimated at about 3.6x, but tied weights would run 1.6x faster than
continuous ones, every weight shape would compile for a quarter to a third
of a second, and the speed would depend on XLA being in the user's
TensorFlow build. A custom op is what a package that installs beside any
TensorFlow build cannot ship. So the update stays on stock ops.

**In a training step** the update weighs less than its ratio suggests.
Mid-size weights are mostly per-op cost (a few hundred small ops each, a few
microseconds an op), and the CIFAR-10 net's five weights (1.07M entries)
take 4-5 ms, about 0.5% of a step at `pruning_frequency=10`. On the steps in
between, `conditional_mask_update_op()` on a TF 2.x graph is one `If` op that
the session does not lower into `Switch` and `Merge`, so the untaken update
costs nothing per op
([tf1prune/graph/conditional.py](../tf1prune/graph/conditional.py));
`PruningHook` runs none.
'''
