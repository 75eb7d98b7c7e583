"""Tests of tf1prune.channels: the op table, channel groups, the views."""
