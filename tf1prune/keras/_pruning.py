"""Magnitude pruning of Keras weights with tf1prune's hparams and mask math.

    >>> import numpy as np, keras, tf1prune.keras as tk
    >>> model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(10)])
    >>> _ = model.layers[0].kernel.assign(np.arange(1., 101.).reshape(10, 10))
    >>> pruner = tk.Pruner(model, 'target_sparsity=0.9,pruning_frequency=1')
    >>> pruner.step(100)                      # a pruning step: masks updated
    True
    >>> int(np.count_nonzero(model.layers[0].kernel))
    10

`Pruner(model, hparams)` takes the hparams of `tf1prune.get_pruning_hparams()`
(an object or a `.parse()` string) and prunes, by default, every layer weight
named `kernel`, `depthwise_kernel`, `pointwise_kernel` or `embeddings`; a
weight is named `<layer name>/<weight name>` (e.g. `dense_1/kernel`) in
`do_not_prune`, `weight_sparsity_map`, `block_dims_map`, `granularity_map` and
`global_pruning_groups`. The pruner executes the same `tf1prune.plan` as
`tf1prune.Pruning`, eagerly: the plan decides which weights are pruned, with
which granularity, sparsity and global group, and on which steps, and
`tf1prune.plan.mask_update.compute_masks` computes the masks
(`tf1prune.masks`: exact
top-k with ties kept in row-major order, blocks, kernels, filters, channels,
N:M; `threshold_method`, `threshold_decay`), so a weight gets exactly the mask
`tf1prune.Pruning` gives it for the same values. `coupled_filter` prunes the
channel groups of the model (`tf1prune.keras.shrink.groups`: the one channel
walk over the model's layers) as the graph API does, with its rules
(`tf1prune.plan.coupled`): whole groups only, blocked groups and the model's
outputs dense, one target per group, locked units kept; every warning is
logged once, when the pruner is made. With a `budget`, the groups are
pruned to what the shrunk model may cost (`tf1prune.keras._budget`:
`budget_plan()`, `budget_report()`, `cost_ratio`), and with it (or
`prune_channel_params`) a removed channel's bias and batch norm are
pinned to 0 (`tf1prune.keras._channel_params`: `channel_params()`).

`step(step)` is `conditional_mask_update_op`: it updates the masks when
`begin_pruning_step <= step <= end_pruning_step` (or end -1) and
`last_mask_update_step + pruning_frequency <= step`. `PruningCallback` calls
it after each batch of `fit` with `optimizer.iterations`, and writes the
scalar summaries of `Pruning.add_pruning_summaries` into `<log_dir>/train`,
next to a `TensorBoard(log_dir)` callback's. Masks are pins (see
`tf1prune.keras._pin`): pruned entries are zeroed in the weight itself and
kept at zero by every optimizer step; entries pruned once score 0 afterwards,
so they stay pruned. Locked entries keep their mask value, as in graph mode.
"""

import collections
import os

import numpy as np
import tensorflow as tf

from tf1prune.latency.budget_report import BudgetReport
from tf1prune.masks import Filter
from tf1prune.plan.coupled import split_coupled, units_kept_by_locks
from tf1prune.plan.hparams import HParams, get_pruning_hparams
from tf1prune.keras import _channel_params, _pin, _version
from tf1prune.keras._budget import KerasBudget, check_budget_hparams
from tf1prune.keras._locks import resolve_layer
from tf1prune.plan.mask_update import MaskUnit, compute_masks
from tf1prune.plan.spec import PruningSpec

__all__ = ['DEFAULT_WEIGHTS', 'Pruner', 'PruningCallback']

DEFAULT_WEIGHTS = ('kernel', 'depthwise_kernel', 'pointwise_kernel',
                   'embeddings')

_Record = collections.namedtuple('_Record', ['name', 'layer', 'weight_name',
                                             'variable', 'pin', 'spec'])


def _warn(text):
  tf.compat.v1.logging.warning('%s', text)


def _hparams(hparams):
  if hparams is None:
    return get_pruning_hparams()
  if isinstance(hparams, str):
    return get_pruning_hparams().parse(hparams)
  if not isinstance(hparams, HParams):
    raise TypeError('hparams must be None, a string for '
                    'get_pruning_hparams().parse() or an HParams object, got %r'
                    % (hparams,))
  return hparams


