"""The `prune_checkpoint` command: prune a saved checkpoint, resume from it.

    prune_checkpoint --checkpoint=/tmp/train --output_dir=/tmp/pruned \\
        --sparsity='conv.*/weights:0.8,fc1/weights:0.5' \\
        --zero='conv2/weights[:, :, 29, 13]'

    >>> from tf1prune.cli import prune_checkpoint   # errors: one line, status 2
    >>> prune_checkpoint.main(['--output_dir=/tmp/x'])
    2

What it writes is `tf1prune.export.prune_checkpoint`'s: see its docstring.
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
    if not sparsity and not zero:
      raise UsageError('nothing to do: give --sparsity and/or --zero')
  except (UsageError, CheckpointPruneError) as e:
    return fail(PROG, e, status=2)
  quiet_tensorflow()
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from tf1prune.export.progress import terminal_progress  # pylint: disable=g-import-not-at-top
  progress = terminal_progress(PROG, quiet=args.quiet)
  try:
    result = prune_checkpoint(args.checkpoint, args.output_dir, sparsity, zero,
                              progress=progress)
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
  sys.stdout.write('wrote %s\n' % result['checkpoint'])
  return 0


if __name__ == '__main__':
  sys.exit(main())
