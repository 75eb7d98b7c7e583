"""The demo: train a CNN three ways, strip (and shrink), compare the .pb files.

    bin/tf1prune_demo                        # embedded digits when no CIFAR-10
    bin/tf1prune_demo --data_dir=/data/cifar10 --max_steps=20000

which runs `python -m cifar10_example.pipeline`. The three models train from
scratch with the same seed (same initial weights, same batches), steps and
learning rate:

- `dense`: no pruning;
- `pruned`: `tf1prune.PruningHook` prunes single weights gradually to 90%
  (contrib's example): a smaller gzipped file, but the same shapes, so the
  same FLOPs and the same speed in stock runtimes;
- `filters`: the same schedule lowers the exported graph's FLOPs to a budget
  (`budget=flops:0.3`): whole filters go, in coupled groups, where one
  global ranking of every channel says they cost most for what they give
  (the logits layer stays whole), with their biases; then
  `tf1prune.shrink_pb` removes them: a physically smaller graph, at the
  FLOPs of the budget.

Each is checkpointed, exported to an inference graph, stripped to a frozen
`.pb` by `tf1prune.strip_checkpoint` (and shrunk), and the `.pb` is evaluated
on the test set. The table (stdout) gives for each model: test accuracy of
the frozen `.pb`, weight sparsity, parameters, FLOPs, `.pb` size raw and
gzipped, and latency at batch 1 and a larger batch, measured side by side in
this process, as ratios to the dense model. `summary.json` holds the same
numbers, `demo.png` (with matplotlib) plots accuracy against FLOPs and the
sparsity schedule over the steps.

This module imports TensorFlow only once it has said which data it uses, so
that line comes first, before TensorFlow's own start-up lines.
"""

import argparse
import json
import os
import shutil
import time

from cifar10_example import cli, download, files

__all__ = ['FILTER_HPARAMS', 'format_table', 'main', 'run_demo']

_MARKER = '.tf1prune_demo'
_RUNS = ('dense', 'pruned', 'filters')
# The third model: whole filters pruned, globally, until the exported graph
# has 0.3 of the dense FLOPs, on the example's schedule.
FILTER_HPARAMS = 'budget=flops:0.3,do_not_prune=[softmax_linear]'
_LABELS = {'dense': 'no pruning', 'pruned': 'weights pruned, %g%%',
           'filters': 'filters pruned to %s, shrunk'}


def _budget(text):
  """The `Budget` of a `budget` hparam's text, or None."""
  from tf1prune.plan.budget import parse_budget
  return parse_budget(text)


def _budget_text(budget):
  """'FLOPs x0.3' for the budget flops:0.3, 'latency 3.5 ms' for
  latency:3.5ms."""
  kind = {'flops': 'FLOPs', 'params': 'parameters',
          'latency': 'latency'}[budget.kind]
  if budget.relative:
    return '%s x%g' % (kind, budget.value)
  if budget.kind == 'latency':
    return 'latency %g ms' % budget.value
  return '%s %s' % ('{:,}'.format(int(budget.value)), kind)


def _fresh_run_dirs(output_dir):
  """Empties the demo's run folders in `output_dir`, only if the demo made them."""
  if not os.path.isdir(output_dir):
    os.makedirs(output_dir)
  ours = os.path.exists(os.path.join(output_dir, _MARKER))
  for name in _RUNS:
    path = os.path.join(output_dir, name)
    if os.path.exists(path):
      if not ours:
        raise ValueError('%s exists and was not made by tf1prune_demo; pass '
                         'another --output_dir' % path)
      shutil.rmtree(path)
  open(os.path.join(output_dir, _MARKER), 'w').close()


