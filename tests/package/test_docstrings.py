"""Every example in a tf1prune module docstring runs and prints what it says.

So do those of cifar10_example/ and of the test helpers in tests/support/.
"""

import doctest
import importlib
import os
import pkgutil

import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support.checkout import SUPPORT

_MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(tf1prune.__path__, 'tf1prune.')
    if not name.startswith('tf1prune.keras'))


def _run_examples(name):
  module = importlib.import_module(name)
  with tf.Graph().as_default():
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
  assert result.failed == 0, '%d of %d examples in %s failed' % (
      result.failed, result.attempted, name)


@pytest.mark.parametrize('name', _MODULES)
def test_module_examples_run(name):
  _run_examples(name)


def test_every_module_docstring_opens_with_an_example():
  missing = [name for name in _MODULES
             if '>>>' not in (importlib.import_module(name).__doc__ or '')]
  assert not missing, 'module docstrings without an example: %s' % missing


def _example_modules():
  import cifar10_example  # pylint: disable=g-import-not-at-top
  return sorted(name for _, name, _ in pkgutil.walk_packages(
      cifar10_example.__path__, 'cifar10_example.'))


@pytest.mark.parametrize('name', _example_modules())
def test_example_module_examples_run(name):
  """cifar10_example runs from the checkout; its `>>>` examples run too."""
  _run_examples(name)


def _support_modules():
  """The modules of tests/support/ with an example (read, not imported)."""
  found = []
  for _, name, _ in pkgutil.iter_modules([SUPPORT]):
    with open(os.path.join(SUPPORT, name + '.py')) as f:
      if '>>>' in f.read():
        found.append('tests.support.' + name)
  return sorted(found)


@pytest.mark.parametrize('name', _support_modules())
def test_support_module_examples_run(name):
  _run_examples(name)
