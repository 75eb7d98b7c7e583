"""Tests of tf1prune.export: checkpoints to stripped, frozen .pb files."""