def _specs(train, max_steps, pruning_hparams, filter_hparams, output_dir):
  """The pruning hparams of each model (None: dense). A latency budget
  without a `latency_table` gets `<output_dir>/latency.json`: the layers
  are timed once and the table is read again by the next run."""
  filters = train.pruning_spec(max_steps, FILTER_HPARAMS).parse(
      filter_hparams or '')
  budget = _budget(filters.budget)
  if budget and budget.kind == 'latency' and not filters.latency_table:
    filters.set_hparam('latency_table',
                       os.path.join(output_dir, 'latency.json'))
  return {'dense': None,
          'pruned': train.pruning_spec(max_steps, pruning_hparams),
          'filters': filters}


def _latency_batches(batches, spec):
  """`batches`, with the batch a latency budget was timed at."""
  budget = _budget(spec.budget)
  if budget and budget.kind == 'latency' and \
      spec.latency_batch not in batches:
    return tuple(sorted(set(batches) | {spec.latency_batch}))
  return tuple(batches)


def _budget_line(summary):
  """What the filters model's budget asked and what its export reached, as
  a line of text; None without a budget."""
  run = summary['filters']
  if not run.get('budget'):
    return None
  spec = run['pruning_hparams']
  budget = _budget(spec['budget'])
  d = summary['dense']
  if budget.kind == 'latency':
    batch = str(spec['latency_batch'])
    measured = (run['latency'][batch]['median'] /
                d['latency'][batch]['median'])
    return ('budget of the filters model: %s at batch %s (%s, %d thread(s); '
            'layer times in %s): the table predicts x%.2f, measured x%.2f' % (
                _budget_text(budget), batch, spec['latency_runtime'],
                spec['latency_threads'], spec['latency_table'],
                run['budget_predicted'], measured))
  key = budget.kind
  return ('budget of the filters model: %s: the exported graph has x%.3f' % (
      _budget_text(budget), run[key] / float(d[key])))


def _train_and_export(name, spec, source, folder, max_steps, settings, log):
  """Trains one model and writes its frozen (for `filters`: shrunk) .pb."""
  from cifar10_example import frozen, model, train  # pylint: disable=g-import-not-at-top
  import tf1prune  # pylint: disable=g-import-not-at-top
  target = ''
  if spec is not None:
    budget = _budget(spec.budget)
    target = ', %s from step %d to %d' % (
        'budget %s' % (budget,) if budget else
        'target sparsity %g' % spec.target_sparsity,
        spec.sparsity_function_begin_step, spec.sparsity_function_end_step)
  log('training %s model: %d steps, batch %d, learning rate %g, seed %d%s',
      name, max_steps, settings['batch_size'], settings['learning_rate'],
      settings['seed'], target)
  began = time.time()
  result = train.train(
      source, os.path.join(folder, 'train'), max_steps,
      settings['batch_size'], settings['learning_rate'], pruning_spec=spec,
      seed=settings['seed'], log_every_secs=settings['log_every_secs'],
      log=log)
  seconds = time.time() - began
  pb = os.path.join(folder, 'model.pb')
  shrink = None
  if name == 'filters':
    unshrunk = os.path.join(folder, 'model_unshrunk.pb')
    _, report = frozen.freeze(source, os.path.join(folder, 'train'),
                              os.path.join(folder, 'export'), unshrunk)
    shrink = tf1prune.shrink_pb(unshrunk, [model.LOGITS_NAME], pb)
    log('%s: shrunk %s -> %s: params x%.3f, FLOPs x%.3f', name, unshrunk, pb,
        shrink.params_after / float(shrink.params_before),
        shrink.flops_after / float(shrink.flops_before))
  else:
    _, report = frozen.freeze(source, os.path.join(folder, 'train'),
                              os.path.join(folder, 'export'), pb)
  return {'final_loss': result.get('loss'), 'steps': result.get('step'),
          'history': result.get('history', []),
          'train_seconds': round(seconds, 1), 'pb_path': pb,
          'sparsity': report.total_sparsity, 'strip_report': report.to_dict(),
          'shrink_report': shrink.to_dict() if shrink else None,
          'shrink_table': shrink.format_table() if shrink else None,
          'pruning_hparams': spec.values() if spec is not None else None}


