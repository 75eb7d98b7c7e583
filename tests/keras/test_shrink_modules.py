"""The docstring examples of tf1prune.keras.shrink's modules run (Keras 3:
they `import keras`)."""

import doctest
import importlib
import pkgutil

import pytest

from tests.support.keras_models import keras_module, skip_unless_usable

skip_unless_usable()

import tf1prune.keras.shrink  # noqa: E402

_MODULES = sorted(name for _, name, _ in pkgutil.iter_modules(
    tf1prune.keras.shrink.__path__, 'tf1prune.keras.shrink.'))


def test_every_module_is_listed():
  assert _MODULES == [
      'tf1prune.keras.shrink.%s' % m for m in (
          'borders', 'channel_walk', 'check', 'groups', 'layer_calls',
          'layer_ops', 'layer_view', 'model', 'plan', 'rebuild',
          'removed_values', 'report')]


@pytest.mark.parametrize('name', _MODULES)
def test_module_examples_run(name):
  if keras_module().__name__ != 'keras':
    pytest.skip('the docstring examples use Keras 3 (import keras)')
  module = importlib.import_module(name)
  assert '>>>' in (module.__doc__ or ''), name
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
  assert result.failed == 0, '%d of %d examples in %s failed' % (
      result.failed, result.attempted, name)
