"""The `check_deploy` command: the consumer x model matrix of what we write.

    bin/check_deploy                      # every model, both stacks
    bin/check_deploy --models=cnn_filter_shrunk,lstm_static
    bin/check_deploy --pb=model.pb --inputs=x:1,32,32,3 --outputs=logits/BiasAdd

    >>> from tf1prune.cli import check_deploy
    >>> check_deploy.main(['--inputs=x:1,a'])
    2

`bin/check_deploy` runs this in its own venv (`.venv/deploy`: TensorFlow 2.x,
tf2onnx, onnxruntime, OpenVINO) with `--tf1_python` set to the TF 1.15 venv's
interpreter. Exit status 0 when every cell is `ok` or the converter's own
`limit`, 1 when one is wrong or fails, 2 on bad flags.
"""

import os
import sys

from tf1prune.cli._common import Parser, UsageError, fail

PROG = 'check_deploy'


def _inputs(text):
  """'x:1,8,8,3;y:2' -> [['x', [1, 8, 8, 3]], ['y', [2]]]."""
  inputs = []
  for item in filter(None, (t.strip() for t in text.split(';'))):
    name, _, dims = item.rpartition(':')
    try:
      shape = [int(d) for d in dims.split(',')]
    except ValueError:
      raise UsageError('--inputs entry %r must look like name:1,8,8,3' % item)
    if not name:
      raise UsageError('--inputs entry %r has no node name' % item)
    inputs.append([name, shape])
  return inputs


def _parser():
  parser = Parser(prog=PROG, description='Convert tf1prune\'s frozen graphs '
                  'with every deployment consumer, run them, and compare.')
  parser.add_argument('--models', default='',
                      help='comma-separated model names (default: all)')
  parser.add_argument('--pb', default=None,
                      help='check this frozen graph instead of the model set')
  parser.add_argument('--inputs', default='',
                      help="with --pb: 'name:1,8,8,3;name2:...'")
  parser.add_argument('--outputs', default='',
                      help='with --pb: comma-separated output node names')
  parser.add_argument('--tf1_python', default=os.environ.get('TF1PRUNE_TF1_PYTHON'),
                      help='interpreter of a TF 1.15 venv (its session and '
                      'TFLite converter join the matrix)')
  parser.add_argument('--work_dir', default=None,
                      help='keep graphs and outputs here (default: a temp '
                      'dir, removed when done)')
  parser.add_argument('--markdown', default=None,
                      help='also write the matrix to this file')
  return parser


def main(argv=None):
  """Runs the check; returns the exit status."""
  try:
    args = _parser().parse_args(argv)
    inputs = _inputs(args.inputs)
    outputs = [o.strip() for o in args.outputs.split(',') if o.strip()]
    if args.pb and not (inputs and outputs):
      raise UsageError('--pb needs --inputs and --outputs')
    markdown_dir = os.path.dirname(os.path.abspath(args.markdown or '.'))
    if args.markdown and not os.path.isdir(markdown_dir):
      # Found only after the check ran, with a traceback.
      raise UsageError('--markdown %r: the folder %s does not exist'
                       % (args.markdown, markdown_dir))
    if args.markdown and os.path.isdir(args.markdown):
      raise UsageError('--markdown %r is a folder: give the file to write, '
                       'e.g. %s' % (args.markdown,
                                    os.path.join(args.markdown, 'deploy.md')))
    models = [m.strip() for m in args.models.split(',') if m.strip()]
    if models:
      from tf1prune.deploy._models import MODELS
      unknown = [m for m in models if m not in MODELS]
      if unknown:
        # Otherwise each worker fails with a KeyError traceback.
        raise UsageError('--models names no model %s; the models are %s'
                         % (','.join(unknown), ','.join(sorted(MODELS))))
  except UsageError as e:
    return fail(PROG, e, status=2)
  from tf1prune import deploy  # pylint: disable=g-import-not-at-top
  pythons = [sys.executable] + ([args.tf1_python] if args.tf1_python else [])
  if not args.tf1_python:
    sys.stderr.write('%s: no --tf1_python (or TF1PRUNE_TF1_PYTHON): TF 1.15 '
                     'is left out of the matrix\n' % PROG)
  try:
    cells = deploy.check_deploy(pythons, args.work_dir, models or None,
                                args.pb, inputs or None, outputs or None)
  except (ValueError, OSError) as e:
    return fail(PROG, e)
  table = deploy.format_matrix(cells)
  print(table)
  if args.markdown:
    with open(args.markdown, 'w') as f:
      f.write(table + '\n')
  bad = [c for c in cells if c.status in ('wrong', 'fails')]
  for cell in bad:
    sys.stderr.write('%s: %s x %s: %s\n' % (PROG, cell.model, cell.consumer,
                                            cell.text()))
  return 1 if bad else 0


if __name__ == '__main__':
  sys.exit(main())
