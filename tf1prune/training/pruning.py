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
`tf1prune.ChannelGroup` (`tf1prune.training.coupled` says which). What each
weight gets, which weights are ranked together and on which steps masks are
updated is decided by the `tf1prune.plan.PruningPlan` of the hparams (parsed
once into a `tf1prune.PruningSpec`); `Pruning` executes it as tensors, with
`tf1prune.plan.mask_update.compute_masks`, as the Keras `Pruner` does
eagerly. The
sparsity comes from the spec's schedule, or from any `schedule(step) ->
sparsity` callable given to `Pruning` (see `tf1prune.plan.schedule`).
"""

import collections
import sys

import tensorflow.compat.v1 as tf

from tf1prune.graph import conditional, locks
from tf1prune.training import channel_params, coupled
from tf1prune.training.budget import BudgetPlan, BudgetReport, Taylor
from tf1prune.training.contrib_spec import HParamsView, reparse
from tf1prune.plan.hparams import get_pruning_hparams
from tf1prune.graph.masking import masked_weight_records
from tf1prune.masks import _blocks
from tf1prune.plan.mask_update import MaskUnit, compute_masks
from tf1prune.plan.spec import PruningSpec

__all__ = ['Pruning']


class _Target(collections.namedtuple('_Target', ['record', 'spec', 'frozen'])):
  """One weight to prune: its `MaskedWeight`, its `WeightSpec`, and `frozen`,
  the bool tensor of its locked mask entries (None when nothing is locked)."""


# How `_non_finite_count` counts a float32 weight. TF 1.x runs its bool
# kernels (`is_finite`, compares, casts from bool) one entry at a time, about
# 2 ns each, and vectorizes int32 arithmetic; on TF 2.21 the uint8 sums of
# the finite flags are the faster way (measured per block of 2**20 entries:
# 0.96 vs 1.54 ms on TF 1.15, 1.44 vs 0.48 ms on TF 2.21).
_COUNT_BY_ARITHMETIC = tf.__version__.startswith('1.')
# Whether a resource variable takes a large mask whole (`_assign_mask`).
_ADOPTS_FULL_MASK = not tf.__version__.startswith('1.')


def _is_finite(x):
  """`tf.is_finite`, of bfloat16 through float32: TF 1.15's vectorized
  `IsFinite` of bfloat16 is wrong (NaN finite, +-inf finite or not by
  position): the count of a bfloat16 weight came out negative, no warning."""
  if x.dtype.base_dtype == tf.bfloat16:
    x = tf.cast(x, tf.float32)
  return tf.is_finite(x)


def _non_finite_count(weight):
  """int32 count of the NaN and infinite entries of `weight`.

  Block by block (`tf1prune.masks._blocks`). float32 where
  `_COUNT_BY_ARITHMETIC`: the bits of |w| as int32 exceed those of the
  largest finite float32 exactly for NaN and +-inf, so that difference
  clipped to [0, 1] is summed. Otherwise the finite flags (`_is_finite`) are
  counted by uint8 sums over rows of `COUNT_ROW` (the tail padded with NaN),
  2-3x faster than `tf.where` of the non-finite flags.
  """
  flat = tf.reshape(weight, [-1])
  if flat.shape.num_elements() is None:
    return tf.reduce_sum(tf.cast(tf.logical_not(_is_finite(flat)),
                                 tf.int32))
  blocks = _blocks.split(flat)
  if _COUNT_BY_ARITHMETIC and flat.dtype == tf.float32:
    return tf.add_n([tf.reduce_sum(tf.clip_by_value(
        tf.bitcast(tf.abs(block), tf.int32) - 0x7F7FFFFF, 0, 1))
                     for block in blocks])
  rows = _blocks.Rows(blocks, _blocks.COUNT_ROW, float('nan'))
  finite = tf.reduce_sum(_blocks.count_per_row(rows, _is_finite))
  return tf.size(flat, out_type=tf.int32) - finite


def _non_finite_warning(record, step, count=None):
  """Returns an op that prints a warning if `record.weight` has NaN or Inf.

  The message goes to stderr, from the process that runs the op. `count`:
  the int32 count of the weight's NaN and infinite entries if its mask's
  select made it on the way (`compute_masks`), so the check costs nothing.
  Otherwise one reduce_sum pass over the weight, in its own dtype (a cast
  would write a full-size copy), and only when the sum is not finite, the
  exact count (`_non_finite_count`): a float16 sum can overflow with every
  entry finite.
  """
  def warn(count):
    return tf.cond(count > 0, lambda: tf.print(
        'tf1prune WARNING: weight', record.name, 'has', count, 'NaN or Inf '
        'entries at mask update step', step, '; they rank above every finite '
        'weight and stay in the mask.', output_stream=sys.stderr), tf.no_op,
                   name='non_finite_warning')

  if count is not None:
    return warn(count)
  return tf.cond(_is_finite(tf.reduce_sum(record.weight)), tf.no_op,
                 lambda: warn(_non_finite_count(record.weight)),
                 name='non_finite_warning')


def _each_target(prunable):
  """The `_Target`s of `prunable` (plain, coupled), the plain ones first."""
  plain, coupled = prunable
  return plain + [t for item in coupled for t in item.targets]


def _assign_mask(variable, mask):
  """Returns an op that assigns `mask` to the mask `variable`.

  A mask that is a cast of a bool tensor (as `magnitude_mask` returns it) of
  more than `_blocks.BLOCK` entries is written in one of two ways:

  * a resource variable on TF 2.x: one cast of the bool mask at full size,
    assigned. `AssignVariableOp` adopts the buffer of a value nothing else
    reads, and TF 2.x reuses its large buffers, so the mask is written once,
    with no copy. At 1e7 entries, one thread, the whole update takes
    0.83-0.85x as long as by rows (side by side, sparsity 0.9 and 0.5).
  * otherwise, cast and scattered into the variable by blocks of rows. On TF
    1.15 a float mask at full size is a fresh mmap whose every page faults
    in (`tf1prune.masks._blocks`): the update takes 0.75x as long by rows. A
    reference variable's `Assign` copies its value in, so rows cost the same
    there and keep the full-size float mask out of memory.
  """
  keep = mask
  while keep.op.type == 'Cast':
    keep = keep.op.inputs[0]
  shape = variable.shape.as_list()
  if (keep.dtype != tf.bool or not keep.shape.is_fully_defined() or
      keep.shape.as_list() != shape or
      variable.shape.num_elements() <= _blocks.BLOCK):
    return tf.assign(variable, mask)
  dtype = variable.dtype.base_dtype
  if _ADOPTS_FULL_MASK and variable.op.type == 'VarHandleOp':
    return tf.assign(variable, tf.cast(keep, dtype))
  return tf.group(*[
      tf.scatter_update(variable, tf.range(start, stop),
                        tf.cast(keep[start:stop], dtype)).op
      for start, stop in _blocks.row_ranges(shape)])


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
    loss: optional scalar loss tensor: with `budget_criterion=taylor`, the
      gradients of weights that no optimizer op of the graph updates are
      taken from it.

  Raises:
    ValueError: an hparam is out of range, there is no global step, the
      schedule is not callable or returns no scalar, or both `sparsity` and
      `schedule` are given.
  """

  def __init__(self, spec=None, global_step=None, sparsity=None, schedule=None,
               loss=None):
    if isinstance(spec, PruningSpec):
      self._hparams, parsed = spec.to_hparams(), spec
    else:
      self._hparams = spec if spec is not None else get_pruning_hparams()
      parsed = PruningSpec.from_hparams(self._hparams)
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
    self._user_schedule = schedule
    self._loss = loss
    self._budget = None          # (plain, coupled, BudgetPlan, Taylor or None)
    self._params = ([], [])      # channel_params (owners, found)
    self._parsed = self._plan = None
    self._update_op = None
    self._conditional_op = None
    self._gated_op = None
    self._derive(parsed)

  def _derive(self, parsed):
    """Makes the plan, the sparsity tensor and the step variable of `parsed`.

    Called again when `_spec` is set (contrib compatibility): only what
    changed is built again.
    """
    old = self._parsed
    self._parsed, self._plan = parsed, parsed.plan()
    if (old is None or old.schedule != parsed.schedule
        or old.name != parsed.name):
      self._schedule = (self._user_schedule if self._user_schedule is not None
                        else parsed.schedule)
      with tf.name_scope(parsed.name):
        self._sparsity = (self._external_sparsity
                          if self._external_sparsity is not None
                          else self._scheduled(self._schedule))
    if old is None or old.name != parsed.name:
      with tf.variable_scope(parsed.name, reuse=tf.AUTO_REUSE):
        self._last_update_step = tf.get_variable(
            'last_mask_update_step', [], tf.int32,
            initializer=tf.zeros_initializer(), trainable=False)

  @property
  def _spec(self):
    """The hparams as contrib's `Pruning._spec` (read and set; see below).

    contrib code reads and sets hparams here before building the update ops
    (`p._spec.threshold_decay = 0.0`). A set is checked like a parse and the
    spec parsed again; after `mask_update_op()` or
    `conditional_mask_update_op()` it raises. Other attributes are the
    `PruningSpec`'s.
    """
    return HParamsView(lambda: self._parsed, self._set_hparam)

  def _set_hparam(self, name, value):
    built = self._update_op is not None or self._gated_op is not None
    if built:
      raise ValueError(
          'Pruning._spec.%s = %r comes too late: the mask update ops are '
          'built already and use %s=%r; set hparams before calling '
          'mask_update_op() or conditional_mask_update_op(), or make a new '
          'Pruning' % (name, value, name, self._parsed.values().get(name)))
    parsed = reparse(self._parsed, name, value)
    if hasattr(self._hparams, name):
      setattr(self._hparams, name, value)   # contrib's _spec is the hparams
    self._derive(parsed)

  @property
  def spec(self):
    """The hparams object (a `PruningSpec` given is returned as hparams)."""
    return self._hparams

  @property
  def pruning_spec(self):
    """The `PruningSpec` parsed from the hparams."""
    return self._parsed

  @property
  def plan(self):
    """The `tf1prune.plan.PruningPlan` of the spec, which this executes."""
    return self._plan

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
    """The sparsity tensor of `weight` (a `WeightSpec`): the plan's rule."""
    return self._plan.sparsity_of(
        weight.target_sparsity, self._sparsity, self.schedule,
        self._scheduled, tf.minimum)

  def _prunable(self):
    """Returns (plain `_Target`s, `CoupledTargets`) of the pruned weights."""
    if self._budget is not None:
      return self._budget[:2]     # made once: it holds variables
    records = masked_weight_records()
    # Mask entries under a lock keep their value (tf1prune.graph.locks).
    frozen = locks.frozen_mask_regions(records)
    names = [r.name for r in records]
    graph = records[0].mask.graph if records else None
    for text in self._plan.unmatched_warnings(
        names, [r.mask.op.name for r in records]):
      coupled.warn_once(graph, '%s', text)
    targets = [_Target(r, self._plan.weight(r.name, r.mask.op.name, r.mask),
                       frozen.get(r.name)) for r in records]
    targets = [t for t in targets if t.spec.pruned]
    if self._parsed.budget is None:
      prunable = coupled.plan_coupled(targets, records, graph, self._plan)
      self._params = self._channel_params(prunable)
      return prunable
    budget = BudgetPlan(graph, records, self._parsed)
    plain, items = coupled.plan_coupled(targets, records, graph, self._plan,
                                        budget.trace.groups)
    budget.use(items)
    # Variables and the importance update: outside the caller's control
    # dependencies (an initializer must not run a training step).
    with tf.control_dependencies(None):
      taylor = (Taylor(budget, self._parsed.budget_taylor_decay,
                       self._loss)
                if self._parsed.budget_criterion == 'taylor' else None)
      with tf.variable_scope(self._parsed.name, reuse=tf.AUTO_REUSE):
        self._budget_cost_ratio = tf.get_variable(
            'budget_cost_ratio', [], tf.float32,
            initializer=tf.ones_initializer(), trainable=False)
      with tf.name_scope(self._parsed.name + '_budget'):
        # What `budget_report` reads (built now: a training session
        # finalizes the graph).
        allowed = budget.cost_budget(self._global_step, self._parsed.schedule)
        self._budget_now = (
            tf.concat([budget.current_units(item) for item in items], 0),
            allowed, allowed / budget.dense)
    self._budget = (plain, items, budget, taylor)
    self._params = self._channel_params(self._budget[:2])
    return self._budget[:2]

  def _channel_params(self, prunable):
    """(owners, found) of `tf1prune.training.channel_params`: the weights
    whose removed channels' biases and batch norms are zeroed (with a
    budget or `prune_channel_params`), and those parameters."""
    if self._parsed.budget is None and \
        not self._parsed.prune_channel_params:
      return [], []
    plain, items = prunable
    owners = [channel_params.owner_of_group(item) for item in items]
    for target in plain:
      shape = target.record.weight.get_shape()
      if shape.is_fully_defined() and \
          target.spec.granularity.removes_outputs(shape.as_list()):
        count = shape.as_list()[-1]
        owners.append(channel_params.Owner(
            [(target.record, -1, tuple(range(count)))], count))
    return owners, channel_params.find(owners)

  def shrink_preview(self, sess, output_node_names, objective='flops'):
    """The `ShrinkReport` the exported, shrunk graph will have, from `sess`.

    `tf1prune.shrink_preview` (FLOPs, parameters and stops with the current
    masks), equal to what `strip_pruning_vars --shrink` reports for a
    checkpoint of `sess`.
    """
    from tf1prune.training import preview  # pylint: disable=g-import-not-at-top
    return preview.shrink_preview(sess, output_node_names, objective)

  def coupled_groups(self):
    """Returns the channel groups pruned as units (`coupled_filter`).

    A list of `CoupledTargets` (`.group` is the `tf1prune.ChannelGroup`), as
    the update op prunes them; see `tf1prune.training.coupled` for which
    groups qualify.
    """
    return self._prunable()[1]

  @staticmethod
  def _units(item):
    """The `CoupledUnits` granularity of a `CoupledTargets` (reads locks)."""
    return item.granularity.units(
        [m.axis for m in item.group.members],
        [m.units for m in item.group.members], item.group.num_units,
        coupled.locked_units(item))

  def _masks(self, plain, coupled, non_finite):
    """Returns {weight name: (mask, threshold)}: the plan's masks as tensors;
    `non_finite` gets the counts the selects made (`compute_masks`)."""
    results = {}
    if self._budget is not None:
      results.update(self._budget_masks(coupled))
      coupled = []
    units = [MaskUnit([t.record.name], t.record.weight, t.record.threshold,
                      t.spec) for t in plain]
    units += [MaskUnit([t.record.name for t in item.targets],
                       [t.record.weight for t in item.targets],
                       item.targets[0].record.threshold, item.spec,
                       self._units(item)) for item in coupled]
    groups = self._plan.global_groups(units, lambda u: u.spec.group)
    for pattern, members in groups.items():
      if not members:
        tf.logging.warning('global_pruning_groups entry %r matches no prunable '
                           'weight', pattern)
    results.update(compute_masks(self._plan, units, self._sparsity,
                                 self._sparsity_for, non_finite))
    return results

  # ------------------------------------------------------------ budget

  def budget_plan(self):
    """The `tf1prune.training.budget.BudgetPlan` (groups, units, cost
    model) of the `budget` hparam, or None without a budget.

    Raises:
      ValueError: the budget cannot be met or used (see `BudgetPlan.use`).
    """
    if self._parsed.budget is None:
      return None
    self._prunable()
    return self._budget[2]

  def _budget_masks(self, items):
    """{weight name: (mask, threshold)} of the budget's groups."""
    _, _, budget, taylor = self._budget
    params = self._params[1]
    with tf.name_scope('budget'):
      locked = []
      for item in items:
        units = coupled.locked_units(item)
        locked.append(tf.zeros([item.group.num_units], tf.bool)
                      if units is None else units)
      current = tf.concat([budget.current_units(i) for i in items], 0)
      allowed = budget.cost_budget(self._global_step, self._parsed.schedule)
      keep, cost = budget.keep_units(
          budget.importance(self._parsed.budget_criterion, params, taylor),
          current, tf.concat(locked, 0), allowed)
      ratio = tf.cast(cost / budget.dense, tf.float32)
      # The threshold of a member: the cost ratio its update reached.
      ratio = tf.identity(tf.assign(self._budget_cost_ratio, ratio))
    results = {}
    for item, unit_mask in zip(items, budget.split(keep)):
      masks = self._units(item).spread(
          [t.record.weight for t in item.targets], unit_mask)
      for target, mask in zip(item.targets, masks):
        results[target.record.name] = (mask, ratio)
    return results

  def channel_params(self):
    """The biases and batch norm scales and offsets zeroed with the
    channels the masks remove (with a budget or `prune_channel_params`):
    [(variable, owner index, units, what)] of
    `tf1prune.training.channel_params.find`."""
    self._prunable()
    return list(self._params[1])

  def channel_params_op(self):
    """An op that zeroes the biases and batch norm scales and offsets of
    the output channels the masks removed (`tf1prune.training.
    channel_params`; with a budget or `prune_channel_params`, else a
    no-op).

    The mask update runs it after writing the masks, and `PruningHook`
    after every training step, so a removed channel is exactly 0 in every
    forward pass and in every checkpoint.
    """
    self._prunable()
    if not self._params[1]:
      return tf.no_op('channel_params')
    return self._zero_removed_params()

  def _zero_removed_params(self):
    owners, found = self._params
    with tf.name_scope(self._parsed.name + '_channel_params'):
      return channel_params.zero_op(found, owners)

  @property
  def cost_ratio(self):
    """With a budget: the float32 scalar variable of the exported graph's
    cost ratio (to the dense model's) that the last mask update reached, 1
    before the first; None without a budget."""
    if self.budget_plan() is None:
      return None
    return self._budget_cost_ratio

  @property
  def cost_ratio_target(self):
    """With a budget: the float64 scalar tensor of the cost ratio the
    schedule allows at the current step; None without a budget."""
    return None if self.budget_plan() is None else self._budget_now[2]

  def budget_report(self, sess):
    """The `tf1prune.latency.budget_report.BudgetReport` of the current masks
    in `sess`: per layer, the widths and the cost before and after, and the
    cost the schedule allows at the current step.

    Raises:
      ValueError: there is no budget.
    """
    plan = self.budget_plan()
    if plan is None:
      raise ValueError('budget_report needs the budget hparam; this Pruning '
                       'has none (budget=%r)' % self._parsed.values()['budget'])
    units, allowed = sess.run(self._budget_now[:2])
    return BudgetReport(plan.budget, plan.model, units, allowed, plan.latency)

  def importance_update_op(self):
    """The op that updates the `taylor` importance averages; run it in
    the same `session.run` as the training op, so that it reads the
    gradients the training step computes (`PruningHook` does). A no-op
    without `budget_criterion=taylor`."""
    if self._parsed.budget is None or \
        self._parsed.budget_criterion != 'taylor':
      return tf.no_op('importance_update')
    self._prunable()
    return self._budget[3].update_op

  def _mask_assign_ops(self, prunable):
    """Returns the assign ops of the masks and thresholds of `prunable`."""
    plain, coupled = prunable
    non_finite = {}
    masks = self._masks(plain, coupled, non_finite)
    ops = []
    for target in _each_target(prunable):
      record = target.record
      mask, threshold = masks[record.name]
      with tf.name_scope(record.name + '_mask_assign'):
        ops.append(_non_finite_warning(record, self._global_step,
                                       non_finite.get(record.name)))
        ops.append(tf.assign(record.threshold, tf.cast(
            threshold, record.threshold.dtype.base_dtype)))
        mask = tf.cast(mask, record.mask.dtype.base_dtype)
        if target.frozen is not None:
          mask = tf.where_v2(target.frozen, record.mask.read_value(), mask)
        ops.append(_assign_mask(record.mask, mask))
    return ops

  def _build_update(self, targets):
    with tf.name_scope(self._parsed.name):
      assigns = self._mask_assign_ops(targets)
      if self._params[1]:
        with tf.control_dependencies(assigns):
          assigns = [self._zero_removed_params()]
      with tf.control_dependencies(assigns):
        step = tf.assign(self._last_update_step,
                         tf.cast(self._global_step, tf.int32),
                         name='last_mask_update_step_assign')
      with tf.control_dependencies([step]):
        return tf.no_op('mask_update')

  def _variables(self, prunable):
    """The variables the update of `prunable` reads or writes."""
    found = [self._global_step, self._last_update_step] + [
        v for t in _each_target(prunable)
        for v in (t.record.weight, t.record.mask, t.record.threshold)]
    if self._budget is not None:
      _, _, budget, taylor = self._budget
      found.append(self._budget_cost_ratio)
      found.extend(v for v, _, _, _ in self._params[1])
      if taylor is not None:
        found.extend(taylor.averages.values())
    return found

  def mask_update_op(self):
    """Returns the op that recomputes every mask now (built once)."""
    if self._update_op is None:
      self._update_op = self._build_update(self._prunable())
    return self._update_op

  def conditional_mask_update_op(self):
    """Returns an op that updates the masks only on pruning steps (built once).

    A pruning step (`PruningPlan.is_pruning_step`): `begin_pruning_step <=
    step`, (`step <= end_pruning_step` or `end_pruning_step == -1`) and
    `last_mask_update_step + pruning_frequency <= step`. On other steps the op
    evaluates that predicate and nothing else: on a TF 2.x graph in a process
    without accelerators, with the masked variables as resource variables
    on one device, it is one `If` op that calls the update only when due;
    elsewhere it is a `tf.cond`, whose untaken update passes a dead signal
    through its ops (`tf1prune.graph.conditional`).

    Returns:
      A bool scalar tensor, True on the steps it updated the masks (as
      contrib's `tf.cond` returned it).
    """
    if self._conditional_op is None:
      gated = self._gated_update_op()
      if not self._params[1] and self._budget is None:
        self._conditional_op = gated
      else:
        # Every step: the importance averages (beside the training op) and
        # the removed channels' parameters (after the update).
        with tf.control_dependencies([gated]):
          params = self.channel_params_op()
        with tf.control_dependencies([params, self.importance_update_op()]):
          self._conditional_op = tf.identity(gated,
                                             name='conditional_mask_update')
    return self._conditional_op

  def _gated_update_op(self):
    """The mask update on pruning steps only (built once)."""
    if self._gated_op is None:
      # Read outside the cond: under TF2 its branches are separate graphs.
      targets = self._prunable()
      with tf.name_scope(self._parsed.name + '_conditional'):
        due = self._plan.is_pruning_step(
            self._global_step, tf.cast(self._last_update_step, tf.int64),
            tf.logical_and, tf.logical_or)
        self._gated_op = conditional.run_if(
            due, lambda: self._build_update(targets),
            self._variables(targets), 'conditional_mask_update')
    return self._gated_op

  def add_pruning_summaries(self):
    """Adds scalar summaries of the schedule, the masks and the thresholds."""
    with tf.name_scope(self._parsed.name + '_summaries'):
      tf.summary.scalar('sparsity', self._sparsity)
      tf.summary.scalar('last_mask_update_step', self._last_update_step)
      for record in masked_weight_records():
        tf.summary.scalar(record.mask.op.name + '/sparsity',
                          tf.nn.zero_fraction(record.mask))
        tf.summary.scalar(record.threshold.op.name + '/threshold',
                          record.threshold)
      if self._parsed.budget is not None:
        budget = self.budget_plan()
        units, _, ratio = self._budget_now
        tf.summary.scalar('budget/cost_ratio_target', ratio)
        tf.summary.scalar('budget/cost_ratio', self._budget_cost_ratio)
        for item, kept in zip(budget.items, budget.split(units)):
          kept = tf.reduce_mean(kept)
          for member in item.group.members:
            tf.summary.scalar(member.name + '/kept_channels', kept)

  def print_hparams(self):
    """Logs every hyperparameter of the spec at INFO level."""
    tf.logging.info('Pruning hyperparameters:\n%s', '\n'.join(
        '  %s = %r' % item for item in sorted(self._parsed.values().items())))
