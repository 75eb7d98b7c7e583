"""Pruning hyperparameters, parsed in TF1's HParams syntax.

    >>> import tf1prune
    >>> hp = tf1prune.get_pruning_hparams().parse(
    ...     'target_sparsity=0.9,do_not_prune=[logits,embed]')
    >>> hp.target_sparsity, hp.do_not_prune
    (0.9, ['logits', 'embed'])

`HParams` is a small stand-in for `tf.contrib.training.HParams`, which left with
contrib: attribute access, `.values()`, and `.parse()` with the old syntax
(comma-separated `name=value`, lists as `name=[a,b]`, each value typed after the
default). The checks of types and ranges are `tf1prune.plan.spec.PruningSpec`'s
(`tf1prune.plan.spec.validate_hparams`); `Pruning` runs them while the graph is
built. This module depends on no other module of tf1prune.
"""

import json
import numbers
import re

from tf1prune._moved import moved_names

__all__ = ['HParams', 'get_pruning_hparams']

# name=value or name=[v1,v2,...], each pair ended by a comma or the string's end.
_PAIR = re.compile(r'\s*(?P<name>[A-Za-z_]\w*)\s*=\s*'
                   r'(?:\[(?P<list>[^\]]*)\]|(?P<value>[^,\[\]]*))\s*(?:,|$)')

_TRUE = ('true', '1', 'yes')
_FALSE = ('false', '0', 'no')

_DEFAULTS = (
    ('name', 'model_pruning'),
    ('begin_pruning_step', 0),
    ('end_pruning_step', -1),
    ('weight_sparsity_map', ['']),
    ('block_dims_map', ['']),
    ('threshold_decay', 0.0),
    ('pruning_frequency', 10),
    ('nbins', 256),
    ('block_height', 1),
    ('block_width', 1),
    ('block_pooling_function', 'AVG'),
    ('initial_sparsity', 0.0),
    ('target_sparsity', 0.5),
    ('sparsity_function_begin_step', 0),
    ('sparsity_function_end_step', 100),
    ('sparsity_function_exponent', 3.0),
    ('use_tpu', False),
    ('do_not_prune', ['']),
    # tf1prune additions.
    ('threshold_method', 'exact'),
    ('granularity_map', ['']),
    ('group_importance', 'l1'),
    ('global_pruning_groups', ['']),
    # Coupled filter pruning (granularity_map value coupled_filter).
    ('channel_group_reduction', 'sum'),
    ('channel_group_min_channels', 1),
    ('channel_group_multiple', 1),
    # Pruning to a budget (tf1prune.plan.budget).
    ('budget', ''),
    ('budget_criterion', 'l2'),
    ('budget_normalization', 'mean'),
    ('budget_cost_exponent', 0.0),
    ('budget_taylor_decay', 0.9),
    ('budget_sensitivity', ''),
    ('budget_max_drop', 0.01),
    # A latency budget's table, and the runtime it is measured on.
    ('latency_table', ''),
    ('latency_runtime', 'tf'),
    ('latency_threads', 1),
    ('latency_batch', 1),
    # Zero the bias and batch norm of a removed output channel (always with
    # a budget).
    ('prune_channel_params', False),
)


def _convert(name, text, kind):
  """Converts `text` to the type `kind`, or raises ValueError."""
  text = text.strip()
  try:
    if kind is bool:
      low = text.lower()
      if low in _TRUE:
        return True
      if low in _FALSE:
        return False
      raise ValueError(text)
    if kind is int:
      return int(text)
    if kind is float:
      return float(text)
  except ValueError:
    raise ValueError('hparam %s expects a value of type %s, got %r' %
                     (name, kind.__name__, text))
  return text


def _cast(name, value, kind):
  """`value` as a `kind` (the type of the hparam), by TF1 HParams' rules: an
  integral number (NumPy's too) to int or float, a real number to float, a
  bool only to bool, a str only to str. Raises ValueError naming the hparam."""
  if type(value) is kind or kind not in (bool, int, float, str):
    return value
  fits = {bool: isinstance(value, bool),
          str: isinstance(value, str),
          int: isinstance(value, numbers.Integral),
          float: isinstance(value, numbers.Real)}[kind]
  if not fits or (kind is not bool and isinstance(value, bool)):
    raise ValueError('hparam %s expects a value of type %s, got %r (%s)' % (
        name, kind.__name__, value, type(value).__name__))
  return kind(value)