def run_demo(source, output_dir, max_steps, pruning_hparams='',
             filter_hparams='', batch_size=128, learning_rate=0.1, seed=0,
             log_every_secs=5.0, latency_batches=(1, 256), log=cli.LOG.info):
  """Trains, strips, shrinks, evaluates and times the three models.

  Graph mode must be on (`tf.disable_eager_execution()`).

  Args:
    source: an `input_data` source.
    output_dir: gets `dense/`, `pruned/`, `filters/` (each `train/`,
      `export/`, `model.pb`; `filters/` also `model_unshrunk.pb`),
      `summary.json` and `demo.png`. Earlier run folders made by the demo are
      deleted first.
    max_steps: training steps of each model.
    pruning_hparams: old-syntax hparams applied on top of
      `train.pruning_spec(max_steps)` for the `pruned` model.
    filter_hparams: old-syntax hparams applied on top of that and
      `FILTER_HPARAMS` for the `filters` model.
    batch_size, learning_rate, seed: training settings, shared by all three.
    log_every_secs: progress interval while training.
    latency_batches: batch sizes whose latency is measured.
    log: callable taking a format string and its arguments.

  Returns:
    The summary dict (also written to `<output_dir>/summary.json`).
  """
  from cifar10_example import compare, frozen, model, plot, train  # pylint: disable=g-import-not-at-top
  specs = _specs(train, max_steps, pruning_hparams, filter_hparams,
                 output_dir)
  latency_batches = _latency_batches(latency_batches, specs['filters'])
  _fresh_run_dirs(output_dir)
  start = time.time()
  test_images, test_labels = frozen.test_arrays(source)
  settings = {'batch_size': batch_size, 'learning_rate': learning_rate,
              'seed': seed, 'log_every_secs': log_every_secs}
  runs = {}
  for name in _RUNS:
    run = _train_and_export(name, specs[name], source,
                            os.path.join(output_dir, name), max_steps,
                            settings, log)
    pb = run['pb_path']
    run.update(frozen.evaluate_pb(pb, test_images, test_labels))
    run.update(compare.graph_costs(pb, [model.LOGITS_NAME]))
    run['pb_bytes'], run['pb_gzip_bytes'] = frozen.file_sizes(pb)
    spec = specs[name]
    budget = _budget(spec.budget) if spec is not None else None
    run['label'] = _LABELS[name] if spec is None else (
        _LABELS[name] % (_budget_text(budget) if budget else
                         100 * spec.target_sparsity))
    run['budget'] = str(budget) if budget else None
    # The cost the budget's model (FLOPs, parameters or the latency table)
    # gives the pruned model at the end of training.
    run['budget_predicted'] = run['history'][-1].get('cost_ratio') if (
        budget and run['history']) else None
    log('%s: frozen .pb %s, test accuracy %.4f (%d/%d), sparsity %.2f%%',
        name, pb, run['accuracy'], run['correct'], run['count'],
        100 * run['sparsity'])
    runs[name] = run
  log('timing the three .pb files side by side (batch %s, one thread)',
      ', '.join(str(b) for b in latency_batches))
  times = compare.latencies({n: runs[n]['pb_path'] for n in _RUNS},
                            frozen.INPUT_NAME, model.LOGITS_NAME, test_images,
                            latency_batches)
  for name in _RUNS:
    runs[name]['latency'] = {str(b): t for b, t in times[name].items()}
    runs[name]['accuracy_drop'] = (runs['dense']['accuracy'] -
                                   runs[name]['accuracy'])
  layers = []
  for rows in zip(*[runs[n]['strip_report']['layers'] for n in _RUNS]):
    layer = {'name': rows[0]['name'], 'shape': rows[0]['shape'],
             'size': rows[0]['size']}
    layer.update({'%s_sparsity' % n: r['sparsity']
                  for n, r in zip(_RUNS, rows)})
    layers.append(layer)
  summary = {
      'data': {'name': source.name, 'description': source.description,
               'num_train': source.num_train, 'num_test': source.num_test,
               'image_shape': list(source.image_shape)},
      'training': {'max_steps': max_steps, 'batch_size': batch_size,
                   'learning_rate': learning_rate, 'seed': seed},
      'runs': list(_RUNS), 'layers': layers,
      'accuracy_drop': runs['pruned']['accuracy_drop'],
      'latency_batches': list(latency_batches)}
  summary.update(runs)
  png = os.path.join(output_dir, 'demo.png')
  summary['plot'] = png if plot.write_png(summary, png) else None
  if summary['plot'] is None:
    log('no demo.png: matplotlib is not installed (pip install matplotlib)')
  summary['seconds'] = round(time.time() - start, 1)
  with open(os.path.join(output_dir, 'summary.json'), 'w') as f:
    json.dump(summary, f, indent=2, sort_keys=True)
  return summary


