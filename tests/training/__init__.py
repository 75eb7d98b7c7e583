"""Tests of tf1prune.training: Pruning, coupled groups, hooks, lottery."""
