"""The demo: train a CNN dense and pruned, strip both, evaluate the .pb files.

    bin/tf1prune_demo                        # embedded digits when no CIFAR-10
    bin/tf1prune_demo --data_dir=/data/cifar10 --max_steps=20000

which runs `python -m cifar10_example.pipeline`. Both models train from
scratch with the same seed (same initial weights, same batches), steps and
learning rate; the only difference is the `tf1prune.PruningHook` that prunes
the second one gradually. Each is checkpointed, exported to an inference graph,
stripped to a frozen `.pb` by `tf1prune.strip_checkpoint`, and the `.pb` is
evaluated on the test set. The final table (stdout) compares test accuracy,
weight sparsity per layer and `.pb` size raw and gzipped; `summary.json` in
`--output_dir` holds the same numbers.

This module imports TensorFlow only once it has said which data it uses, so
that line comes first, before TensorFlow's own start-up lines.
"""

import argparse
import json
import os
import shutil
import time

from cifar10_example import cli, download, files

__all__ = ['format_table', 'main', 'run_demo']

_MARKER = '.tf1prune_demo'
_RUNS = ('dense', 'pruned')


def _fresh_run_dirs(output_dir):
  """Empties `<output_dir>/dense` and `/pruned`, only if the demo made them."""
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


def run_demo(source, output_dir, max_steps, pruning_hparams='',
             batch_size=128, learning_rate=0.1, seed=0, log_every_secs=5.0,
             log=cli.LOG.info):
  """Trains, strips and evaluates the dense and the pruned model.

  Graph mode must be on (`tf.disable_eager_execution()`).

  Args:
    source: an `input_data` source.
    output_dir: gets `dense/` and `pruned/` (each `train/`, `export/`,
      `model.pb`) and `summary.json`. Earlier `dense/` and `pruned/` made by
      the demo are deleted first.
    max_steps: training steps of each model.
    pruning_hparams: old-syntax hparams applied on top of
      `train.pruning_spec(max_steps)`.
    batch_size, learning_rate, seed: training settings, shared by both.
    log_every_secs: progress interval while training.
    log: callable taking a format string and its arguments.

  Returns:
    The summary dict (also written to `<output_dir>/summary.json`).
  """
  from cifar10_example import frozen, train  # pylint: disable=g-import-not-at-top
  spec = train.pruning_spec(max_steps, pruning_hparams)
  _fresh_run_dirs(output_dir)
  start = time.time()
  test_images, test_labels = frozen.test_arrays(source)
  runs = {}
  for name in _RUNS:
    folder = os.path.join(output_dir, name)
    log('training %s model: %d steps, batch %d, learning rate %g, seed %d%s',
        name, max_steps, batch_size, learning_rate, seed,
        '' if name == 'dense' else ', target sparsity %g from step %d to %d'
        % (spec.target_sparsity, spec.sparsity_function_begin_step,
           spec.sparsity_function_end_step))
    began = time.time()
    result = train.train(
        source, os.path.join(folder, 'train'), max_steps, batch_size,
        learning_rate, pruning_spec=spec if name == 'pruned' else None,
        seed=seed, log_every_secs=log_every_secs, log=log)
    seconds = time.time() - began
    pb, report = frozen.freeze(source, os.path.join(folder, 'train'),
                               os.path.join(folder, 'export'),
                               os.path.join(folder, 'model.pb'))
    accuracy = frozen.evaluate_pb(pb, test_images, test_labels)
    raw, gz = frozen.file_sizes(pb)
    log('%s: frozen .pb %s, test accuracy %.4f (%d/%d), sparsity %.2f%%',
        name, pb, accuracy['accuracy'], accuracy['correct'],
        accuracy['count'], 100 * report.total_sparsity)
    runs[name] = {
        'accuracy': accuracy['accuracy'], 'correct': accuracy['correct'],
        'count': accuracy['count'], 'sparsity': report.total_sparsity,
        'final_loss': result.get('loss'), 'steps': result.get('step'),
        'train_seconds': round(seconds, 1), 'pb_path': pb, 'pb_bytes': raw,
        'pb_gzip_bytes': gz, 'strip_report': report.to_dict()}
  layers = []
  for dense, pruned in zip(runs['dense']['strip_report']['layers'],
                           runs['pruned']['strip_report']['layers']):
    layers.append({'name': pruned['name'], 'shape': pruned['shape'],
                   'size': pruned['size'], 'dense_sparsity': dense['sparsity'],
                   'pruned_sparsity': pruned['sparsity']})
  summary = {
      'data': {'name': source.name, 'description': source.description,
               'num_train': source.num_train, 'num_test': source.num_test,
               'image_shape': list(source.image_shape)},
      'training': {'max_steps': max_steps, 'batch_size': batch_size,
                   'learning_rate': learning_rate, 'seed': seed,
                   'pruning_hparams': spec.values()},
      'dense': runs['dense'], 'pruned': runs['pruned'], 'layers': layers,
      'accuracy_drop': runs['dense']['accuracy'] - runs['pruned']['accuracy'],
      'seconds': round(time.time() - start, 1)}
  with open(os.path.join(output_dir, 'summary.json'), 'w') as f:
    json.dump(summary, f, indent=2, sort_keys=True)
  return summary


