"""Tests of tf1prune.export.shrink: smaller frozen graphs, same outputs."""
