"""Tests of tf1prune.masks: the mask math against NumPy references."""
