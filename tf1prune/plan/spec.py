"""The pruning spec: every hyperparameter parsed and validated once.

    >>> import tf1prune
    >>> spec = tf1prune.PruningSpec.from_hparams(tf1prune.get_pruning_hparams(
    ...     ).parse('weight_sparsity_map=[fc:0.8],granularity_map=[conv:filter],'
    ...             'do_not_prune=[logits]'))
    >>> spec.weight('conv1/weights')
    WeightSpec(name='conv1/weights', pruned=True, target_sparsity=None, granularity=Filter('l1'), group=None)
    >>> spec.weight('fc1/weights').target_sparsity, spec.weight('logits/w').pruned
    (0.8, False)

`PruningSpec.from_hparams(hparams)` checks every hparam of
`get_pruning_hparams()` (present, of its default's type, in range), compiles
the regex lists (`do_not_prune`, `weight_sparsity_map`, `block_dims_map`,
`granularity_map`, `global_pruning_groups`) and builds the schedule
(`tf1prune.plan.schedule.PolynomialDecaySparsity`). The result is immutable and
holds no tensors. `spec.plan()` is its `tf1prune.plan.PruningPlan`, which
decides per weight (`spec.weight(name)` is `plan.weight`): is it pruned, its
own target sparsity (None: the global schedule's), its granularity object
(`tf1prune.masks`) and its global pruning group. A weight matched twice by one
list, or given conflicting settings, is refused there. `Pruning` and the Keras
`Pruner` parse the hparams once; nothing else reads them.
"""

import collections
import numbers
import re

from tf1prune.plan.budget import CRITERIA, NORMALIZATIONS, parse_budget
from tf1prune.plan.hparams import _DEFAULTS, HParams, get_pruning_hparams
from tf1prune.masks import (IMPORTANCES, NM, REDUCTIONS, ChannelBlock,
                            CoupledFilter, Element, Filter, InputChannel,
                            Kernel)
from tf1prune.plan.pruning_plan import PruningPlan, WeightSpec
from tf1prune.plan.regex_maps import RegexList, RegexMap
from tf1prune.plan.schedule import PolynomialDecaySparsity

__all__ = ['GranularitySpec', 'PruningSpec', 'WeightSpec',
           'granularity_from_string', 'parse_granularity', 'validate_hparams']


# ---------------------------------------------------------------- values


def _sparsity_value(text):
  value = float(text)
  if not 0.0 <= value < 1.0:
    raise ValueError('sparsity must be in [0, 1), got %s' % text)
  return value


def _block_dims(text):
  parts = text.lower().split('x')
  if len(parts) != 2:
    raise ValueError("block dims must look like 'HxW', got %r" % text)
  dims = tuple(int(p) for p in parts)
  if any(d != -1 and d < 1 for d in dims):
    raise ValueError('block dims must be >= 1 or -1, got %r' % text)
  return dims


class GranularitySpec(collections.namedtuple('GranularitySpec',
                                             ['kind', 'args', 'frozen'])):
  """A parsed `granularity_map` value; `build()` makes the granularity."""

  def build(self, importance='l1', previous_mask=None,
            channel_groups=('sum', 1, 1)):
    """Returns the `tf1prune.masks` granularity for this value.

    Args:
      importance: 'l1', 'l2' or 'max' (ignored by element and N:M).
      previous_mask: the weight's mask variable; needed for frozen N:M.
      channel_groups: (reduction, min_channels, multiple) of `coupled_filter`.

    Raises:
      ValueError: frozen N:M without `previous_mask`, or a bad importance.
    """
    if self.kind == 'element':
      return Element()
    if self.kind == 'nm':
      if self.frozen and previous_mask is None:
        raise ValueError('frozen N:M needs previous_mask, the mask variable')
      return NM(self.args[0], self.args[1],
                previous_mask if self.frozen else None)
    if self.kind == 'block':
      return ChannelBlock(self.args, importance)
    if self.kind == 'coupled_filter':
      return CoupledFilter(importance, *channel_groups)
    return {'kernel': Kernel, 'filter': Filter,
            'input_channel': InputChannel}[self.kind](importance)


_NM = re.compile(r'^(\d+)of(\d+)(_frozen)?$')
_BLOCK = re.compile(r'^block(-?\d+(?:x-?\d+)+)$')
_SIMPLE = ('element', 'kernel', 'filter', 'input_channel', 'coupled_filter')