def _ratio_text(value, reference, fmt):
  text = fmt(value)
  if reference and value != reference:
    text += ' (x%.2f)' % (value / float(reference))
  elif reference:
    text += ' (x1.00)'
  return text


def _count(n):
  return '{:,}'.format(n)


def _ms(seconds):
  return '%.3f ms' % (1000 * seconds)


def format_table(summary):
  """Returns the final comparison table of a `run_demo` summary, as text."""
  names = summary['runs']
  d = summary['dense']
  data, training = summary['data'], summary['training']

  def row(title, key, fmt, ratios=True):
    return [title] + [_ratio_text(summary[n][key], d[key] if ratios else None,
                                  fmt) for n in names]

  rows = [
      [('test accuracy, frozen .pb')] +
      ['%.2f%%' % (100 * summary[n]['accuracy']) for n in names],
      ['  correct / test images'] +
      ['%d/%d' % (summary[n]['correct'], summary[n]['count']) for n in names],
      ['weight sparsity'] +
      ['%.2f%%' % (100 * summary[n]['sparsity']) for n in names],
      row('parameters', 'params', _count),
      row('FLOPs per image', 'flops', _count),
      row('.pb size, bytes', 'pb_bytes', _count),
      row('.pb size, gzipped', 'pb_gzip_bytes', _count),
  ]
  for batch in summary['latency_batches']:
    key = str(batch)
    rows.append(['latency, batch %d' % batch] + [
        _ratio_text(summary[n]['latency'][key]['median'],
                    d['latency'][key]['median'], _ms) for n in names])
  header = [''] + names
  labels = [''] + [summary[n]['label'] for n in names]
  widths = [max(len(r[i]) for r in rows + [header, labels])
            for i in range(len(header))]

  def line(r):
    return '  '.join([r[0].ljust(widths[0])] +
                     [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()

  out = ['data: %s' % data['description'],
         'training: %d steps per model, batch %d, learning rate %g, seed %d '
         '(same for all three)' % (training['max_steps'],
                                   training['batch_size'],
                                   training['learning_rate'],
                                   training['seed']), '',
         line(header), line(labels)]
  out.extend(line(r) for r in rows)
  out.append('(x: ratio to dense; latency: median of interleaved repeats in '
             'one process, one thread)')
  budget_line = _budget_line(summary)
  if budget_line:
    out.append(budget_line)
  out.append('')
  layer_header = ['layer', 'shape', 'weights'] + names
  layer_rows = [[l['name'], 'x'.join(str(s) for s in l['shape']),
                 _count(l['size'])] +
                ['%.2f%%' % (100 * l['%s_sparsity' % n]) for n in names]
                for l in summary['layers']]
  layer_rows.append(['total', '', _count(sum(l['size']
                                             for l in summary['layers']))] +
                    ['%.2f%%' % (100 * summary[n]['sparsity']) for n in names])
  w = [max(len(r[i]) for r in layer_rows + [layer_header])
       for i in range(len(layer_header))]

  def layer_line(r):
    return '  '.join([r[0].ljust(w[0]), r[1].ljust(w[1])] +
                     [c.rjust(x) for c, x in zip(r[2:], w[2:])])

  out.extend(['sparsity per layer (zeros in the frozen .pb, before the '
              'shrink):', layer_line(layer_header)])
  out.extend(layer_line(r) for r in layer_rows)
  if summary['filters'].get('shrink_table'):
    out.extend(['', 'the shrink of the filters model:',
                summary['filters']['shrink_table']])
  out.extend(['', 'accuracy drop from pruning: %s; total time %.0f s' % (
      ', '.join('%s %.2f points' % (n, 100 * summary[n]['accuracy_drop'])
                for n in names[1:]), summary['seconds'])])
  if summary.get('plot'):
    out.append('plot: %s' % summary['plot'])
  return '\n'.join(out)


def _parser():
  parser = argparse.ArgumentParser(
      description='tf1prune demo: train the example CNN dense, with '
                  'gradual weight pruning and with coupled filter pruning, '
                  'strip the checkpoints to frozen .pb files (and shrink the '
                  'filter-pruned one), evaluate and time the .pb files, '
                  'print the comparison and plot it.')
  cli.data_flags(parser)
  parser.add_argument('--output_dir', default='runs/demo',
                      help='checkpoints, .pb files and summary.json; its '
                           'dense/, pruned/ and filters/ from an earlier run '
                           'are replaced (default: %(default)s)')
  parser.add_argument('--max_steps', type=int, default=None,
                      help='training steps of each model (default: 3000 on '
                           'the digits, 100000 on CIFAR-10)')
  parser.add_argument('--pruning_hparams', default='',
                      help='pruning hparams in the old syntax, on top of the '
                           'schedule scaled to --max_steps, e.g. '
                           'target_sparsity=0.95')
  parser.add_argument('--filter_hparams', default='',
                      help='pruning hparams of the filters model, on top of '
                           'the same schedule and %s' % FILTER_HPARAMS)
  parser.add_argument('--batch_size', type=int, default=128)
  parser.add_argument('--learning_rate', type=float, default=0.1)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--log_every_secs', type=float, default=5.0)
  return parser


def main(argv=None):
  args = _parser().parse_args(argv)
  if args.max_steps is not None and args.max_steps < 1:
    # 0 would read as 'not given' and train the default 3000 or
    # 100000 steps.
    raise ValueError('--max_steps must be >= 1, got %d; leave it out for '
                     'the default' % args.max_steps)
  if args.download:
    cli.LOG.info('downloading CIFAR-10 from %s into %s (unless it is there)',
                 download.CIFAR10_URL, args.data_dir)
    download.download_and_extract(args.data_dir)
  if files.find_cifar10_files(args.data_dir) is None:
    cli.LOG.info('data: no CIFAR-10 binary files in %s, so this runs on the '
                 'embedded data set: the 8x8 handwritten digits that ship '
                 'with scikit-learn (sklearn.datasets.load_digits)',
                 args.data_dir)
  else:
    cli.LOG.info('data: CIFAR-10 binary files in %s', args.data_dir)
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from cifar10_example import input_data, train  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  source = input_data.load_source(args.data_dir)
  cli.LOG.info('data: %s', source.description)
  max_steps = args.max_steps or train.default_max_steps(source.name)
  summary = run_demo(source, args.output_dir, max_steps, args.pruning_hparams,
                     args.filter_hparams, args.batch_size, args.learning_rate,
                     args.seed, args.log_every_secs)
  print(format_table(summary))
  cli.LOG.info('summary: %s', os.path.join(args.output_dir, 'summary.json'))


if __name__ == '__main__':
  raise SystemExit(cli.run(main))
