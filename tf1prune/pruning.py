"""The `Pruning` class: mask-update ops for every weight given to `apply_mask`.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   step = tf.train.get_or_create_global_step()
    ...   w = tf.get_variable('w', [10, 10])
    ...   masked = tf1prune.apply_mask(w, 'layer')
    ...   hp = tf1prune.get_pruning_hparams().parse('target_sparsity=0.9')
    ...   p = tf1prune.Pruning(hp)
    ...   update = p.conditional_mask_update_op()    # run beside train_op
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = sess.run(tf.assign(step, 100))   # first: one run has no order
    ...     sess.run(p.mask_update_op())
    ...     int(sess.run(tf.reduce_sum(tf1prune.get_masks()[0])))
    10

Each weight's mask is `granularity.compute_mask(weight, sparsity, select)`: the
granularity (single entries, blocks from `block_dims_map` /
`block_height`/`block_width`, or kernels, filters, channels, channel blocks and
N:M from `granularity_map`, see `tf1prune.masks`) groups the weight, and
`select` picks the groups to keep by the threshold method (`threshold_method`,
`threshold_decay`). Weights with the granularity `coupled_filter` are pruned
per channel group instead: one computation over all the members of each
`tf1prune.ChannelGroup` (`tf1prune._coupled_pruning` says which). What each weight gets is read from a
`tf1prune.PruningSpec`, parsed once from the hparams; the sparsity comes from
the spec's schedule, or from any `schedule(step) -> sparsity` callable given to
`Pruning` (see `tf1prune.schedule`).
"""

import collections
import sys

import tensorflow.compat.v1 as tf

from tf1prune import _coupled_pruning, locks
from tf1prune.hparams import get_pruning_hparams
from tf1prune.masks import _global as global_pruning
from tf1prune.masks import _select as thresholds
from tf1prune.masking import masked_weight_records
from tf1prune.spec import PruningSpec

__all__ = ['Pruning']


class _Target(collections.namedtuple('_Target', ['record', 'spec', 'frozen'])):
  """One weight to prune: its `MaskedWeight`, its `WeightSpec`, and `frozen`,
  the bool tensor of its locked mask entries (None when nothing is locked)."""


def _selector(spec, old_threshold):
  """Returns select(scores, sparsity) -> (float32 mask, threshold) for `spec`."""
  decay = float(spec.threshold_decay)

  def smooth(new):
    if decay == 0.0:
      return new
    # A +inf old threshold (nothing finite kept last time) is not averaged.
    old = tf.cast(old_threshold, new.dtype)  # the threshold has the weight dtype
    return tf.where_v2(tf.is_finite(old), decay * old + (1.0 - decay) * new, new)

  def keep(scores, t, strict):
    # NaN scores rank above everything (see thresholds.py): always kept.
    scores = tf.cast(scores, tf.float32)
    above = scores > t if strict else scores >= t
    return tf.cast(tf.logical_or(above, tf.is_nan(scores)), tf.float32)

  def select(scores, sparsity):
    if spec.threshold_method == 'histogram':
      t = smooth(thresholds.histogram_threshold(scores, sparsity, spec.nbins))
      return keep(scores, t, True), t
    mask, t = thresholds.magnitude_mask(scores, sparsity)
    if decay == 0.0:
      return mask, t
    t = smooth(t)
    return keep(scores, t, False), t

  return select


def _non_finite_warning(record, step):
  """Returns an op that prints a warning if `record.weight` has NaN or Inf.

  One reduce_sum pass over the weight; the exact count and the message (to
  stderr, from the process that runs the op) only when the sum is not finite.
  """
  weight = record.weight
  if weight.dtype.base_dtype not in (tf.float32, tf.float64):
    weight = tf.cast(weight, tf.float32)  # float16 sums overflow early.
  total = tf.reduce_sum(weight)

  def warn():
    count = tf.reduce_sum(tf.cast(tf.logical_not(tf.is_finite(weight)),
                                  tf.int32))
    return tf.print('tf1prune WARNING: weight', record.name, 'has', count,
                    'NaN or Inf entries at mask update step', step, '; they '
                    'rank above every finite weight and stay in the mask.',
                    output_stream=sys.stderr)

  return tf.cond(tf.is_finite(total), tf.no_op, warn,
                 name='non_finite_warning')


