"""Test setup: graph mode, and a fresh default graph for every test."""

import os

import pytest
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
tf.logging.set_verbosity(tf.logging.ERROR)


@pytest.fixture(autouse=True)
def graph():
  """Each test builds into its own new graph."""
  with tf.Graph().as_default() as g:
    yield g


@pytest.fixture
def other_python():
  """The interpreter of the other TF stack (set by bin/run_tests), or skip."""
  path = os.environ.get('TF1PRUNE_OTHER_PYTHON')
  if not path or not os.path.exists(path):
    pytest.skip('TF1PRUNE_OTHER_PYTHON is not set: run bin/run_tests for the '
                'cross-version checks')
  return path
