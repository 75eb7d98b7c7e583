"""Tests of the package as a whole: docs, docstrings, API docs, packaging,
drop-in fidelity with contrib, the old import paths, bad input."""