class Pruner(object):
  """Masks for the prunable weights of a built Keras model.

  Args:
    model: the built Keras model (Keras 3 or tf_keras).
    hparams: None (defaults), a `.parse()` string, or an HParams object from
      `tf1prune.get_pruning_hparams()`.
    weights: None (every kernel-like weight, see module doc), or a list of
      (layer or layer name, weight name) pairs.

  Raises:
    ValueError: an hparam is out of range, a layer is not built, a weight is
      not floating point or its shape does not fit its granularity (N:M
      needs inputs that are a multiple of M), no weight is left to prune,
      or a `budget` cannot be pruned to (a latency budget, `taylor`, no
      group to prune, below what the kept minimums allow:
      `tf1prune.keras._budget`).
  """

  def __init__(self, model, hparams=None, weights=None):
    _version.keras_of(model)
    self.model = model
    self.spec = _hparams(hparams)
    # Parsed and validated once, as the graph API does (tf1prune.plan).
    self._plan = PruningSpec.from_hparams(self.spec).plan()
    if self._plan.spec.budget is not None:
      check_budget_hparams(self._plan.spec)
    self._view = self._trace = None
    self._records = []
    targets = self._targets(weights)
    names = ['%s/%s' % (layer.name, name) for layer, name in targets]
    for text in self._plan.unmatched_warnings(names):   # as tf1prune.Pruning
      _warn(text)
    for layer, name in targets:
      full = '%s/%s' % (layer.name, name)
      if not self._plan.is_pruned(full):
        continue
      variable = _pin.weight_of(layer, name)
      pin = _pin.pin_of(layer, name, model)
      self._records.append(_Record(full, layer, name, variable, pin,
                                   self._plan.weight(full,
                                                     previous_mask=pin.mask)))
    if not self._records:
      raise ValueError('Pruner found no weight to prune in model %r (weights '
                       '%s, do_not_prune %s); pass weights=[(layer, name)] or '
                       'build the model first' % (
                           model.name, weights,
                           self._plan.spec.values()['do_not_prune']))
    for record in self._records:   # an N:M weight of 6 inputs fails here
      record.spec.granularity.check_shape(record.variable.shape, record.name)
    self._plain, self._coupled = self._split(targets, names)
    self._owners, self._params = self._channel_params()
    self._budget = None
    self.cost_ratio = None
    if self._plan.spec.budget is not None:
      self._budget = KerasBudget(
          self._plan.spec, self._view, self._trace, self._coupled,
          [p for p in self._params if p.owner < len(self._coupled)], _warn)
      self.cost_ratio = 1.0
    self.thresholds = {r.name: np.float32(0.0) for r in self._records}
    self.last_update_step = 0

  def _split(self, targets, names):
    """The plain records and the `CoupledTargets` (`tf1prune.plan.coupled`),
    the warnings logged."""
    members = [('%s/%s' % (layer.name, name), layer, name,
                _pin.weight_of(layer, name)) for layer, name in targets]

    def groups():
      from tf1prune.keras.shrink import groups as groups_module
      from tf1prune.keras.shrink.layer_view import LayerView
      try:
        self._view = LayerView(self.model)
        self._trace = groups_module.trace_channel_groups(
            self.model, members, self._view)
        return self._trace.groups
      except ValueError as e:
        self._view = None
        _warn('the channel groups of model %r are unknown (%s): its weights '
              'are in no channel group' % (self.model.name, e))
        return []
    self._depthwise_warning()
    return split_coupled(self._records, groups, names, self._plan, _warn,
                         lambda r: r.name,
                         lambda r: [int(d) for d in r.variable.shape])

  def _channel_params(self):
    """(owners, params) of `tf1prune.keras._channel_params`: the weights
    whose removed channels' biases and batch norms are zeroed (with a
    budget or `prune_channel_params`), and those parameters (the owners of
    the coupled groups first, in their order)."""
    if not self._plan.spec.prune_channel_params or self._view is None:
      return [], []
    owners = [_channel_params.Owner(
        [(t.pin, t.layer, t.weight_name, m.axis, m.units)
         for m, t in zip(item.group.members, item.targets)],
        item.group.num_units) for item in self._coupled]
    for record in self._plain:
      shape = [int(d) for d in record.variable.shape]
      if record.spec.granularity.removes_outputs(shape):
        owners.append(_channel_params.Owner(
            [(record.pin, record.layer, record.weight_name, -1,
              tuple(range(shape[-1])))], shape[-1]))
    return owners, _channel_params.find(self._view, owners, self.model)

  def channel_params(self):
    """The biases and batch norm scales and offsets zeroed with the
    channels the masks remove (with a budget or `prune_channel_params`):
    [(`layer/weight`, what)], what 'bias', 'scale' or 'offset'."""
    return [(p.name, p.what) for p in self._params]

  def _depthwise_warning(self):
    """Says once that `filter` keeps a depthwise kernel of one filter."""
    kept = [r.name for r in self._records
            if isinstance(r.spec.granularity, Filter) and
            len(r.variable.shape) == 4 and int(r.variable.shape[-1]) == 1 and
            type(r.layer).__name__ in ('DepthwiseConv2D', 'SeparableConv2D')
            and r.weight_name in ('kernel', 'depthwise_kernel')]
    if kept:
      _warn('filter: %s are depthwise kernels of one filter each '
            '(depth_multiplier 1), which filter pruning keeps: they stay '
            'dense. coupled_filter prunes them with the channels they read.'
            % ', '.join(kept))

  @property
  def plan(self):
    """The `tf1prune.plan.PruningPlan` of the hparams, which this executes."""
    return self._plan

  def _targets(self, weights):
    if weights is not None:
      for entry in weights:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and
                isinstance(entry[1], str)):
          raise ValueError(
              'weights= must be a list of (layer or layer name, weight name) '
              "pairs, e.g. [('dense', 'kernel')]; got the entry %r" % (entry,))
      return [(resolve_layer(self.model, layer), name) for layer, name in weights]
    targets = []
    for layer in _pin._layers(self.model):
      if getattr(layer, 'layers', None):
        continue   # a nested model: its own layers are visited.
      if not getattr(layer, 'built', False):
        raise ValueError('layer %r is not built yet: build the model first '
                         '(model.build(input_shape), or call it on a batch, or '
                         'give it an Input)' % layer.name)
      for name, variable in _pin.named_weights(layer):
        if _pin.short_name(variable) in DEFAULT_WEIGHTS:
          targets.append((layer, name))
    return targets

  def coupled_groups(self):
    """Returns the channel groups pruned as units (`coupled_filter`).

    A list of `tf1prune.plan.coupled.CoupledTargets` (`.group` is the
    `tf1prune.ChannelGroup`, `.targets` the pruned weights' records), as
    `update` prunes them.
    """
    return list(self._coupled)

  @property
  def weight_names(self):
    """The pruned weights' names, `layer/weight`."""
    return [r.name for r in self._records]

  def masks(self):
    """Returns {name: bool ndarray, True where kept}."""
    return {r.name: r.pin.mask for r in self._records}

  def sparsity_at(self, step, target=None):
    """The scheduled sparsity at `step` (Python float)."""
    return self._plan.sparsity_at(step, target)

  def update(self, sparsity=None, step=None):
    """Recomputes every mask now and zeroes the pruned entries.

    With a budget, the channel groups are pruned to the cost the schedule
    allows at `step`; `sparsity` then applies to the weights pruned by
    another granularity only. Then the removed channels' biases and batch
    norms are zeroed (with a budget or `prune_channel_params`).

    Args:
      sparsity: the sparsity to use, in [0, 1) (weights in
        `weight_sparsity_map` get `sparsity * their target /
        target_sparsity`); None: the schedule's at `step`.
      step: the training step (default `last_update_step`); recorded as
        `last_update_step`.

    Returns:
      {name: float32 threshold} (a budget's members: the cost ratio
      reached).

    Raises:
      ValueError: `sparsity` is not in [0, 1).
    """
    if sparsity is not None and not 0.0 <= float(sparsity) < 1.0:
      raise ValueError('sparsity must be in [0, 1), got %r: the fraction of '
                       'each weight to prune, e.g. 0.9' % (sparsity,))
    step = self.last_update_step if step is None else int(step)
    plan = self._plan
    masks, coupled = {}, self._coupled
    if self._budget is not None:
      masks, coupled = self._budget_masks(step), []
    units = [MaskUnit([r.name], tf.convert_to_tensor(r.variable),
                      tf.constant(self.thresholds[r.name]),
                      plan.weight(r.name, previous_mask=tf.constant(
                          r.pin.mask, tf.float32)))
             for r in self._plain]
    for item in coupled:
      records = item.targets
      units.append(MaskUnit(
          [r.name for r in records],
          [tf.convert_to_tensor(r.variable) for r in records],
          tf.constant(self.thresholds[records[0].name]), item.spec,
          item.granularity.units(
              [m.axis for m in item.group.members],
              [m.units for m in item.group.members], item.group.num_units,
              units_kept_by_locks(item.group, [
                  r.pin.locked & r.pin.mask if r.pin.locked.any() else None
                  for r in records]))))
    schedule = plan.schedule if sparsity is None else None
    overall = self.sparsity_at(step) if sparsity is None else float(sparsity)
    masks.update(compute_masks(
        plan, units, overall, lambda weight: plan.sparsity_of(
            weight.target_sparsity, overall, schedule,
            lambda s: s.sparsity_at(step))))
    for record in self._records:
      if record.name not in masks:
        continue      # left dense (a warning said why when it was made)
      mask, threshold = masks[record.name]
      keep = np.asarray(mask) > 0
      keep = np.where(record.pin.locked, record.pin.mask, keep)
      record.pin.set_mask(keep)
      record.pin.apply()
      self.thresholds[record.name] = np.float32(threshold)
    _channel_params.zero(self._params, self._owners)
    self.last_update_step = step
    return dict(self.thresholds)

  def _budget_masks(self, step):
    """{name: (mask, threshold)} of the budget's groups at `step`; the
    threshold of a member is the cost ratio the update reached."""
    keep, cost = self._budget.keep_units(step)
    self.cost_ratio = float(np.float32(cost / self._budget.dense))
    results = {}
    for item, unit_mask in zip(self._coupled, self._budget.split(keep)):
      group = item.group
      masks = item.granularity.units(
          [m.axis for m in group.members], [m.units for m in group.members],
          group.num_units).spread(
              [tf.convert_to_tensor(r.variable) for r in item.targets],
              tf.constant(unit_mask))
      for record, mask in zip(item.targets, masks):
        results[record.name] = (mask, self.cost_ratio)
    return results

  def budget_plan(self):
    """The `tf1prune.keras._budget.KerasBudget` (groups, units, cost
    model) of the `budget` hparam, or None without a budget."""
    return self._budget

  def budget_report(self, step=None):
    """The `tf1prune.latency.budget_report.BudgetReport` of the current
    masks: per layer, the widths and the cost before and after, and the
    cost the schedule allows at `step` (default `last_update_step`).

    Raises:
      ValueError: there is no budget.
    """
    if self._budget is None:
      raise ValueError('budget_report needs the budget hparam; this Pruner '
                       'has none (budget=%r)' % self.spec.budget)
    step = self.last_update_step if step is None else int(step)
    return BudgetReport(self._budget.budget, self._budget.model,
                        self._budget.current(), self._budget.allowed(step))

  def is_pruning_step(self, step):
    """The predicate of `conditional_mask_update_op` at `step`."""
    return self._plan.is_pruning_step(step, self.last_update_step)

  def step(self, step):
    """Updates the masks if `step` is a pruning step; returns whether it did.

    For custom training loops: call it after `optimizer.apply_gradients`
    with `int(optimizer.iterations)`.
    """
    step = int(step)
    if not self.is_pruning_step(step):
      return False
    self.update(step=step)
    return True

  def resume(self, step):
    """Catches up after a restore to `step` (BackupAndRestore, checkpoint).

    Sets `last_update_step` to the last step <= `step` at which `step()`
    would have updated the masks had it run on every step, and, if that is a
    step, masks each weight where its restored value is +-0.0 (pruned
    entries were exactly zero; locked entries keep their mask). A pruner
    already at `step` or later is left alone. `PruningCallback` calls it
    when `fit` begins, with `optimizer.iterations`.
    """
    before = self.last_update_step
    for candidate in range(before + 1, int(step) + 1):
      if self.is_pruning_step(candidate):
        self.last_update_step = candidate
    if self.last_update_step == before:
      return
    for record in self._records:
      kept = np.asarray(record.variable) != 0
      pin = record.pin
      pin.set_mask(np.where(pin.locked, pin.mask, pin.mask & kept))
      pin.apply()
    _channel_params.zero(self._params, self._owners)

  def write_summaries(self, step):
    """Writes the pruning scalars into the default `tf.summary` writer.

    The names of `tf1prune.Pruning.add_pruning_summaries`, in
    `<name>_summaries/`: `sparsity`, `last_mask_update_step`, and per weight
    `<layer>/<weight>/mask/sparsity` and `<layer>/<weight>/threshold/threshold`;
    with a budget, `budget/cost_ratio_target` (what the schedule allows at
    `step`), `budget/cost_ratio` (what the last update reached) and per
    group member `<layer>/<weight>/kept_channels` (the fraction kept).
    """
    scope = self._plan.name + '_summaries/'
    _scalar(scope + 'sparsity', self.sparsity_at(step), step)
    _scalar(scope + 'last_mask_update_step', self.last_update_step, step)
    for record in self._records:
      mask = record.pin.mask
      _scalar(scope + record.name + '/mask/sparsity',
              1.0 - np.count_nonzero(mask) / float(mask.size), step)
      _scalar(scope + record.name + '/threshold/threshold',
              self.thresholds[record.name], step)
    if self._budget is not None:
      budget = self._budget
      _scalar(scope + 'budget/cost_ratio_target',
              budget.allowed(step) / budget.dense, step)
      _scalar(scope + 'budget/cost_ratio', self.cost_ratio, step)
      for item, kept in zip(self._coupled, budget.split(budget.current())):
        for member in item.group.members:
          _scalar(scope + member.name + '/kept_channels', kept.mean(), step)


