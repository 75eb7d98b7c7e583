"""Graph mode, a new default graph per test: tests/support/graph_mode.py."""

from tests.support.graph_mode import graph, pytest_configure  # noqa: F401
