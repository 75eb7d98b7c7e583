"""Import paths of earlier releases, kept working.

Earlier docs told users to import `tf1prune.structured`, `tf1prune.thresholds`,
`tf1prune.graph_io`, ... ; those modules now live in `tf1prune.masks`,
`tf1prune.export` and `tf1prune.cli`. `install()` (run once by
`tf1prune/__init__.py`) adds an import finder that answers only for the old
names below, loading the new module under the old name.

    >>> import tf1prune.structured, tf1prune.masks._structured as new
    >>> tf1prune.structured is new
    True
"""

import importlib
import importlib.abc
import importlib.util
import sys

OLD_TO_NEW = {
    'tf1prune.checkpoint_prune': 'tf1prune.export._checkpoint_prune',
    'tf1prune.freeze': 'tf1prune.export._freeze',
    'tf1prune.global_pruning': 'tf1prune.masks._global',
    'tf1prune.granularity': 'tf1prune.masks._granularity',
    'tf1prune.graph_io': 'tf1prune.export._graph_io',
    'tf1prune.report': 'tf1prune.export._report',
    'tf1prune.resources': 'tf1prune.export._resources',
    'tf1prune.shrink': 'tf1prune.export._shrink',
    'tf1prune.shrink_border': 'tf1prune.export._shrink_border',
    'tf1prune.shrink_graph': 'tf1prune.export._shrink_graph',
    'tf1prune.shrink_report': 'tf1prune.export._shrink_report',
    'tf1prune.strip': 'tf1prune.export._strip',
    'tf1prune.strip_cli': 'tf1prune.cli.strip_pruning_vars',
    'tf1prune.structured': 'tf1prune.masks._structured',
    'tf1prune.thresholds': 'tf1prune.masks._select',
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds an old module name; loading it returns the new module."""

  def find_spec(self, fullname, path=None, target=None):
    del path, target  # The old names are fixed; nothing else is searched.
    if fullname not in OLD_TO_NEW:
      return None
    return importlib.util.spec_from_loader(fullname, self)

  def create_module(self, spec):
    return importlib.import_module(OLD_TO_NEW[spec.name])

  def exec_module(self, module):
    del module  # Already executed under its new name.


def install():
  """Adds the finder to `sys.meta_path` once."""
  if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.append(_Alias())
