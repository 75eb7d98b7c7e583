"""The `prune_checkpoint` command: prune a saved checkpoint, resume from it.

    prune_checkpoint --checkpoint=/tmp/train --output_dir=/tmp/pruned \\
        --sparsity='conv.*/weights:0.8,fc1/weights:0.5' \\
        --zero='conv2/weights[:, :, 29, 13]'
    prune_checkpoint --checkpoint=/tmp/train --output_dir=/tmp/pruned \\
        --budget=flops:0.5 --hparams=budget_criterion=l1

    >>> from tf1prune.cli import prune_checkpoint   # errors: one line, status 2
    >>> prune_checkpoint.main(['--output_dir=/tmp/x'])
    2

What it writes is `tf1prune.export.prune_checkpoint`'s (with `--budget`:
`tf1prune.training.checkpoint_budget.prune_to_budget`'s): see their
docstrings.
"""

import sys

from tf1prune.cli._common import Parser, UsageError, fail, quiet_tensorflow
from tf1prune.cli.checkpoint_flags import parse_sparsity_map, parse_zero
from tf1prune.export.checkpoint_prune import (CheckpointPruneError,
                                              prune_checkpoint)

PROG = 'prune_checkpoint'


def _parser():
  parser = Parser(
      prog=PROG,
      description='Prune weights of a checkpoint by magnitude (or zero chosen '
      'entries) and write a new checkpoint that training resumes from.')
  parser.add_argument('--checkpoint', '--checkpoint_dir', '--checkpoint_path',
                      dest='checkpoint', required=True,
                      help='checkpoint prefix, or a folder (its latest one)')
  parser.add_argument('--output_dir', required=True,
                      help='new folder for the pruned checkpoint (must not exist)')
  parser.add_argument('--sparsity', action='append', default=[],
                      help="comma-separated regex:sparsity, e.g. "
                      "'conv.*/weights:0.8,fc1/weights:0.5'; repeatable")
  parser.add_argument('--zero', action='append', default=[],
                      help="regex[index] entries to zero (and lock, if the graph "
                      "locks that weight), e.g. 'conv2/weights[:, :, 29, 13]'; "
                      "repeatable")
  parser.add_argument('--budget', default=None,
                      help="prune whole channels, ranked globally, until the "
                      "exported graph costs this: flops:0.5, params:0.4 (a "
                      "ratio of the dense cost) or flops:1.2e9")
  parser.add_argument('--hparams', default='',
                      help="with --budget: more pruning hparams, e.g. "
                      "'budget_criterion=l1,channel_group_multiple=8'")
  parser.add_argument('--quiet', action='store_true',
                      help='no progress line on the terminal (there is one '
                      'only when stderr is a terminal)')
  return parser


def main(argv=None):
  """Runs the command; returns the exit status (0, 1 on failure, 2 on bad flags)."""
  try:
    args = _parser().parse_args(argv)
    sparsity = parse_sparsity_map(','.join(args.sparsity))
    zero = [parse_zero(z) for z in args.zero]
    if args.budget is not None and (sparsity or zero):
      raise UsageError('--budget prunes whole channels by itself: give it '
                       'without --sparsity and --zero (run twice for both)')
    if args.hparams and args.budget is None:
      raise UsageError('--hparams goes with --budget')
    if not sparsity and not zero and args.budget is None:
      raise UsageError('nothing to do: give --sparsity and/or --zero, or '
                       '--budget')
  except (UsageError, CheckpointPruneError) as e:
    return fail(PROG, e, status=2)
  quiet_tensorflow()
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from tf1prune.export.progress import terminal_progress  # pylint: disable=g-import-not-at-top
  progress = terminal_progress(PROG, quiet=args.quiet)
  try:
    if args.budget is not None:
      from tf1prune.training.checkpoint_budget import prune_to_budget
      result = prune_to_budget(args.checkpoint, args.output_dir, args.budget,
                               args.hparams, progress=progress)
    else:
      result = prune_checkpoint(args.checkpoint, args.output_dir, sparsity,
                                zero, progress=progress)
  except (CheckpointPruneError, OSError, tf.errors.OpError) as e:
    error = str(e).splitlines()[0] if str(e) else type(e).__name__
  else:
    error = None
  finally:
    if progress is not None:   # clears the progress line before any error
      progress.close()
  if error is not None:
    return fail(PROG, error)
  for entry in result['weights']:
    sys.stdout.write('%s %s: zeros %.4f -> %.4f%s%s\n' % (
        entry['name'], entry['shape'], entry['zeros_before'],
        entry['zeros_after'],
        ', mask %s' % entry['mask'] if entry['mask'] else '',
        ', slots %s' % ' '.join(entry['slots']) if entry['slots'] else ''))
  if 'table' in result:
    sys.stdout.write(result['table'] + '\n')
  sys.stdout.write('wrote %s\n' % result['checkpoint'])
  return 0


if __name__ == '__main__':
  sys.exit(main())
