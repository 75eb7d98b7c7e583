"""PNG plots of the benchmark results (matplotlib, a bench-only dependency).

    python -m bench.plots            # from bench/results/*.json (full runs)
    python -m bench.plots --quick    # from the *_quick.json files

Writes, next to the JSON files, whichever of these has its input:
`mask_update.png` (cost of one mask update over one memory pass, against the
weight size, log-log), `quality_<data>.png` (test accuracy against sparsity
per method), `train_overhead.png` (step-time ratios, ours and tfmot's) and
`inference_size.png` (gzipped .pb size against sparsity) and
`budget_compare.png` (test accuracy against the exported FLOPs, per
pruning method).
"""

import argparse
import json
import math
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')

_LABELS = {
    'tf1prune_exact': 'tf1prune (exact)',
    'radix_gather_cumsum': 'plain radix select (gather, cumsum ties)',
    'tf1prune_histogram_256': 'tf1prune histogram, 256 bins (approximate)',
    'contrib_top_k': 'tf.nn.top_k (contrib, tfmot)',
    'full_sort': 'full sort',
}


def _load(name, quick):
  path = os.path.join(RESULTS, name + ('_quick' if quick else '') + '.json')
  if not os.path.exists(path):
    return None, None
  with open(path) as f:
    return json.load(f), path[:-len('.json')] + '.png'


def _save(fig, data, out):
  """Lays out `fig` with a footer naming TF, CPUs and date; writes `out`."""
  info = data.get('info', {})
  fig.tight_layout(rect=(0, 0.04, 1, 1))
  fig.text(0.99, 0.01, 'TF %s, %s CPUs, %s' % (
      info.get('tensorflow'), info.get('cpus'), info.get('date')),
           ha='right', va='bottom', fontsize=7, color='grey')
  fig.savefig(out, dpi=110)
  plt.close(fig)


def plot_mask_update(quick):
  data, out = _load('mask_update', quick)
  if data is None:
    return None
  # The value distributions of the later run that has them: this one's, or
  # a `--dist_only` run's.
  runs = [d for d in (data, _load('mask_update_dist', quick)[0])
          if d and d.get('dist_rows')]
  latest = max(runs, key=lambda d: d['info']['date']) if runs else None
  dist = [r for r in (latest or {}).get('dist_rows', [])
          if str(r['threads']) == '1']
  if dist:
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(13, 4.5))
    _plot_distributions(bars, dist, latest)
  else:
    fig, ax = plt.subplots(figsize=(7, 4.5))
  rows = data['rows']
  for threads in sorted({str(r.get('threads', 'default')) for r in rows}):
    part = [r for r in rows if str(r.get('threads', 'default')) == threads]
    for key in ('tf1prune_exact', 'radix_gather_cumsum',
                'tf1prune_histogram_256', 'contrib_top_k', 'full_sort'):
      pts = [(r['size'], r['ratio_to_memory_pass'][key]) for r in part
             if key in r['ratio_to_memory_pass']]
      if pts:
        ax.plot(*zip(*pts), marker='o', linestyle='-' if threads == '1' else '--',
                label='%s, %s thread(s)' % (_LABELS.get(key, key), threads))
  ax.plot([1e7, 5e7], [3, 2], 'k:', marker='x', label='targets: 3x at 1e7, 2x at 5e7')
  ax.set_xscale('log')
  ax.set_yscale('log')
  ax.set_xlabel('elements in the weight')
  ax.set_ylabel('time / one reduce_sum(abs(w)) pass')
  ax.set_title('Cost of one mask update (sparsity %.0f%%)' %
               (100 * data.get('sparsity', 0)))
  ax.grid(True, which='both', alpha=0.3)
  ax.legend(fontsize=8)
  _save(fig, data, out)
  return out


