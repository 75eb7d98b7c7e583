"""Tests of tf1prune.keras: eager, in a pytest process of their own."""
