"""Graph mode for a folder of graph-mode tests: its conftest.py imports this.

    from tests.support.graph_mode import graph, pytest_configure  # noqa: F401

pytest calls a conftest's `pytest_configure` as soon as it loads the
conftest, before it imports the folder's test modules, so their
module-level code (a tensor in a parametrize list) builds into a graph too;
`graph` gives each test a new default graph. Every folder of tests/ but
keras/ has such a conftest.py: the Keras tests need eager mode, which cannot
be turned back on in a process that ran graph-mode code, so they run in a
pytest process of their own (tests/keras/conftest.py).
"""

import pytest
import tensorflow.compat.v1 as tf


def pytest_configure(config):
  del config  # unused
  tf.disable_eager_execution()


@pytest.fixture(autouse=True)
def graph():
  """Each test builds into its own new graph."""
  with tf.Graph().as_default() as g:
    yield g
