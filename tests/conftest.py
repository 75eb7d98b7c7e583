"""Test setup for every folder: slow tests, a scratch folder, shared fixtures.

The mode is each folder's own: every folder but keras/ has a conftest.py
that imports tests/support/graph_mode.py (graph mode before its modules are
imported, a new default graph for every test); tests/keras/conftest.py keeps
the process eager, so the Keras tests run in a pytest process of their own
(`pytest tests/keras`; bin/run_tests does it) and the graph suite leaves
them out (`pytest tests --ignore=tests/keras`).

Tests marked `@pytest.mark.slow` (real networks at full input size, the whole
deployment model set) run only with TF1PRUNE_FULL=1 (`bin/run_tests --full`):
the default run, which CI does, keeps a quick subset of each such check.

The documentation examples write to `tempfile.mkdtemp()` as a user would, and
TensorFlow writes autograph files there: the session points `tempfile` (and
TMPDIR, for the processes tests start) at one folder, removed when the
process exits (after TensorFlow's own exit handlers, which delete their
files in it). pytest's own `tmp_path` folders stay where pytest keeps them.
"""

import atexit
import logging
import os
import shutil
import tempfile

import pytest
import tensorflow.compat.v1 as tf

tf.logging.set_verbosity(tf.logging.ERROR)

FULL = os.environ.get('TF1PRUNE_FULL') == '1'


_SCRATCH = []


def pytest_configure(config):
  config.addinivalue_line(
      'markers', 'slow: minutes or GBs; runs only with TF1PRUNE_FULL=1')
  os.environ.setdefault('PYTEST_DEBUG_TEMPROOT', tempfile.gettempdir())
  scratch = tempfile.mkdtemp(prefix='tf1prune-tests-')
  # Exit handlers run last registered first: this one after TensorFlow's.
  atexit.register(shutil.rmtree, scratch, ignore_errors=True)
  _SCRATCH.append((tempfile.tempdir, os.environ.get('TMPDIR')))
  tempfile.tempdir = os.environ['TMPDIR'] = scratch


def pytest_unconfigure(config):
  del config  # unused
  while _SCRATCH:
    tempdir, env = _SCRATCH.pop()
    tempfile.tempdir = tempdir
    if env is None:
      os.environ.pop('TMPDIR', None)
    else:
      os.environ['TMPDIR'] = env


def pytest_collection_modifyitems(config, items):
  del config  # unused
  if FULL:
    return
  skip = pytest.mark.skip(reason='slow: set TF1PRUNE_FULL=1 (bin/run_tests '
                          '--full) to run it')
  for item in items:
    if 'slow' in item.keywords:
      item.add_marker(skip)


@pytest.fixture
def other_python():
  """The interpreter of the other TF stack (set by bin/run_tests), or skip."""
  path = os.environ.get('TF1PRUNE_OTHER_PYTHON')
  if not path or not os.path.exists(path):
    pytest.skip('TF1PRUNE_OTHER_PYTHON is not set: run bin/run_tests for the '
                'cross-version checks')
  return path


@pytest.fixture
def tf_warnings():
  """Captures tf.logging messages at WARNING and above."""
  records = []

  class Handler(logging.Handler):

    def emit(self, record):
      records.append(record.getMessage())

  logger = tf.get_logger()
  handler = Handler(logging.WARNING)
  old = tf.logging.get_verbosity()
  tf.logging.set_verbosity(tf.logging.WARN)
  logger.addHandler(handler)
  try:
    yield records
  finally:
    logger.removeHandler(handler)
    tf.logging.set_verbosity(old)