def parse_granularity(text):
  """Parses one `granularity_map` value into a `GranularitySpec`.

  Values: `element`, `kernel`, `filter`, `input_channel`, `block<H>x<W>`
  (or one size per axis, `block1x1x4x4`; -1 is the whole axis), `<N>of<M>` and
  `<N>of<M>_frozen` (N:M along the inputs, e.g. `2of4`), `coupled_filter`
  (filters pruned per coupled channel group, docs/channel_groups.md).

  Raises:
    ValueError: `text` is none of these.
  """
  value = text.strip().lower()
  if value in _SIMPLE:
    return GranularitySpec(value, (), False)
  match = _NM.match(value)
  if match:
    n, m = int(match.group(1)), int(match.group(2))
    NM(n, m)  # validates
    return GranularitySpec('nm', (n, m), bool(match.group(3)))
  match = _BLOCK.match(value)
  if match:
    dims = tuple(int(d) for d in match.group(1).split('x'))
    ChannelBlock(dims)  # validates
    return GranularitySpec('block', dims, False)
  raise ValueError(
      'unknown granularity %r; use element, kernel, filter, input_channel, '
      'block<H>x<W> (e.g. block4x4), <N>of<M> or <N>of<M>_frozen (e.g. 2of4), '
      'or coupled_filter' % text)


def granularity_from_string(text, importance='l1', previous_mask=None):
  """Returns the granularity named by `text` (see `parse_granularity`)."""
  return parse_granularity(text).build(importance, previous_mask)


# ---------------------------------------------------------------- checks


def _check(ok, message, *args):
  if not ok:
    raise ValueError(message % args)