def _plot_distributions(ax, rows, data):
  """Bars: the exact update and the plain radix select over one memory pass
  per value distribution (one thread, the largest size run)."""
  size = max(r['size'] for r in rows)
  rows = [r for r in rows if r['size'] == size]
  x = [i for i in range(len(rows))]
  for offset, key, label in ((-0.2, 'tf1prune_exact', 'tf1prune (exact)'),
                             (0.2, 'radix_gather_cumsum',
                              'plain radix select')):
    ax.bar([i + offset for i in x], [r['ratio_to_memory_pass'][key] for r in rows], 0.4,
           label=label)
  ax.axhline(4.0, color='k', linestyle=':', label='target 4x')
  ax.set_xticks(x)
  ax.set_xticklabels([r['distribution'] for r in rows], rotation=30,
                     ha='right', fontsize=8)
  ax.set_ylabel('time / one reduce_sum(abs(w)) pass')
  ax.set_title('Exact update by value distribution (%.0e, one thread, TF %s, '
               '%s)' % (size, data['info']['tensorflow'], data['info']['date']),
               fontsize=9)
  ax.legend(fontsize=8)


def _density_axis(ax, sparsities):
  """x = -log10(1 - sparsity), ticks labelled with the sparsity in %."""
  ticks = sorted(set(sparsities))
  ax.set_xticks([_x(t) for t in ticks])
  ax.set_xticklabels(['%g' % (100 * t) for t in ticks], fontsize=8)
  ax.set_xlabel('sparsity (%), spaced by -log10(1 - sparsity)')


def _x(sparsity):
  return -math.log10(max(1e-6, 1.0 - sparsity))


def plot_quality(quick, data_name):
  data, out = _load('quality_' + data_name, quick)
  if data is None:
    return None
  fig, (ax, ref) = plt.subplots(1, 2, figsize=(11, 4.5),
                                gridspec_kw={'width_ratios': [3, 2]})
  acc = data['accuracy']
  for method, style in (('gradual', 'o-'), ('one_shot', 's--'),
                        ('lottery_rewind', '^:')):
    pts = sorted((float(s), a) for s, a in acc[method].items())
    ax.plot([_x(s) for s, _ in pts], [100 * a for _, a in pts], style,
            label=method.replace('_', ' '))
  ax.axhline(100 * acc['dense']['0.0'], color='grey', linestyle=':',
             label='dense, same step budget')
  _density_axis(ax, [float(v) for v in data['sparsities']])
  ax.set_ylabel('test accuracy (%)')
  ax.set_title('Ours: %s, CIFAR-10 example CNN' % data['data'])
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize=8)
  ref_sparsities = []
  for reference in data.get('references', []):
    pts = reference['points']
    ref_sparsities += [s for s, _ in pts]
    ref.plot([_x(s) for s, _ in pts], [100 * a for _, a in pts], 'o-',
             label=reference['model'])
  _density_axis(ref, ref_sparsities)
  ref.set_ylabel('published accuracy (%)')
  ref.set_title('Published, other models/data: not comparable 1:1',
                fontsize=9)
  ref.grid(True, alpha=0.3)
  ref.legend(fontsize=7, loc='lower left')
  _save(fig, data, out)
  return out


def plot_train_overhead(quick):
  ours, out = _load('train_overhead', quick)
  if ours is None:
    return None
  keras, _ = _load('train_overhead_keras', quick)
  labels, values = [], []
  for key in ('masked_pruning_hook', 'masked_same_run', 'masked_second_run',
              'masked_hook', 'masked_no_update', 'unmasked_again',
              'monitored_again'):
    if key in ours['ratio_to_unmasked']:
      if key.endswith('_again'):
        labels.append('no pruning\n' + key.split('_')[0] + ' twin')
      else:
        labels.append('tf1prune\n' +
                      key.replace('masked_', '').replace('_', ' '))
      values.append(ours['ratio_to_unmasked'][key])
  colors = ['grey' if label.startswith('no pruning') else 'C0'
            for label in labels]
  if keras is not None:
    labels.append('tfmot\nprune_low_magnitude')
    values.append(keras['ratio_pruned_to_unpruned'])
    colors.append('C3')
  fig, ax = plt.subplots(figsize=(8.5, 4))
  bars = ax.bar(range(len(values)), values, color=colors)
  for bar, value in zip(bars, values):
    ax.text(bar.get_x() + bar.get_width() / 2, value, '%.3f' % value,
            ha='center', va='bottom', fontsize=8)
  ax.axhline(1.0, color='black', linewidth=0.8)
  ax.axhline(1.01, color='grey', linestyle=':', label='target 1.01')
  ax.set_xticks(range(len(values)))
  ax.set_xticklabels(labels, fontsize=8)
  ax.set_ylim(min(0.9, min(values) - 0.05), max(values) + 0.1)
  ax.set_ylabel('step time / unpruned twin\n(median of per-repeat ratios)')
  ax.set_title('Training step overhead, CIFAR-10 CNN, batch %d' %
               ours['batch'])
  ax.legend(fontsize=8)
  _save(fig, ours, out)
  return out


