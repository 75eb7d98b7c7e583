"""Renders the README "Performance" section from the benchmark JSON files.

    python -m bench.report            # bench/results/*.json -> docs/sections/performance.md
    python -m bench.report --quick    # *_quick.json -> bench/results/performance_quick.md

Every number in the section is read from bench/results/; nothing is typed by
hand except the explanations next to each verdict, which say why a target is
met or missed. A benchmark whose file is missing is listed as not run.
"""

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
DOC = os.path.join(os.path.dirname(HERE), 'docs', 'sections', 'performance.md')

TRAIN_TARGET = 1.03
MASK_TARGET = 5.0
LATENCY_NOISE = 0.05


def _load(name, quick):
  path = os.path.join(RESULTS, name + ('_quick' if quick else '') + '.json')
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def _info(data):
  info = data['info']
  text = 'TF %s, Python %s, %s CPUs (%s), %s' % (
      info['tensorflow'], info['python'], info['cpus'], info['machine'],
      info['date'])
  load = data.get('load_average_1min')
  if load and None not in load:
    text += ', load average %.1f -> %.1f' % tuple(load)
  return text


def _table(header, rows):
  lines = ['| ' + ' | '.join(header) + ' |',
           '|' + '|'.join('---' for _ in header) + '|']
  lines += ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows]
  return '\n'.join(lines)


def _verdict(value, target, what):
  if value <= target:
    return '**met**: %s %.3f <= %.2f' % (what, value, target)
  return '**missed** by %.1f%%: %s %.3f > %.2f' % (
      100.0 * (value / target - 1.0), what, value, target)


def _png(name, quick):
  path = os.path.join(RESULTS, name + ('_quick' if quick else '') + '.png')
  if os.path.exists(path):
    return '![%s](../../bench/results/%s)\n\n' % (name, os.path.basename(path))
  return ''


def train_section(quick):
  ours = _load('train_overhead', quick)
  legacy = _load('train_overhead_tf1', quick)
  keras = _load('train_overhead_keras', quick)
  out = ['### 1. Training overhead\n']
  if ours is None:
    return '\n'.join(out + ['Not run.\n'])
  out.append('CIFAR-10 example CNN, batch %d, constant synthetic input, SGD; '
             'masked graph with the schedule active and a mask update every '
             '%d steps, against the same net without masks, both in one '
             'process, alternating, %d repeats of %d steps; median step '
             'times, and the median of the per-repeat ratios (%s).\n' % (ours['batch'], ours['pruning_frequency'],
                               ours['repeats'], ours['steps_per_repeat'],
                               _info(ours)))
  rows = []
  names = [('masked_same_run', 'tf1prune: `sess.run([train_op, '
            'conditional_mask_update_op])`'),
           ('masked_hook', 'tf1prune: `PruningHook` (second `session.run`)'),
           ('masked_no_update', 'tf1prune: masked layers, no update op')]
  for data in (ours, legacy):
    if data is None:
      continue
    for key, label in names:
      rows.append([label, 'TF ' + data['info']['tensorflow'],
                   '%.1f' % (1e3 * data['median_step_seconds'][key]),
                   '%.1f' % (1e3 * data['median_step_seconds']['unmasked']),
                   '**%.3f**' % data['ratio_to_unmasked'][key]])
  if keras is not None:
    rows.append(['tfmot: `prune_low_magnitude` + `UpdatePruningStep`',
                 'TF %s, tf-keras %s, tfmot %s' % (
                     keras['info']['tensorflow'],
                     keras['versions']['tf_keras'],
                     keras['versions']['tensorflow_model_optimization']),
                 '%.1f' % (1e3 * keras['median_step_seconds']['pruned']),
                 '%.1f' % (1e3 * keras['median_step_seconds']['unpruned']),
                 '**%.3f**' % keras['ratio_pruned_to_unpruned']])
  out.append(_table(['pruned training', 'stack', 'step (ms)',
                     'unpruned twin step (ms)', 'ratio'], rows) + '\n')
  if legacy is not None:
    out.append('TF 1.x rows: %d repeats of %d steps (%s).\n' % (
        legacy['repeats'], legacy['steps_per_repeat'], _info(legacy)))
  if keras is not None:
    out.append('tfmot row: %d repeats of %d steps (%s).\n' % (
        keras['repeats'], keras['steps_per_repeat'], _info(keras)))
  for data in (ours, legacy):
    if data is not None and 'part_seconds' in data:
      parts = data['part_seconds']
      out.append('Parts (TF %s): one unconditional `mask_update_op()` of the '
                 'five weights (%.2fM elements) takes %.1f ms, %.1f%% of an '
                 'unmasked step, so %.2f%% per step at frequency %d; the '
                 'conditional op on a step where nothing is due takes %.2f ms '
                 '(an empty `session.run`: %.2f ms).\n' % (
                     data['info']['tensorflow'], data.get('masked_elements',
                                                          1068096) / 1e6,
                     1e3 * parts['mask_update_op'],
                     100 * data['mask_update_fraction_of_unmasked_step'],
                     100 * data['mask_update_fraction_of_unmasked_step'] /
                     data['pruning_frequency'], data['pruning_frequency'],
                     1e3 * parts['conditional_idle'], 1e3 * parts['no_op']))
  for data in (ours, legacy):
    if data is None:
      continue
    ratio = max(data['ratio_to_unmasked']['masked_same_run'],
                data['ratio_to_unmasked']['masked_hook'])
    out.append('Target <= %.2f (TF %s, the worse of the two ways of running '
               'the update): %s.\n' % (TRAIN_TARGET,
                                       data['info']['tensorflow'],
                                       _verdict(ratio, TRAIN_TARGET, 'ratio')))
  worst = max(ours['ratio_to_unmasked']['masked_same_run'],
              ours['ratio_to_unmasked']['masked_hook'])
  if keras is not None:
    theirs = keras['ratio_pruned_to_unpruned']
    out.append('Against tfmot (%.3f, its latest run): ours (%.3f) is %s.' % (
        theirs, worst, 'lower' if worst < theirs else '**not lower**'))
  out.append('\n')
  out.append(_png('train_overhead', quick))
  return '\n'.join(out)


