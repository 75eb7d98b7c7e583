"""tf1prune.keras.shrink has exactly these modules (their docstring examples
run with the rest of tf1prune.keras's, in test_docs.py)."""

import pkgutil

from tests.support.keras_models import skip_unless_usable

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