def plot_inference_size(quick):
  data, out = _load('inference', quick)
  if data is None:
    return None
  out = out.replace('inference', 'inference_size')
  rows = data['rows']
  xs = [100 * r['sparsity'] for r in rows]
  fig, ax = plt.subplots(figsize=(7, 4))
  ax.plot(xs, [r['size']['stripped']['raw_bytes'] / 1e6 for r in rows], 'o-',
          label='stripped .pb, raw')
  ax.plot(xs, [r['size']['stripped']['gzip_bytes'] / 1e6 for r in rows], 's-',
          label='stripped .pb, gzip -9')
  ax.plot(xs, [r['size']['unmasked']['gzip_bytes'] / 1e6 for r in rows], 'x:',
          label='never-masked twin, gzip -9')
  ax.set_xlabel('sparsity (%)')
  ax.set_ylabel('MB')
  ax.set_title('Frozen CIFAR-10 CNN size')
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize=8)
  _save(fig, data, out)
  return out


_BUDGET_STYLES = {'uniform': ('o-', 'uniform'), 'l2': ('s--', 'budget, l2'),
                  'taylor': ('^--', 'budget, taylor'),
                  'bn_scale': ('D--', 'budget, bn_scale')}


def plot_budget_compare(quick):
  """Test accuracy against the exported FLOPs ratio, per net and method
  (means over the seeds, bars from the least to the most)."""
  data, out = _load('budget_compare', quick)
  if data is None:
    return None
  nets = list(data['nets'])
  fig, axes = plt.subplots(1, len(nets), figsize=(5.5 * len(nets), 4.2),
                           squeeze=False)
  for ax, net in zip(axes[0], nets):
    entry = data['nets'][net]
    summary = entry['summary']
    for method in entry['methods']:
      points = [summary[method][str(t)] for t in data['targets']
                if summary[method].get(str(t)) and
                summary[method][str(t)]['accuracy']]
      if not points:
        continue
      x = [p['flops_ratio']['mean'] for p in points]
      y = [100 * p['accuracy']['mean'] for p in points]
      low = [100 * (p['accuracy']['mean'] - p['accuracy']['min'])
             for p in points]
      high = [100 * (p['accuracy']['max'] - p['accuracy']['mean'])
              for p in points]
      style, label = _BUDGET_STYLES.get(method, ('x-', method))
      ax.errorbar(x, y, yerr=[low, high], fmt=style, capsize=3, label=label)
    dense = summary['dense']['accuracy']
    if dense:
      ax.axhline(100 * dense['mean'], color='grey', linestyle=':',
                 label='dense')
    ax.set_xscale('log')
    ax.minorticks_off()
    ax.set_xlim(0.8 * min(data['targets']), 1.2)
    ax.set_xticks(data['targets'] + [1.0])
    ax.set_xticklabels(['x%g' % t for t in data['targets'] + [1.0]])
    ax.set_xlabel('FLOPs of the exported, shrunk graph / dense')
    ax.set_ylabel('test accuracy (%%), %d seed(s)' % len(data['seeds']))
    ax.set_title(entry['model'], fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
  _save(fig, data, out)
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='plot the *_quick.json results')
  args = parser.parse_args(argv)
  outs = [plot_mask_update(args.quick), plot_train_overhead(args.quick),
          plot_inference_size(args.quick), plot_budget_compare(args.quick)]
  outs += [plot_quality(args.quick, name) for name in ('digits', 'cifar10')]
  for out in outs:
    if out:
      print('wrote', out)


if __name__ == '__main__':
  main()
