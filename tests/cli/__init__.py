"""Tests of tf1prune.cli: the console scripts and bin/ wrappers."""
