"""The old import paths (tf1prune/_moved.py) load the same modules as the new
ones and warn with the path to use and the release that removes them."""

import importlib
import sys
import warnings

import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune import _moved


def _fresh_import(name):
  sys.modules.pop(name, None)
  with pytest.warns(DeprecationWarning) as caught:
    module = importlib.import_module(name)
  return module, [str(w.message) for w in caught]


@pytest.mark.parametrize('old,new', sorted(_moved.OLD_TO_NEW.items()))
def test_old_import_path_is_the_new_module_and_warns(old, new):
  if new.startswith('tf1prune.keras.') and tf.__version__.startswith('1.'):
    pytest.skip('tf1prune.keras needs TensorFlow 2.x')
  module, messages = _fresh_import(old)
  assert module is importlib.import_module(new)
  expected = '%s is deprecated: import %s instead (the old path is removed ' \
             'in tf1prune %s)' % (old, _moved.public_path(new),
                                  _moved.REMOVED_IN)
  assert expected in messages


def test_public_path_names_the_package_of_a_private_module():
  assert _moved.public_path('tf1prune.masks._select') == 'tf1prune.masks'
  assert _moved.public_path('tf1prune.export.shrink.rounds') == \
      'tf1prune.export.shrink.rounds'


def test_documented_old_names_import():
  for name in ('tf1prune.graph_io', 'tf1prune.structured', 'tf1prune.thresholds'):
    sys.modules.pop(name, None)
  with pytest.warns(DeprecationWarning):
    from tf1prune.graph_io import write_atomically  # pylint: disable=g-import-not-at-top
    from tf1prune.structured import Kernel  # pylint: disable=g-import-not-at-top
    from tf1prune.thresholds import magnitude_mask  # pylint: disable=g-import-not-at-top
  assert Kernel is tf1prune.masks.Kernel
  assert magnitude_mask is tf1prune.masks.magnitude_mask
  assert write_atomically is tf1prune.export.write_atomically


def test_unknown_module_still_fails():
  with pytest.raises(ImportError):
    importlib.import_module('tf1prune.no_such_module')


def test_moved_name_warns_and_is_the_new_one():
  import tf1prune.plan.hparams
  import tf1prune.plan.spec
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    old = tf1prune.plan.hparams.validate_hparams
  assert old is tf1prune.plan.spec.validate_hparams
  assert [w.category for w in caught] == [DeprecationWarning]
  message = str(caught[0].message)
  assert 'tf1prune.plan.spec' in message and _moved.REMOVED_IN in message


def test_unknown_name_of_a_module_with_moved_names_still_fails():
  import tf1prune.plan.hparams
  with pytest.raises(AttributeError, match='no_such_name'):
    getattr(tf1prune.plan.hparams, 'no_such_name')
