"""Tests of cifar10_example/: input, model, scripts, demo."""
