"""What every console script shares: one-line errors and a quiet TensorFlow.

    >>> from tf1prune.cli._common import one_line
    >>> one_line(ValueError('two\\n  lines'))
    'two lines'
"""

import argparse
import logging
import os
import sys
import warnings


class UsageError(Exception):
  """A bad flag: reported in one line, exit status 2."""


class Parser(argparse.ArgumentParser):
  """argparse that raises `UsageError` instead of printing usage."""

  def error(self, message):
    raise UsageError(message)


def usage_error(prog, message):
  """Writes a usage error in one line and exits with status 2."""
  sys.stderr.write('%s: error: %s (see --help)\n' % (prog, message))
  sys.exit(2)


def parse(parser, argv):
  """`parser.parse_args(argv)`; a usage error exits 2 after one line."""
  try:
    return parser.parse_args(argv)
  except UsageError as e:
    usage_error(parser.prog, e)


def one_line(error):
  """The message of an exception folded onto one line."""
  text = getattr(error, 'message', None) or str(error) or type(error).__name__
  return ' '.join(str(text).split())


def fail(prog, error, status=1):
  """Writes `prog: error: ...` for an exception; returns `status`."""
  sys.stderr.write('%s: error: %s\n' % (prog, one_line(error)))
  return status


def quiet_tensorflow():
  """Keeps TensorFlow's start-up chatter off the console."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  warnings.filterwarnings('ignore')
  logging.getLogger('tensorflow').setLevel(logging.ERROR)