def _is_int(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _type_problem(value, default):
  """Returns the type `value` should have (like `default`), or None if it fits."""
  if isinstance(default, bool):
    return None if isinstance(value, bool) else 'a bool'
  if isinstance(default, int):
    return None if _is_int(value) else 'an int'
  if isinstance(default, float):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    return None if ok else 'a float'
  if isinstance(default, str):
    return None if isinstance(value, str) else 'a str'
  if isinstance(default, list):
    ok = isinstance(value, (list, tuple)) and all(isinstance(v, str)
                                                  for v in value)
    return None if ok else "a list of str (e.g. ['conv1'])"
  return None


def _check_types(hp):
  """Raises ValueError for a missing hparam or one of the wrong type."""
  if isinstance(hp, str) or not hasattr(hp, 'values'):
    raise ValueError('spec must be an hparams object from get_pruning_hparams(), '
                     'got %r; parse text with get_pruning_hparams().parse(...)'
                     % (hp,))
  for name, default in _DEFAULTS:
    if not hasattr(hp, name):
      raise ValueError('spec has no hparam %s; start from get_pruning_hparams()'
                       % name)
    value = getattr(hp, name)
    expected = _type_problem(value, default)
    _check(expected is None, '%s must be %s, got %r (%s)', name, expected,
           value, type(value).__name__)
  _check(hp.name, 'name must be a non-empty str, got %r', hp.name)


def _check_ranges(hp):
  """Raises ValueError for the first hparam out of its range.

  Returns:
    The `PolynomialDecaySparsity` of the hparams, which checks its own.
  """
  _check(hp.begin_pruning_step >= 0,
         'begin_pruning_step must be >= 0, got %d', hp.begin_pruning_step)
  _check(hp.end_pruning_step == -1 or hp.end_pruning_step > hp.begin_pruning_step,
         'end_pruning_step must be -1 (never stop) or > begin_pruning_step=%d, '
         'got %d', hp.begin_pruning_step, hp.end_pruning_step)
  _check(hp.pruning_frequency >= 1,
         'pruning_frequency must be >= 1, got %d', hp.pruning_frequency)
  _check(hp.nbins >= 2, 'nbins must be >= 2, got %d', hp.nbins)
  for name in ('block_height', 'block_width'):
    value = getattr(hp, name)
    _check(value == -1 or value >= 1,
           '%s must be >= 1 or -1 (the whole dimension), got %d', name, value)
  _check(0.0 <= hp.threshold_decay < 1.0,
         'threshold_decay must be in [0, 1), got %r', hp.threshold_decay)
  schedule = PolynomialDecaySparsity.from_hparams(hp)
  _check(hp.block_pooling_function in ('AVG', 'MAX'),
         "block_pooling_function must be 'AVG' or 'MAX', got %r",
         hp.block_pooling_function)
  _check(hp.threshold_method in ('exact', 'histogram'),
         "threshold_method must be 'exact' or 'histogram', got %r",
         hp.threshold_method)
  _check(hp.group_importance in IMPORTANCES,
         "group_importance must be 'l1', 'l2' or 'max', got %r",
         hp.group_importance)
  _check(hp.channel_group_reduction in REDUCTIONS,
         "channel_group_reduction must be 'sum', 'mean' or 'max', got %r",
         hp.channel_group_reduction)
  _check(hp.channel_group_min_channels >= 0,
         'channel_group_min_channels must be >= 0 (0: a group may lose every '
         'channel), got %d', hp.channel_group_min_channels)
  _check(hp.channel_group_multiple >= 1,
         'channel_group_multiple must be >= 1 (1: no rounding; 8, 16 or 32 '
         'for accelerators), got %d', hp.channel_group_multiple)
  _check(hp.budget_criterion in CRITERIA,
         "budget_criterion must be 'l1', 'l2', 'taylor' or 'bn_scale', got %r",
         hp.budget_criterion)
  _check(hp.budget_normalization in NORMALIZATIONS,
         "budget_normalization must be 'mean', 'max' or 'none', got %r",
         hp.budget_normalization)
  _check(0.0 <= hp.budget_cost_exponent <= 2.0,
         'budget_cost_exponent must be in [0, 2] (1: importance per unit of '
         'cost saved, 0: importance alone), got %r', hp.budget_cost_exponent)
  _check(0.0 <= hp.budget_taylor_decay < 1.0,
         'budget_taylor_decay must be in [0, 1), got %r',
         hp.budget_taylor_decay)
  _check(hp.latency_runtime in ('tf', 'tflite'),
         "latency_runtime must be 'tf' (a TF session) or 'tflite' (the TFLite "
         "interpreter), got %r", hp.latency_runtime)
  _check(hp.latency_threads >= 1, 'latency_threads must be >= 1, got %d',
         hp.latency_threads)
  _check(hp.latency_batch >= 1, 'latency_batch must be >= 1, got %d',
         hp.latency_batch)
  _check(hp.budget_max_drop >= 0.0,
         'budget_max_drop must be >= 0 (how much worse than the baseline the '
         'sensitivity metric may get), got %r', hp.budget_max_drop)
  return schedule


# ---------------------------------------------------------------- the spec


_Spec = collections.namedtuple('PruningSpec', [
    'name', 'begin_pruning_step', 'end_pruning_step', 'pruning_frequency',
    'schedule', 'threshold_method', 'threshold_decay', 'nbins',
    'group_importance', 'channel_groups', 'block', 'do_not_prune',
    'weight_sparsity_map', 'budget', 'budget_criterion',
    'budget_normalization', 'budget_cost_exponent', 'budget_taylor_decay',
    'budget_sensitivity',
    'budget_max_drop', 'latency_table', 'latency_runtime', 'latency_threads',
    'latency_batch', 'prune_channel_params',
    'block_dims_map', 'granularity_map', 'global_pruning_groups', 'hparams'])


class PruningSpec(_Spec):
  """The parsed hparams (immutable); build one with `from_hparams`.

  Attributes:
    name, begin_pruning_step, end_pruning_step, pruning_frequency,
      threshold_method, threshold_decay, nbins, group_importance: the hparams.
    channel_groups: (reduction, min_channels, multiple) of
      `channel_group_reduction`, `channel_group_min_channels`,
      `channel_group_multiple` (the `coupled_filter` granularity's).
    schedule: the `PolynomialDecaySparsity` of the `sparsity_function_*`,
      `initial_sparsity` and `target_sparsity` hparams.
    block: (height, width, pooling) of `block_height`, `block_width`,
      `block_pooling_function`.
    do_not_prune, global_pruning_groups: `tf1prune.plan.regex_maps.RegexList`s.
    budget: the `tf1prune.plan.budget.Budget` of the `budget` hparam, or
      None; budget_criterion, budget_normalization, budget_taylor_decay,
      budget_sensitivity, budget_max_drop, latency_table, latency_runtime,
      latency_threads, latency_batch: the hparams;
      prune_channel_params: the hparam, True with a budget.
    weight_sparsity_map, block_dims_map, granularity_map:
      `tf1prune.plan.regex_maps.RegexMap`s of floats, (H, W) pairs and
      `GranularitySpec`s.
    hparams: tuple of (name, value) pairs of every hparam, sorted.
  """

  __slots__ = ()

  @classmethod
  def from_hparams(cls, hparams=None):
    """Returns the spec of `hparams` (None: `get_pruning_hparams()`).

    Raises:
      ValueError: an hparam is missing, of the wrong type, out of range, or a
        list entry is malformed; the message names it, the value and the fix.
    """
    hp = get_pruning_hparams() if hparams is None else hparams
    _check_types(hp)
    schedule = _check_ranges(hp)
    return cls(
        name=hp.name, begin_pruning_step=hp.begin_pruning_step,
        end_pruning_step=hp.end_pruning_step,
        pruning_frequency=hp.pruning_frequency, schedule=schedule,
        threshold_method=hp.threshold_method,
        threshold_decay=float(hp.threshold_decay), nbins=hp.nbins,
        group_importance=hp.group_importance,
        channel_groups=(hp.channel_group_reduction,
                        hp.channel_group_min_channels,
                        hp.channel_group_multiple),
        block=(hp.block_height, hp.block_width, hp.block_pooling_function),
        global_pruning_groups=RegexList('global_pruning_groups',
                                        hp.global_pruning_groups),
        weight_sparsity_map=RegexMap('weight_sparsity_map',
                                     hp.weight_sparsity_map, _sparsity_value),
        block_dims_map=RegexMap('block_dims_map', hp.block_dims_map,
                                _block_dims),
        granularity_map=RegexMap('granularity_map', hp.granularity_map,
                                 parse_granularity),
        do_not_prune=RegexList('do_not_prune', hp.do_not_prune),
        budget=parse_budget(hp.budget),
        budget_criterion=hp.budget_criterion,
        budget_normalization=hp.budget_normalization,
        budget_cost_exponent=float(hp.budget_cost_exponent),
        budget_taylor_decay=float(hp.budget_taylor_decay),
        budget_sensitivity=hp.budget_sensitivity,
        budget_max_drop=float(hp.budget_max_drop),
        latency_table=hp.latency_table, latency_runtime=hp.latency_runtime,
        latency_threads=hp.latency_threads, latency_batch=hp.latency_batch,
        prune_channel_params=bool(hp.prune_channel_params or hp.budget),
        hparams=tuple(sorted(
            (n, tuple(v) if isinstance(v, (list, tuple)) else v)
            for n, v in hp.values().items())))

  @property
  def target_sparsity(self):
    """The global target sparsity (the schedule's)."""
    return self.schedule.target_sparsity

  def values(self):
    """Returns a dict name -> value of the hparams (lists as lists)."""
    return {n: list(v) if isinstance(v, tuple) else v for n, v in self.hparams}

  def to_hparams(self):
    """Returns a new `HParams` holding the values this spec was parsed from."""
    return HParams(**self.values())

  def plan(self):
    """Returns the `tf1prune.plan.PruningPlan` of this spec."""
    return PruningPlan(self)

  # The per-weight answers are the plan's (tf1prune.plan).

  def is_pruned(self, name, mask_name=None):
    """`PruningPlan.is_pruned`: False if `do_not_prune` matches a name."""
    return self.plan().is_pruned(name, mask_name)

  def group(self, name):
    """`PruningPlan.group`: the `global_pruning_groups` pattern, or None."""
    return self.plan().group(name)

  def granularity(self, name, previous_mask=None):
    """`PruningPlan.granularity`: the granularity object of weight `name`."""
    return self.plan().granularity(name, previous_mask)

  def weight(self, name, mask=None):
    """Returns the `WeightSpec` of weight `name` (`PruningPlan.weight`).

    Args:
      name: the weight's op name.
      mask: optional, its mask variable: `do_not_prune` also matches the
        mask's name, and frozen N:M reads the mask.

    Raises:
      ValueError: a list matches `name` twice, or its settings conflict.
    """
    return self.plan().weight(name, None if mask is None else mask.op.name,
                              mask)

  def unmatched(self, names, mask_names=()):
    """`PruningPlan.unmatched`: [(hparam, patterns)] matching no weight."""
    return self.plan().unmatched(names, mask_names)


def validate_hparams(hparams):
  """Raises ValueError naming the first bad hyperparameter of `hparams`.

  Checks that every hparam of `get_pruning_hparams()` is present with the type
  of its default (ints for ints, numbers for floats, lists of str for lists),
  then the ranges and the list entries. Returns the `PruningSpec`.
  """
  return PruningSpec.from_hparams(hparams)