def _scalar(tag, value, step):
  """A TensorBoard scalar, written with TensorFlow alone.

  `tf.summary.scalar` needs the tensorboard package; `tf.summary.write` with
  the scalars plugin's metadata writes the same record without it.
  """
  metadata = tf.compat.v1.SummaryMetadata(
      plugin_data=tf.compat.v1.SummaryMetadata.PluginData(
          plugin_name='scalars'))
  tf.summary.write(tag, tf.constant(float(value), tf.float32), step=step,
                   metadata=metadata)


def PruningCallback(pruner, log_dir=None, update_freq='epoch'):  # noqa: N802
  """Returns a Keras callback running `pruner.step` after each `fit` batch.

  Args:
    pruner: a `Pruner` of the model that `fit` trains.
    log_dir: the `log_dir` of your `keras.callbacks.TensorBoard`; the
      pruning scalars go to `<log_dir>/train` (None: no summaries).
    update_freq: 'epoch' (summaries at each epoch end) or 'batch' (after
      every mask update too).

  Returns:
    An instance of a `keras.callbacks.Callback` subclass of the model's Keras.
  """
  if update_freq not in ('epoch', 'batch'):
    raise ValueError("update_freq must be 'epoch' or 'batch', got %r"
                     % (update_freq,))
  keras = _version.keras_of(pruner.model)

  class PruningCallbackImpl(keras.callbacks.Callback):
    """Mask updates in `fit` and their summaries (see `PruningCallback`)."""

    def __init__(self):
      super(PruningCallbackImpl, self).__init__()
      self.pruner = pruner
      self._writer = None

    def _step(self):
      return int(self.pruner.model.optimizer.iterations.numpy())

    def _summaries(self):
      if log_dir is None:
        return
      if self._writer is None:
        self._writer = tf.summary.create_file_writer(
            os.path.join(log_dir, 'train'))
      with self._writer.as_default():
        self.pruner.write_summaries(self._step())
      self._writer.flush()

    def on_train_begin(self, logs=None):
      _pin.hook_optimizer(self.pruner.model.optimizer, self.pruner.model)
      self.pruner.resume(self._step())   # after BackupAndRestore's restore

    def on_train_batch_end(self, batch, logs=None):
      if self.pruner.step(self._step()) and update_freq == 'batch':
        self._summaries()

    def on_epoch_end(self, epoch, logs=None):
      self._summaries()

    def on_train_end(self, logs=None):
      if self._writer is not None:
        self._writer.close()
        self._writer = None

  PruningCallbackImpl.__name__ = 'PruningCallback'
  return PruningCallbackImpl()