def mask_section(quick):
  data = _load('mask_update', quick)
  out = ['### 2. Mask update cost\n']
  if data is None:
    return '\n'.join(out + ['Not run.\n'])
  out.append('One `mask_update_op()` on a single weight at sparsity %.0f%%, '
             'as a multiple of one `reduce_sum(abs(w))` pass over the same '
             'weight (median of alternating repeats, %s). The alternatives '
             'also write the mask. Last column: a run of '
             '`conditional_mask_update_op()` on a step where nothing is due, '
             'over a run of `tf.no_op()`.\n' % (100 * data['sparsity'],
                                               _info(data)))
  rows = []
  keys = ['tf1prune_exact', 'tf1prune_histogram_256', 'old_top_k',
          'full_sort']
  at_1e7 = None
  for row in data['rows']:
    ratios = row['ratio_to_memory_pass']
    cells = ['%.0e' % row['size'],
             '%.2f ms' % (1e3 * row['seconds']['memory_pass'])]
    cells += ['%.1fx' % ratios[k] if k in ratios else '-' for k in keys]
    cells.append('%.2f' % row['idle_conditional_vs_no_op'])
    rows.append(cells)
    if row['size'] == 10**7:
      at_1e7 = ratios['tf1prune_exact']
  out.append(_table(['elements', 'memory pass', '**tf1prune exact '
                     '(default)**', 'tf1prune histogram (approx.)',
                     '`tf.nn.top_k` (old contrib, tfmot)', 'full sort',
                     'idle conditional / no_op'], rows) + '\n')
  if at_1e7 is not None:
    out.append('Target <= %.0fx at 1e7 elements, exact threshold: %s.\n' %
               (MASK_TARGET, _verdict(at_1e7, MASK_TARGET, 'ratio')))
  idle = [r['idle_conditional_vs_no_op'] for r in data['rows']]
  out.append('Idle conditional op over `no_op`: %s (target: '
             'indistinguishable from a no-op).\n' % ', '.join(
                 '%.2f' % v for v in idle))
  out.append(_png('mask_update', quick))
  return '\n'.join(out)


def inference_section(quick):
  out = ['### 3. Inference: stripped graph vs never-masked twin\n']
  found = False
  for name in ('inference', 'inference_tf1'):
    data = _load(name, quick)
    if data is not None:
      out.append(_inference_table(data, first=not found))
      found = True
  if not found:
    out.append('Not run.\n')
  out.append(_png('inference_size', quick))
  return '\n'.join(out)


