"""Tests of tf1prune.graph: masked layers, cells, batch norm, scopes, locks."""