class Pruning(object):
  """Builds the ops that recompute masks from the weights' magnitudes.

  Args:
    spec: an hparams object from `get_pruning_hparams()`, or a `PruningSpec`
      (None: the defaults).
    global_step: int scalar tensor; default the graph's global step.
    sparsity: optional float scalar tensor that replaces the schedule; weights
      in `weight_sparsity_map` then get `sparsity * target / target_sparsity`.
    schedule: optional callable `schedule(step) -> float scalar tensor`, the
      sparsity at the int64 global step; replaces the spec's schedule. Weights
      in `weight_sparsity_map` get `schedule.with_target(target)(step)` if the
      schedule has `with_target`, else the scaling of `sparsity`.

  Raises:
    ValueError: an hparam is out of range, there is no global step, the
      schedule is not callable or returns no scalar, or both `sparsity` and
      `schedule` are given.
  """

  def __init__(self, spec=None, global_step=None, sparsity=None, schedule=None):
    if isinstance(spec, PruningSpec):
      self._hparams, self._spec = spec.to_hparams(), spec
    else:
      self._hparams = spec if spec is not None else get_pruning_hparams()
      self._spec = PruningSpec.from_hparams(self._hparams)
    if sparsity is not None and schedule is not None:
      raise ValueError('Pruning takes sparsity= (a tensor) or schedule= (a '
                       'callable), not both; got sparsity=%r and schedule=%r'
                       % (sparsity, schedule))
    if schedule is not None and not callable(schedule):
      raise ValueError('schedule must be a callable step -> sparsity tensor, '
                       'e.g. tf1prune.PolynomialDecaySparsity(0.0, 0.9), got %r'
                       % (schedule,))
    if global_step is None:
      global_step = tf.train.get_global_step()
    if global_step is None:
      raise ValueError('Pruning needs a global step: pass global_step=, or '
                       'create one first with '
                       'tf.train.get_or_create_global_step()')
    self._global_step = tf.cast(global_step, tf.int64)
    self._external_sparsity = sparsity
    self._schedule = schedule if schedule is not None else self._spec.schedule
    with tf.name_scope(self._spec.name):
      self._sparsity = (sparsity if sparsity is not None
                        else self._scheduled(self._schedule))
    with tf.variable_scope(self._spec.name, reuse=tf.AUTO_REUSE):
      self._last_update_step = tf.get_variable(
          'last_mask_update_step', [], tf.int32,
          initializer=tf.zeros_initializer(), trainable=False)
    self._update_op = None
    self._conditional_op = None

  @property
  def spec(self):
    """The hparams object (a `PruningSpec` given is returned as hparams)."""
    return self._hparams

  @property
  def pruning_spec(self):
    """The `PruningSpec` parsed from the hparams."""
    return self._spec

  @property
  def schedule(self):
    """The schedule, `step -> sparsity` (None when `sparsity` was given)."""
    return None if self._external_sparsity is not None else self._schedule

  @property
  def sparsity(self):
    """The float32 scalar tensor of the current target sparsity."""
    return self._sparsity

  @property
  def global_step(self):
    """The int64 scalar tensor of the step the schedule and updates follow."""
    return self._global_step

  @property
  def last_update_step(self):
    """The int32 variable holding the step of the last mask update."""
    return self._last_update_step

  def _scheduled(self, schedule):
    value = tf.convert_to_tensor(schedule(self._global_step))
    if value.get_shape().ndims not in (None, 0):
      raise ValueError('schedule(step) must return a scalar sparsity; %r '
                       'returned shape %s' % (schedule, value.get_shape()))
    if value.dtype.base_dtype != tf.float32:
      value = tf.cast(value, tf.float32)
    return value

  def _sparsity_for(self, weight):
    """The sparsity tensor of `weight` (a `WeightSpec`)."""
    target = weight.target_sparsity
    if target is None:
      return self._sparsity
    if (self._external_sparsity is None and
        hasattr(self._schedule, 'with_target')):
      return self._scheduled(self._schedule.with_target(target))
    global_target = self._spec.target_sparsity
    scale = target / global_target if global_target else 0.0
    return tf.minimum(self._sparsity * scale, 1.0)

  def _prunable(self):
    """Returns (plain `_Target`s, `CoupledTargets`) of the pruned weights."""
    records = masked_weight_records()
    # Mask entries under a lock keep their value (tf1prune.locks).
    frozen = locks.frozen_mask_regions(records)
    names = [r.name for r in records]
    graph = records[0].mask.graph if records else None
    for hparam, unmatched in self._spec.unmatched(
        names, [r.mask.op.name for r in records]):
      _coupled_pruning.warn_once(
          graph, '%s entries %s match no masked weight (%s)%s', hparam,
          unmatched, ', '.join(names), _coupled_pruning.case_hint(
              unmatched, names))
    targets = [_Target(r, self._spec.weight(r.name, r.mask), frozen.get(r.name))
               for r in records]
    targets = [t for t in targets if t.spec.pruned]
    return _coupled_pruning.plan_coupled(targets, records, graph,
                                         self._spec.granularity_map)

  def coupled_groups(self):
    """Returns the channel groups pruned as units (`coupled_filter`).

    A list of `CoupledTargets` (`.group` is the `tf1prune.ChannelGroup`), as
    the update op prunes them; see `tf1prune._coupled_pruning` for which
    groups qualify.
    """
    return self._prunable()[1]

  @staticmethod
  def _units(item):
    """The `CoupledUnits` granularity of a `CoupledTargets` (reads locks)."""
    return item.granularity.units(
        [m.axis for m in item.group.members],
        [m.units for m in item.group.members], item.group.num_units,
        _coupled_pruning.locked_units(item))

  def _group_masks(self, targets, coupled):
    """Returns {weight name: (mask, threshold)} of the global pruning groups."""
    members = collections.OrderedDict(
        (pattern, []) for pattern in self._spec.global_pruning_groups.patterns)
    for target in targets:
      if target.spec.group is not None:
        members[target.spec.group].append(
            ([target.record.name], target.record.weight,
             target.spec.granularity, target.record.threshold))
    for item in coupled:
      if item.spec.group is not None:
        members[item.spec.group].append(
            ([t.record.name for t in item.targets],
             [t.record.weight for t in item.targets], self._units(item),
             item.targets[0].record.threshold))
    results = {}
    for pattern, group in members.items():
      if not group:
        tf.logging.warning('global_pruning_groups entry %r matches no prunable '
                           'weight', pattern)
        continue
      with tf.name_scope('global_pruning'):
        masks = global_pruning.global_masks(
            [(weight, granularity) for _, weight, granularity, _ in group],
            self._sparsity, _selector(self._spec, group[0][3]))
      for (names, weight, _, _), (mask, threshold) in zip(group, masks):
        if isinstance(weight, list):
          results.update((n, (m, threshold)) for n, m in zip(names, mask))
        else:
          results[names[0]] = (mask, threshold)
    return results

  def _coupled_masks(self, coupled, results):
    """Adds (mask, threshold) of the coupled groups ranked alone to `results`."""
    for item in coupled:
      if item.spec.group is not None:
        continue
      first = item.targets[0].record
      with tf.name_scope(first.name + '_coupled_pruning_ops'):
        masks, threshold = self._units(item).compute_mask(
            [t.record.weight for t in item.targets],
            self._sparsity_for(item.spec),
            _selector(self._spec, first.threshold))
      results.update((t.record.name, (m, threshold))
                     for t, m in zip(item.targets, masks))

  def _mask_assign_ops(self, prunable):
    """Returns the assign ops of the masks and thresholds of `prunable`."""
    plain, coupled = prunable
    ops = []
    grouped = self._group_masks(plain, coupled)
    self._coupled_masks(coupled, grouped)
    targets = plain + [t for item in coupled for t in item.targets]
    for target in targets:
      record = target.record
      with tf.name_scope(record.name + '_pruning_ops'):
        if record.name in grouped:
          mask, threshold = grouped[record.name]
        else:
          select = _selector(self._spec, record.threshold)
          mask, threshold = target.spec.granularity.compute_mask(
              record.weight, self._sparsity_for(target.spec), select)
        ops.append(_non_finite_warning(record, self._global_step))
        ops.append(tf.assign(record.threshold, tf.cast(
            threshold, record.threshold.dtype.base_dtype)))
        mask = tf.cast(mask, record.mask.dtype.base_dtype)
        if target.frozen is not None:
          mask = tf.where_v2(target.frozen, record.mask.read_value(), mask)
        ops.append(tf.assign(record.mask, mask))
    return ops

  def _build_update(self, targets):
    with tf.name_scope(self._spec.name):
      assigns = self._mask_assign_ops(targets)
      with tf.control_dependencies(assigns):
        step = tf.assign(self._last_update_step,
                         tf.cast(self._global_step, tf.int32),
                         name='last_mask_update_step_assign')
      with tf.control_dependencies([step]):
        return tf.no_op('mask_update')

  def mask_update_op(self):
    """Returns the op that recomputes every mask now (built once)."""
    if self._update_op is None:
      self._update_op = self._build_update(self._prunable())
    return self._update_op

  def conditional_mask_update_op(self):
    """Returns an op that updates the masks only on pruning steps (built once).

    A pruning step: `begin_pruning_step <= step`, (`step <= end_pruning_step`
    or `end_pruning_step == -1`) and
    `last_mask_update_step + pruning_frequency <= step`. On other steps the op
    evaluates that predicate and nothing else.
    """
    if self._conditional_op is None:
      spec = self._spec
      # Read outside the cond: under TF2 its branches are separate graphs.
      targets = self._prunable()
      with tf.name_scope(spec.name + '_conditional'):
        step = self._global_step
        in_range = tf.logical_and(
            step >= spec.begin_pruning_step,
            tf.logical_or(step <= spec.end_pruning_step,
                          spec.end_pruning_step < 0))
        due = (tf.cast(self._last_update_step, tf.int64) +
               spec.pruning_frequency) <= step
        self._conditional_op = tf.cond(
            tf.logical_and(in_range, due), lambda: self._build_update(targets),
            tf.no_op, name='conditional_mask_update')
    return self._conditional_op

  def add_pruning_summaries(self):
    """Adds scalar summaries of the schedule, the masks and the thresholds."""
    with tf.name_scope(self._spec.name + '_summaries'):
      tf.summary.scalar('sparsity', self._sparsity)
      tf.summary.scalar('last_mask_update_step', self._last_update_step)
      for record in masked_weight_records():
        tf.summary.scalar(record.mask.op.name + '/sparsity',
                          tf.nn.zero_fraction(record.mask))
        tf.summary.scalar(record.threshold.op.name + '/threshold',
                          record.threshold)

  def print_hparams(self):
    """Logs every hyperparameter of the spec at INFO level."""
    tf.logging.info('Pruning hyperparameters:\n%s', '\n'.join(
        '  %s = %r' % item for item in sorted(self._spec.values().items())))
