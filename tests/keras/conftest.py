"""Setup of the Keras tests: eager mode, a cleared Keras session per test.

The Keras tests need eager execution, which tests/conftest.py turns off for
the graph-mode suite in its `graph_mode` and `graph` fixtures: this file
overrides both. Eager mode cannot be turned back on in a process that ran
graph-mode tests, so these tests run in a pytest process of their own
(`pytest tests/keras`; bin/run_tests does it); where graph-mode tests ran
first in the same process, they skip.
"""

import pytest
import tensorflow as tf

from tests.support import keras_models


@pytest.fixture(scope='session', autouse=True)
def graph_mode():
  """Overrides the graph-mode setup: the process stays eager."""


@pytest.fixture(autouse=True)
def graph():
  """No default graph: a new Keras session for each test (TF 2.x)."""
  if keras_models.TF2:
    if not tf.executing_eagerly():
      pytest.skip(keras_models.REASON_GRAPH)
    keras_models.keras_module().backend.clear_session()
  yield None
