"""The `strip_pruning_vars` command: checkpoint in, stripped frozen .pb out.

    strip_pruning_vars --checkpoint_dir=/tmp/train \\
        --output_node_names=logits/BiasAdd --output_dir=/tmp/export

    >>> from tf1prune.cli import strip_pruning_vars as strip_cli   # errors: one line on stderr, status 1
    >>> strip_cli.main(['--checkpoint_dir=/no/such/dir',
    ...                 '--output_node_names=y'])
    1

Flags: `--checkpoint_dir` (alias `--checkpoint_path`), `--output_node_names`
(comma-separated), `--output_dir` (default `/tmp`, as contrib's; created if
missing), `--filename` (default `pruning_stripped.pb`; joined to
`--output_dir` as contrib did, so it may hold a directory or be absolute),
`--report_json PATH`,
`--allow_no_masks`, `--allow_training_ops` (freeze a graph in training mode:
batch statistics, dropout; refused otherwise), `--quiet` (no progress line;
there is one only when stderr is a terminal), `--shrink` (also remove the output channels whose filters
are entirely zero, `tf1prune.shrink`; `--shrink_objective=flops|params`: what
its cost rule for channels that padding makes vary minimizes, default flops),
`--shrink_check` (default true: run the shrunk graph beside the stripped one
on random inputs, refuse to write it if they differ; `false` skips it),
`--shrink_input_shapes=x:1,224,224,3` (the shapes of that check for inputs
with unknown dimensions besides the batch size), `--tflite PATH` (TF 2.x:
also write a TFLite model, sparse-encoded when that is smaller). Prints the
per-layer sparsity table of the stripped graph and the size and node count
of the file written (with `--shrink`: the shrunk graph's, the stripped
graph's beside them, then the parameters and FLOPs per layer and the check;
with `--tflite` its size and max diff against the .pb).
On bad input it prints one line to stderr and exits non-zero, with no output
file left behind (neither the .pb nor the `--tflite` or `--report_json`
file; older ones stay as they were); the checkpoint is only read.
"""

import argparse
import os
import sys

from tf1prune.cli._common import Parser, fail, parse, quiet_tensorflow, usage_error
from tf1prune.export.names import output_names
from tf1prune.export.verify import parse_input_shapes

__all__ = ['main', 'parse_args']

PROG = 'strip_pruning_vars'
DEFAULT_OUTPUT_DIR = '/tmp'  # contrib's default



def _bool(text):
  value = text.strip().lower()
  if value in ('1', 'true', 'yes', 'y'):
    return True
  if value in ('0', 'false', 'no', 'n'):
    return False
  raise argparse.ArgumentTypeError('expected true or false, got %r' % text)


