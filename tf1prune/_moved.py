"""Deprecated import paths, kept working with a DeprecationWarning.

Modules such as `tf1prune.structured`, `tf1prune.thresholds` and
`tf1prune.graph_io` are deprecated paths of modules in `tf1prune.masks`,
`tf1prune.export`, `tf1prune.cli` and the other subpackages.
`install()` (run once by `tf1prune/__init__.py`) adds an import finder that
answers only for the old names below: importing one warns with the new path
and the release that removes the old one, and gives the new module itself.

    >>> import sys, warnings
    >>> _ = sys.modules.pop('tf1prune.structured', None)   # imported once
    >>> with warnings.catch_warnings(record=True) as caught:
    ...   warnings.simplefilter('always')
    ...   import tf1prune.structured, tf1prune.masks._structured as new
    >>> tf1prune.structured is new
    True
    >>> print(caught[0].message)    # doctest: +ELLIPSIS
    tf1prune.structured is deprecated: import tf1prune.masks instead ...
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

REMOVED_IN = '0.4'

# old module -> the module that holds its code (`public_path` gives what to
# import instead).
OLD_TO_NEW = {
    'tf1prune.checkpoint_prune': 'tf1prune.export.checkpoint_prune',
    'tf1prune.freeze': 'tf1prune.export._freeze',
    'tf1prune.global_pruning': 'tf1prune.masks._global',
    'tf1prune.granularity': 'tf1prune.masks._granularity',
    'tf1prune.graph_io': 'tf1prune.export.graph_io',
    'tf1prune.report': 'tf1prune.export._report',
    'tf1prune.resources': 'tf1prune.export.resources',
    'tf1prune.shrink': 'tf1prune.export.shrink.rounds',
    'tf1prune.shrink_border': 'tf1prune.export.shrink.padding',
    'tf1prune.shrink_graph': 'tf1prune.export.shrink.frozen_graph',
    'tf1prune.shrink_report': 'tf1prune.export.shrink.report',
    'tf1prune.strip': 'tf1prune.export._strip',
    'tf1prune.strip_cli': 'tf1prune.cli.strip_pruning_vars',
    'tf1prune.structured': 'tf1prune.masks._structured',
    'tf1prune.thresholds': 'tf1prune.masks._select',
    # Private export module names; the shrink modules are `export.shrink`.
    'tf1prune.export._atomic': 'tf1prune.export.atomic',
    'tf1prune.export._attrs': 'tf1prune.export.attrs',
    'tf1prune.export._checkpoint_prune': 'tf1prune.export.checkpoint_prune',
    'tf1prune.export._graph_index': 'tf1prune.export.graph_index',
    'tf1prune.export._graph_io': 'tf1prune.export.graph_io',
    'tf1prune.export._names': 'tf1prune.export.names',
    'tf1prune.export._resources': 'tf1prune.export.resources',
    'tf1prune.export._shrink': 'tf1prune.export.shrink.rounds',
    'tf1prune.export._shrink_apply': 'tf1prune.export.shrink.rewrite',
    'tf1prune.export._shrink_border': 'tf1prune.export.shrink.padding',
    'tf1prune.export._shrink_channels': 'tf1prune.export.shrink.extra_channels',
    'tf1prune.export._shrink_graph': 'tf1prune.export.shrink.frozen_graph',
    'tf1prune.export._shrink_prepare': 'tf1prune.export.shrink.prepare',
    'tf1prune.export._shrink_region': 'tf1prune.export.shrink.regions',
    'tf1prune.export._shrink_report': 'tf1prune.export.shrink.report',
    'tf1prune.export._shrink_values': 'tf1prune.export.shrink.removed_values',
    'tf1prune.export._stream': 'tf1prune.export.stream',
    'tf1prune.export._table': 'tf1prune.export.table',
    # Flat modules of the package, in the subpackages by concept.
    'tf1prune.channel_groups': 'tf1prune.channels.training_graph',
    'tf1prune.hooks': 'tf1prune.training.hooks',
    'tf1prune.hparams': 'tf1prune.plan.hparams',
    'tf1prune.layers': 'tf1prune.graph.layers',
    'tf1prune.locks': 'tf1prune.graph.locks',
    'tf1prune.lottery': 'tf1prune.training.lottery',
    'tf1prune.masking': 'tf1prune.graph.masking',
    'tf1prune.normalization': 'tf1prune.graph.batch_norm',
    'tf1prune.patch': 'tf1prune.graph.scopes',
    'tf1prune.plan_ops': 'tf1prune.plan.mask_update',
    'tf1prune.preview': 'tf1prune.training.preview',
    'tf1prune.regex_maps': 'tf1prune.plan.regex_maps',
    'tf1prune.rnn_cells': 'tf1prune.graph.rnn_cells',
    'tf1prune.rnn_wrappers': 'tf1prune.graph.rnn_wrappers',
    'tf1prune.schedule': 'tf1prune.plan.schedule',
    'tf1prune.slim_compat': 'tf1prune.graph.slim_compat',
    'tf1prune.spec': 'tf1prune.plan.spec',
    'tf1prune._coupled_pruning': 'tf1prune.training.coupled',
    'tf1prune._gate': 'tf1prune.graph.conditional',
    'tf1prune._spec_view': 'tf1prune.training.contrib_spec',
    'tf1prune.export.shrink.run': 'tf1prune.export.shrink.rounds',
    'tf1prune.keras._shrink': 'tf1prune.keras.shrink.model',
    'tf1prune.keras._shrink_borders': 'tf1prune.keras.shrink.borders',
    'tf1prune.keras._shrink_build': 'tf1prune.keras.shrink.rebuild',
    'tf1prune.keras._shrink_plan': 'tf1prune.keras.shrink.plan',
    'tf1prune.keras._shrink_report': 'tf1prune.keras.shrink.report',
    'tf1prune.keras._shrink_values': 'tf1prune.keras.shrink.removed_values',
    'tf1prune.keras._shrink_view': 'tf1prune.keras.shrink.layer_calls',
    # The Keras shrink's modules before it became a view of tf1prune.channels.
    'tf1prune.keras.shrink.layers': 'tf1prune.keras.shrink.layer_calls',
    'tf1prune.keras.shrink.values': 'tf1prune.keras.shrink.removed_values',
}

# module -> {name that moved out of it: the module that holds it}.
# Each module listed defines `__getattr__ = moved_names(__name__)`.
OLD_NAMES = {
    'tf1prune.export.checkpoint_prune': {
        name: 'tf1prune.cli.checkpoint_flags'
        for name in ('parse_index', 'parse_sparsity_map', 'parse_zero')},
    'tf1prune.plan.hparams': {'validate_hparams': 'tf1prune.plan.spec'},
}


def public_path(new):
  """The path a user should import instead: the module, or its package when
  the module is private (`tf1prune.masks._select` -> `tf1prune.masks`)."""
  parts = new.split('.')
  while parts[-1].startswith('_'):
    parts.pop()
  return '.'.join(parts)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds an old module name; loading it warns and returns the new module."""

  def find_spec(self, fullname, path=None, target=None):
    del path, target  # The old names are fixed; nothing else is searched.
    if fullname not in OLD_TO_NEW:
      return None
    return importlib.util.spec_from_loader(fullname, self)

  def create_module(self, spec):
    new = OLD_TO_NEW[spec.name]
    warnings.warn(
        '%s is deprecated: import %s instead (the old path is removed in '
        'tf1prune %s)' % (spec.name, public_path(new), REMOVED_IN),
        DeprecationWarning, stacklevel=3)
    return importlib.import_module(new)

  def exec_module(self, module):
    del module  # Already executed under its new name.


def moved_names(module):
  """A module `__getattr__` that gives, with a DeprecationWarning, the names
  `OLD_NAMES[module]` lists from their new module (imported on first use, so
  that the old module need not import it: no import circle)."""
  moved = OLD_NAMES[module]

  def getattr_(name):
    if name not in moved:
      raise AttributeError('module %r has no attribute %r' % (module, name))
    warnings.warn(
        '%s.%s is deprecated: import it from %s instead (the old path is '
        'removed in tf1prune %s)' % (module, name, moved[name], REMOVED_IN),
        DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(moved[name]), name)
  return getattr_


def install():
  """Adds the finder to `sys.meta_path` once."""
  if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.append(_Alias())
