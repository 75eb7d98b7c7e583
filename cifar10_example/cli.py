"""What the example's scripts share: logging, data flags, one-line errors.

    >>> import argparse
    >>> from cifar10_example import cli
    >>> parser = cli.data_flags(argparse.ArgumentParser())
    >>> parser.parse_args(['--data_dir', '/data']).data_dir
    '/data'

`run(main)` is the body of every script: it logs to stderr through the
`cifar10_example` logger and turns an expected failure (bad flag value,
missing file, failed download, missing scikit-learn, a TensorFlow error such
as a missing checkpoint) into one `error: ...` line and exit status 2. This module does not
import TensorFlow, so a script can log before TensorFlow's import prints its
own lines; each script's `main()` calls `tf.disable_eager_execution()`.
"""

import logging
import sys

from cifar10_example import download

__all__ = ['LOG', 'data_flags', 'load_data', 'run', 'setup_logging']

LOG = logging.getLogger('cifar10_example')


def setup_logging(level=logging.INFO):
  """Sends the example's log lines to stderr as `HH:MM:SS message`."""
  if not LOG.handlers:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter('%(asctime)s %(message)s',
                                           '%H:%M:%S'))
    LOG.addHandler(handler)
  # Today's stderr (tests swap it). Not setStream: it flushes the old
  # stream, which a test's capture may have closed.
  LOG.handlers[0].stream = sys.stderr
  LOG.setLevel(level)
  LOG.propagate = False


def data_flags(parser):
  """Adds --data_dir and --download to `parser` and returns it."""
  parser.add_argument(
      '--data_dir', default='/tmp/cifar10_data',
      help='folder with the CIFAR-10 binary files (or their '
           'cifar-10-batches-bin/ subfolder); without them the embedded '
           'scikit-learn digits are used (default: %(default)s)')
  parser.add_argument(
      '--download', action='store_true',
      help='download and unpack the official CIFAR-10 binary archive into '
           '--data_dir first, unless it is there already')
  return parser


def load_data(args):
  """Downloads CIFAR-10 if `args.download`, then returns the data source."""
  if args.download:
    LOG.info('downloading CIFAR-10 from %s into %s (unless it is there)',
             download.CIFAR10_URL, args.data_dir)
    download.download_and_extract(args.data_dir)
  from cifar10_example import input_data  # imports TensorFlow
  return input_data.load_source(args.data_dir)


def _expected(error):
  """True for errors a user can fix from the message alone."""
  if isinstance(error, (ValueError, TypeError, EnvironmentError,
                        ImportError)):
    return True
  # tf.errors.OpError (missing checkpoint, unreadable file), without
  # importing TensorFlow here.
  return any(c.__name__ == 'OpError' for c in type(error).__mro__)


def run(main, argv=None):
  """Runs `main(argv)` as a script; returns the process exit status."""
  setup_logging()
  try:
    return main(argv) or 0
  except KeyboardInterrupt:
    sys.stderr.write('interrupted\n')
    return 130
  except Exception as e:  # pylint: disable=broad-except
    if not _expected(e):
      raise
    message = (getattr(e, 'message', None) or str(e) or repr(e)).strip()
    sys.stderr.write('error: %s\n' % _first_line(message))
    return 2


# The lines TF 2.x puts before an op error's own message.
_TF2_PREAMBLE = ('Graph execution error:', 'Detected at node ', 'Node: ')


def _first_line(message):
  """The first line of `message` that says what went wrong.

  TF 2.x starts an op error's message with 'Graph execution error:', where
  the op was created (indented frames) and 'Node: ...'; its own text (TF 1.x:
  the first line) follows.
  """
  lines = message.splitlines()
  for line in lines:
    if line.strip() and not line[:1].isspace() and not line.startswith(
        _TF2_PREAMBLE):
      return line
  return lines[0]