def parse_args(argv):
  """Parses command-line flags (without the program name).

  Args:
    argv: list of str.

  Returns:
    An `argparse.Namespace` with checkpoint_dir, output_node_names (list of
    str), output_dir, filename, report_json, allow_no_masks,
    allow_training_ops, quiet, shrink, shrink_objective, shrink_check,
    shrink_input_shapes ({name: shape}), tflite.
  """
  parser = Parser(
      prog=PROG,
      description='Freezes the latest checkpoint of a pruned model into a '
                  'GraphDef whose masked weights are constants weight * mask, '
                  'without masks, thresholds or variables.')
  parser.add_argument('--checkpoint_dir', '--checkpoint_path',
                      dest='checkpoint_dir', required=True,
                      help='training directory (or checkpoint prefix) to read')
  parser.add_argument('--output_node_names', required=True,
                      help='comma-separated names of the output nodes')
  parser.add_argument('--output_dir', default=DEFAULT_OUTPUT_DIR,
                      help='directory for the .pb (default: %(default)s, as '
                           'contrib; created if missing)')
  parser.add_argument('--filename', default='pruning_stripped.pb',
                      help='name of the .pb, joined to --output_dir (a '
                           'relative directory in it, or an absolute path, '
                           'works as in contrib; default: %(default)s)')
  parser.add_argument('--report_json', default=None, metavar='PATH',
                      help='also write the report as JSON to PATH')
  parser.add_argument('--allow_no_masks', nargs='?', const=True,
                      default=False, type=_bool,
                      help='freeze even if the outputs use no masked weight')
  parser.add_argument('--allow_training_ops', nargs='?', const=True,
                      default=False, type=_bool,
                      help='freeze even if the outputs need training-mode ops '
                           '(batch norm with is_training=True, dropout)')
  parser.add_argument('--quiet', nargs='?', const=True, default=False,
                      type=_bool,
                      help='no progress line on the terminal')
  parser.add_argument('--shrink', nargs='?', const=True, default=False,
                      type=_bool,
                      help='also remove the output channels whose filters are '
                           'all zero, and the inputs that read them')
  parser.add_argument('--shrink_objective', default='flops',
                      choices=('flops', 'params'),
                      help='with --shrink: what the cost rule minimizes where '
                           'padding makes removed channels vary (flops: '
                           'fastest graph, params: smallest)')
  parser.add_argument('--shrink_check', nargs='?', const=True, default=True,
                      type=_bool,
                      help='with --shrink: run the shrunk graph beside the '
                           'stripped one on random inputs and refuse to '
                           'write it if the outputs differ (default: true)')
  parser.add_argument('--shrink_input_shapes', default='',
                      metavar='NAME:D,D,..;NAME:..',
                      help='with --shrink: the input shapes of that check, '
                           'for inputs with unknown dimensions besides the '
                           'batch size, e.g. x:1,224,224,3')
  parser.add_argument('--tflite', default=None, metavar='PATH',
                      help='TF 2.x: also write a TFLite model of the .pb to '
                           'PATH (sparse encoding when smaller)')
  args = parse(parser, argv)
  try:
    args.output_node_names = output_names(args.output_node_names)
  except ValueError:
    usage_error(PROG, '--output_node_names is empty; name the output nodes, e.g. '
                 '--output_node_names=logits/BiasAdd')
  try:
    args.shrink_input_shapes = parse_input_shapes(args.shrink_input_shapes)
  except ValueError as e:
    usage_error(PROG, '--shrink_input_shapes: %s' % e)
  if not args.filename or not os.path.basename(args.filename):
    usage_error(PROG, '--filename must name a file, got %r; e.g. '
                 '--filename=pruning_stripped.pb' % args.filename)
  # As contrib's write_graph: the file is os.path.join(output_dir, filename).
  path = os.path.join(args.output_dir or os.curdir, args.filename)
  args.output_dir, args.filename = os.path.split(path)
  return args


# How write_pb's errors name its arguments: by the flags that set them.
_FLAGS = {'output_path': '--filename', 'output_dir': '--output_dir',
          'tflite_path': '--tflite', 'report_json': '--report_json',
          'shrink_check': '--shrink_check=false',
          'shrink_input_shapes': '--shrink_input_shapes'}


def _run(args, progress=None):
  """Does the work; returns the report. Raises ValueError on bad input."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from tf1prune.export import write_pb  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  output_dir = os.path.abspath(args.output_dir or os.curdir)
  return write_pb(args.checkpoint_dir, args.output_node_names,
                  os.path.join(output_dir, args.filename), shrink=args.shrink,
                  shrink_objective=args.shrink_objective,
                  tflite_path=args.tflite, report_json=args.report_json,
                  allow_no_masks=args.allow_no_masks,
                  allow_training_ops=args.allow_training_ops,
                  progress=progress, argument_names=_FLAGS,
                  shrink_check=args.shrink_check,
                  shrink_input_shapes=args.shrink_input_shapes or None)


def _close(progress):
  if progress is not None:
    progress.close()


def main(argv=None):
  """Runs the command; returns the exit status (0 on success).

  Args:
    argv: flags without the program name; default `sys.argv[1:]`.
  """
  args = parse_args(sys.argv[1:] if argv is None else list(argv))
  quiet_tensorflow()
  from tf1prune.export.progress import terminal_progress  # pylint: disable=g-import-not-at-top
  progress = terminal_progress(PROG, quiet=args.quiet)
  try:
    report = _run(args, progress)
  except KeyboardInterrupt:
    _close(progress)
    sys.stderr.write('%s: interrupted; nothing written\n' % PROG)
    return 130
  except (ValueError, TypeError, OSError) as e:
    _close(progress)
    return fail(PROG, e)
  except Exception as e:  # pylint: disable=broad-except
    _close(progress)
    return fail(PROG, '%s: %s' % (type(e).__name__, e))
  _close(progress)
  print(report.format_table())
  if report.shrink_report is not None:
    print('\nshrink (channels whose filters are all zero removed):')
    print(report.shrink_report.format_table())
  print('wrote %s' % report.output_path)
  if report.tflite_report is not None:
    print(report.tflite_report.format())
  if args.report_json:
    print('wrote %s' % args.report_json)
  return 0



if __name__ == '__main__':
  sys.exit(main())