def format_table(summary):
  """Returns the final comparison table of a `run_demo` summary, as text."""
  d, p = summary['dense'], summary['pruned']
  data, training = summary['data'], summary['training']
  rows = [
      ('test accuracy, frozen .pb', '%.2f%%' % (100 * d['accuracy']),
       '%.2f%%' % (100 * p['accuracy'])),
      ('  correct / test images', '%d/%d' % (d['correct'], d['count']),
       '%d/%d' % (p['correct'], p['count'])),
      ('weight sparsity', '%.2f%%' % (100 * d['sparsity']),
       '%.2f%%' % (100 * p['sparsity'])),
      ('.pb size', '{:,} B'.format(d['pb_bytes']),
       '{:,} B'.format(p['pb_bytes'])),
      ('.pb size, gzipped', '{:,} B'.format(d['pb_gzip_bytes']),
       '{:,} B'.format(p['pb_gzip_bytes'])),
  ]
  out = ['data: %s' % data['description'],
         'training: %d steps per model, batch %d, learning rate %g, seed %d '
         '(same for both; pruned: target %g, schedule steps %d-%d)' % (
             training['max_steps'], training['batch_size'],
             training['learning_rate'], training['seed'],
             training['pruning_hparams']['target_sparsity'],
             training['pruning_hparams']['sparsity_function_begin_step'],
             training['pruning_hparams']['sparsity_function_end_step']), '']
  width = max(len(r[0]) for r in rows)
  cols = [max(len(r[i]) for r in rows + [('', 'dense', 'pruned')])
          for i in (1, 2)]
  out.append('%s  %s  %s' % (''.ljust(width), 'dense'.rjust(cols[0]),
                             'pruned'.rjust(cols[1])))
  out.extend('%s  %s  %s' % (r[0].ljust(width), r[1].rjust(cols[0]),
                             r[2].rjust(cols[1])) for r in rows)
  out.append('')
  layer_rows = [(l['name'], 'x'.join(str(s) for s in l['shape']),
                 '{:,}'.format(l['size']), '%.2f%%' % (100 * l['dense_sparsity']),
                 '%.2f%%' % (100 * l['pruned_sparsity']))
                for l in summary['layers']]
  layer_rows.append(('total', '', '{:,}'.format(sum(l['size'] for l in
                                                    summary['layers'])),
                     '%.2f%%' % (100 * d['sparsity']),
                     '%.2f%%' % (100 * p['sparsity'])))
  header = ('layer', 'shape', 'weights', 'dense', 'pruned')
  widths = [max(len(r[i]) for r in layer_rows + [header]) for i in range(5)]

  def line(row):
    return '  '.join([row[0].ljust(widths[0]), row[1].ljust(widths[1])] +
                     [c.rjust(w) for c, w in zip(row[2:], widths[2:])])

  out.extend(['sparsity per layer (zeros in the frozen .pb):', line(header)])
  out.extend(line(r) for r in layer_rows)
  out.extend(['', 'accuracy drop from pruning: %.2f points; total time %.0f s'
              % (100 * summary['accuracy_drop'], summary['seconds'])])
  return '\n'.join(out)


def _parser():
  parser = argparse.ArgumentParser(
      description='tf1prune demo: train the example CNN dense and with '
                  'gradual pruning, strip both checkpoints to frozen .pb '
                  'files, evaluate the .pb files on the test images, print '
                  'the comparison.')
  cli.data_flags(parser)
  parser.add_argument('--output_dir', default='runs/demo',
                      help='checkpoints, .pb files and summary.json; its '
                           'dense/ and pruned/ subfolders from an earlier run '
                           'are replaced (default: %(default)s)')
  parser.add_argument('--max_steps', type=int, default=None,
                      help='training steps of each model (default: 3000 on '
                           'the digits, 100000 on CIFAR-10)')
  parser.add_argument('--pruning_hparams', default='',
                      help='pruning hparams in the old syntax, on top of the '
                           'schedule scaled to --max_steps, e.g. '
                           'target_sparsity=0.95')
  parser.add_argument('--batch_size', type=int, default=128)
  parser.add_argument('--learning_rate', type=float, default=0.1)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--log_every_secs', type=float, default=5.0)
  return parser


def main(argv=None):
  args = _parser().parse_args(argv)
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
                     args.batch_size, args.learning_rate, args.seed,
                     args.log_every_secs)
  print(format_table(summary))
  cli.LOG.info('summary: %s', os.path.join(args.output_dir, 'summary.json'))


if __name__ == '__main__':
  raise SystemExit(cli.run(main))