def _inference_table(data, first):
  out = []
  if not first:
    out.append('The same on %s:\n' % _info(data))
  else:
    out.append('The CIFAR-10 CNN with masks set by magnitude, checkpointed '
               'and stripped by `tf1prune.strip_checkpoint`, against the same '
               'architecture built without masks, holding the same effective '
               'weights and frozen by `convert_variables_to_constants`; '
               'latency of `session.run` on the `.pb` files, alternating, '
               'median (%s).\n' % _info(data))
  rows = []
  ratios = []
  for row in data['rows']:
    lat = row['latency']
    cells = ['%.0f%%' % (100 * row['sparsity'])]
    for key in sorted(lat, key=lambda k: int(k.split('_')[1])):
      ratios.append(lat[key]['ratio_stripped_to_unmasked'])
      cells.append('%.3f (%.2f ms)' % (
          lat[key]['ratio_stripped_to_unmasked'],
          1e3 * lat[key]['median_seconds']['stripped']))
    size, twin = row['size']['stripped'], row['size']['unmasked']
    cells += ['%.2f MB / %.2f MB' % (size['raw_bytes'] / 1e6,
                                     size['gzip_bytes'] / 1e6),
              '%.2f MB / %.2f MB' % (twin['raw_bytes'] / 1e6,
                                     twin['gzip_bytes'] / 1e6),
              '%.1g' % row['max_abs_output_difference']]
    rows.append(cells)
  batches = sorted(data['rows'][0]['latency'],
                   key=lambda k: int(k.split('_')[1]))
  out.append(_table(['sparsity'] + ['latency ratio, %s' % b.replace('_', ' ')
                                    for b in batches] +
                    ['stripped .pb raw / gzip', 'twin .pb raw / gzip',
                     'max abs output diff'], rows) + '\n')
  worst = max(abs(r - 1.0) for r in ratios)
  out.append('Target 1.00 within noise (TF %s; here: every ratio within '
             '+-%.0f%%): %s (largest deviation %.1f%%).\n' % (
                 data['info']['tensorflow'], 100 * LATENCY_NOISE,
                 '**met**' if worst <= LATENCY_NOISE else '**missed**',
                 100 * worst))
  return '\n'.join(out)


def quality_section(quick):
  out = ['### 4. Quality: test accuracy vs sparsity\n']
  found = False
  references = None
  for name in ('digits', 'cifar10'):
    data = _load('quality_' + name, quick)
    if data is None:
      continue
    found = True
    references = data['references']
    s = data['settings']
    out.append('**%s** (%s), %s. Same dense start for every method '
               '(%d steps), then the same budget of %d steps; batch %d, '
               'momentum SGD lr %g; mean of %d seed(s); %s. Lottery: %s.\n' % (
                   data['data'], data['data_description'], data['model'],
                   s['pretrain_steps'], s['budget_steps'], s['batch'],
                   s['learning_rate'], s['seeds'], _info(data),
                   data['lottery']))
    acc = data['accuracy']
    rows = []
    for sparsity in data['sparsities']:
      key = str(float(sparsity))
      rows.append(['%.0f%%' % (100 * sparsity)] + [
          '%.1f%%' % (100 * acc[m][key]) for m in
          ('gradual', 'one_shot', 'lottery_rewind')])
    out.append(_table(['sparsity', 'gradual (schedule)', 'one-shot + '
                       'fine-tune', 'lottery rewind'], rows) + '\n')
    out.append(_png('quality_' + name, quick))
  if not found:
    return '\n'.join(out + ['Not run.\n'])
  out.append('Published reference points: **other models and data sets**, '
             'for context only, not comparable one to one:\n')
  rows = []
  for ref in references:
    for sparsity, accuracy in ref['points']:
      rows.append([ref['source'], ref['model'], '%.1f%%' % (100 * sparsity),
                   '%.1f%%' % (100 * accuracy)])
  out.append(_table(['source', 'model / data', 'sparsity', 'accuracy'], rows)
             + '\n')
  return '\n'.join(out)


def render(quick):
  parts = ['## Performance\n',
           'Generated by `bench/report.py` from `bench/results/*.json` '
           '(`bench/run_all` re-runs everything). Each comparison is a '
           'ratio measured inside one process, the two sides alternating, '
           'median over repeats: on these shared 2-core machines absolute '
           'times move a lot between runs, ratios much less.\n',
           train_section(quick), mask_section(quick), inference_section(quick),
           quality_section(quick)]
  notes = os.path.join(HERE, 'performance_notes.md')
  if os.path.exists(notes) and not quick:
    with open(notes) as f:
      parts.append(f.read())
  return '\n'.join(parts)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='render the *_quick.json results instead')
  args = parser.parse_args(argv)
  text = render(args.quick)
  path = (os.path.join(RESULTS, 'performance_quick.md') if args.quick
          else DOC)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)
  print('wrote', path)


if __name__ == '__main__':
  main()
