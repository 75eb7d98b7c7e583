"""The `tf1prune_sensitivity` command: a checkpoint's sensitivity to pruning.

    tf1prune_sensitivity --checkpoint=/tmp/export \\
        --metric=cifar10_example.frozen:test_accuracy --output_dir=/tmp/sens

    >>> from tf1prune.cli import sensitivity   # errors: one line, status 2
    >>> sensitivity.main(['--checkpoint=/tmp/x'])
    2

It imports the checkpoint's meta graph (an inference graph with masked
weights, e.g. what `cifar10_example.frozen.export_inference_checkpoint`
writes), restores the checkpoint, calls `module.function(sess) -> float`
on the model as it is and with 25%, 50% and 75% of each channel group
removed (`tf1prune.sensitivity`), prints the table, and writes
`sensitivity.json` (for the `budget_sensitivity` hparam) and, with
matplotlib, `sensitivity.png` into `--output_dir`.
"""

import importlib
import os
import sys

from tf1prune.cli._common import Parser, UsageError, fail, quiet_tensorflow

PROG = 'tf1prune_sensitivity'


def _parser():
  parser = Parser(
      prog=PROG,
      description='Evaluate a metric on a checkpoint with part of each '
      'channel group removed, to see where pruning costs accuracy.')
  parser.add_argument('--checkpoint', required=True,
                      help='checkpoint prefix, or a folder (its latest one), '
                      'with its meta graph')
  parser.add_argument('--metric', required=True,
                      help='module:function, function(session) -> float')
  parser.add_argument('--output_dir', default='.',
                      help='where sensitivity.json and sensitivity.png go')
  parser.add_argument('--hparams', default='',
                      help="pruning hparams: which groups, the criterion, "
                      "e.g. 'budget_criterion=bn_scale,do_not_prune=[conv1]'")
  parser.add_argument('--fractions', default='0.25,0.5,0.75',
                      help='fractions of a group to remove, comma-separated')
  parser.add_argument('--lower_is_better', action='store_true',
                      help='the metric is a loss, not an accuracy')
  parser.add_argument('--quiet', action='store_true',
                      help='no progress line on the terminal')
  return parser


def _metric(text):
  module, sep, name = text.partition(':')
  if not sep or not module or not name:
    raise UsageError("--metric must look like 'package.module:function', "
                     "got %r" % text)
  try:
    function = getattr(importlib.import_module(module), name)
  except (ImportError, AttributeError) as e:
    raise UsageError('--metric %s: %s' % (text, e))
  if not callable(function):
    raise UsageError('--metric %s is not a function' % text)
  return function


def main(argv=None):
  """Runs the command; returns the exit status (0, 1 on failure, 2 on bad
  flags)."""
  try:
    args = _parser().parse_args(argv)
    try:
      fractions = [float(f) for f in args.fractions.split(',') if f.strip()]
    except ValueError:
      raise UsageError('--fractions must be numbers in (0, 1), got %r'
                       % args.fractions)
    metric = _metric(args.metric)
    if not os.path.isdir(args.output_dir):
      raise UsageError('--output_dir %r is not a folder' % args.output_dir)
  except UsageError as e:
    return fail(PROG, e, status=2)
  quiet_tensorflow()
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  import tf1prune  # pylint: disable=g-import-not-at-top
  from tf1prune.export.progress import terminal_progress
  tf.disable_eager_execution()
  progress = terminal_progress(PROG, quiet=args.quiet)
  try:
    prefix = (tf.train.latest_checkpoint(args.checkpoint)
              if os.path.isdir(args.checkpoint) else args.checkpoint)
    if not prefix or not os.path.exists(prefix + '.meta'):
      raise ValueError('--checkpoint %s has no checkpoint with a meta graph'
                       % args.checkpoint)
    with tf.Graph().as_default(), tf.Session() as sess:
      saver = tf.train.import_meta_graph(prefix + '.meta', clear_devices=True)
      saver.restore(sess, prefix)
      report = tf1prune.sensitivity(
          sess, metric, args.hparams, fractions,
          higher_is_better=not args.lower_is_better, progress=progress)
    path = os.path.join(args.output_dir, 'sensitivity.json')
    report.save(path)
    try:
      plot = report.plot(os.path.join(args.output_dir, 'sensitivity.png'))
    except ImportError:
      plot = None
  except (ValueError, OSError, tf.errors.OpError) as e:
    if progress is not None:
      progress.close()
    return fail(PROG, e)
  if progress is not None:
    progress.close()
  print(report.format_table())
  print('wrote %s' % path)
  if plot:
    print('wrote %s' % plot)
  return 0


if __name__ == '__main__':
  sys.exit(main())
