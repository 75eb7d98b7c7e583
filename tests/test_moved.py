"""Import paths that earlier docs gave keep working, as the same modules."""

import importlib

import pytest

import tf1prune
from tf1prune import _moved


@pytest.mark.parametrize('old,new', sorted(_moved.OLD_TO_NEW.items()))
def test_old_import_path_is_the_new_module(old, new):
  assert importlib.import_module(old) is importlib.import_module(new)


def test_documented_old_names_import():
  from tf1prune.graph_io import write_atomically  # pylint: disable=g-import-not-at-top
  from tf1prune.structured import Kernel  # pylint: disable=g-import-not-at-top
  from tf1prune.thresholds import magnitude_mask  # pylint: disable=g-import-not-at-top
  assert Kernel is tf1prune.masks.Kernel
  assert magnitude_mask is tf1prune.masks.magnitude_mask
  assert write_atomically is tf1prune.export.write_atomically


def test_unknown_module_still_fails():
  with pytest.raises(ImportError):
    importlib.import_module('tf1prune.no_such_module')