class HParams(object):
  """A set of named, typed hyperparameters.

  Args:
    **defaults: name -> default value (bool, int, float, str or list of str).
      The default's type fixes the type every later value must have.
  """

  def __init__(self, **defaults):
    self._names = []
    self._kinds = {}     # name -> (type of the value or of its items, is list)
    for name, value in defaults.items():
      self.add_hparam(name, value)

  def values(self):
    """Returns a dict name -> current value (lists copied)."""
    return {n: (list(v) if isinstance(v, list) else v)
            for n, v in ((n, getattr(self, n)) for n in self._names)}

  def add_hparam(self, name, value):
    """Adds a new hyperparameter, typed after `value` (a list: after its
    first item, str if empty); raises ValueError if it exists already."""
    if name in self._names:
      raise ValueError('hparam %s already exists' % name)
    is_list = isinstance(value, list)
    first = (value[0] if value else '') if is_list else value
    self._names.append(name)
    self._kinds[name] = (type(first), is_list)
    setattr(self, name, list(value) if is_list else value)

  def set_hparam(self, name, value):
    """Sets an existing hyperparameter, cast to its type as TF1's `HParams`
    casts (an int widens to float, nothing else changes kind).

    Raises:
      ValueError: `name` is unknown, a list is given for a single value or
        the reverse, or the value is of another kind.
    """
    if name not in self._names:
      raise ValueError('unknown hparam %s; known: %s' %
                       (name, ', '.join(sorted(self._names))))
    kind, is_list = self._kinds[name]
    if isinstance(value, list) != is_list:
      raise ValueError('hparam %s takes %s, got %r' % (
          name, 'a list of %s' % kind.__name__ if is_list else
          'a single %s' % kind.__name__, value))
    setattr(self, name, [_cast(name, v, kind) for v in value] if is_list
            else _cast(name, value, kind))

  def del_hparam(self, name):
    """Removes hyperparameter `name`, if there is one."""
    if name in self._names:
      self._names.remove(name)
      del self._kinds[name]
      delattr(self, name)

  def parse(self, text):
    """Updates values from `name=value,name=[a,b]` and returns self.

    Raises:
      ValueError: `text` is malformed, names an unknown hparam, or gives a
        value that does not convert to the default's type.
    """
    pos, seen = 0, set()
    text = text or ''
    while pos < len(text.rstrip()):
      match = _PAIR.match(text, pos)
      if not match:
        raise ValueError('cannot parse hparams %r at position %d (%r); expected '
                         'name=value or name=[a,b], comma separated' %
                         (text, pos, text[pos:pos + 20]))
      pos = match.end()
      name = match.group('name')
      if name not in self._names:
        raise ValueError('unknown hparam %s in %r; known: %s' %
                         (name, text, ', '.join(sorted(self._names))))
      if name in seen:
        raise ValueError('hparam %s is set twice in %r: give it once' %
                         (name, text))
      seen.add(name)
      kind, is_list = self._kinds[name]
      items = match.group('list')
      if is_list:
        raw = items if items is not None else match.group('value')
        value = [v.strip() for v in raw.split(',')] if raw.strip() else ['']
      elif items is not None:
        raise ValueError('hparam %s takes a single %s, got the list [%s]' %
                         (name, kind.__name__, items))
      else:
        value = _convert(name, match.group('value'), kind)
      setattr(self, name, value)
    return self

  # The rest of TF1 HParams' interface that scripts use.

  def override_from_dict(self, values_dict):
    """Sets each existing hparam of `values_dict`; returns self."""
    for name, value in values_dict.items():
      self.set_hparam(name, value)
    return self

  def get(self, key, default=None):
    """Returns the value of hparam `key`, or `default` if there is none."""
    return getattr(self, key) if key in self._names else default

  def to_json(self, indent=None, separators=None, sort_keys=False):
    """Returns the values as a JSON object string."""
    return json.dumps(self.values(), indent=indent, separators=separators,
                      sort_keys=sort_keys)

  def __contains__(self, key):
    return key in self._names

  def __repr__(self):
    return 'HParams(%s)' % ', '.join(
        '%s=%r' % (n, getattr(self, n)) for n in self._names)


def get_pruning_hparams():
  """Returns an `HParams` with every pruning hyperparameter at its default.

  The names, defaults and meanings are those of contrib's model_pruning (see
  docs/hparams.md). tf1prune adds `threshold_method`: 'exact'
  (default; the exact k-th largest magnitude) or 'histogram' (the old estimate
  from an `nbins`-bin histogram), the structured-pruning hparams
  (`granularity_map`, `group_importance`, `global_pruning_groups`) and those of
  coupled filter pruning (`channel_group_reduction`: 'sum', 'mean' or 'max';
  `channel_group_min_channels`; `channel_group_multiple`; see
  docs/channel_groups.md) and those of pruning to a budget (`budget`,
  `budget_criterion`, `budget_normalization`, `budget_taylor_decay`; see
  docs/budget.md).
  """
  return HParams(**dict((n, list(v) if isinstance(v, list) else v)
                        for n, v in _DEFAULTS))


# `validate_hparams` is in `tf1prune.plan.spec` (which imports this module);
# its old path here warns and loads it from there.
__getattr__ = moved_names(__name__)
