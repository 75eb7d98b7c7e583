"""Tests of tf1prune.deploy: the deployment check."""
