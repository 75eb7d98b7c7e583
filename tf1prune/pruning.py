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
N:M from `granularity_map`, see `tf1prune.structured`) groups the weight, and
`select` picks the groups to keep by the threshold method (`threshold_method`,
`threshold_decay`).
"""

import re
import sys

import tensorflow.compat.v1 as tf

from tf1prune import locks, schedule
from tf1prune.masks import _global as global_pruning
from tf1prune.masks import _select as thresholds
from tf1prune.masks._granularity import Block, Element
from tf1prune.hparams import get_pruning_hparams, validate_hparams
from tf1prune.masking import masked_weight_records
from tf1prune.regex_maps import RegexMap
from tf1prune.masks._structured import parse_granularity

__all__ = ['Pruning']


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


def _selector(spec, old_threshold):
  """Returns select(scores, sparsity) -> (float32 mask, threshold) for `spec`."""
  decay = float(spec.threshold_decay)

  def smooth(new):
    if decay == 0.0:
      return new
    # A +inf old threshold (nothing finite kept last time) is not averaged.
    return tf.where_v2(tf.is_finite(old_threshold),
                       decay * old_threshold + (1.0 - decay) * new, new)

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
    spec: an hparams object from `get_pruning_hparams()` (None: defaults).
    global_step: int scalar tensor; default the graph's global step.
    sparsity: optional float scalar tensor that replaces the schedule; weights
      in `weight_sparsity_map` then get `sparsity * target / target_sparsity`.

  Raises:
    ValueError: an hparam is out of range, or there is no global step.
  """

  def __init__(self, spec=None, global_step=None, sparsity=None):
    self._spec = spec if spec is not None else get_pruning_hparams()
    validate_hparams(self._spec)
    self._weight_sparsity = RegexMap('weight_sparsity_map',
                                     self._spec.weight_sparsity_map,
                                     _sparsity_value)
    self._block_dims = RegexMap('block_dims_map', self._spec.block_dims_map,
                                _block_dims)
    self._granularity = RegexMap('granularity_map', self._spec.granularity_map,
                                 parse_granularity)
    self._do_not_prune = [re.compile(r) for r in self._spec.do_not_prune if r]
    self._global_groups = global_pruning.parse_groups(
        self._spec.global_pruning_groups)
    if global_step is None:
      global_step = tf.train.get_global_step()
    if global_step is None:
      raise ValueError('Pruning needs a global step: pass global_step=, or '
                       'create one first with '
                       'tf.train.get_or_create_global_step()')
    self._global_step = tf.cast(global_step, tf.int64)
    self._external_sparsity = sparsity
    with tf.name_scope(self._spec.name):
      self._sparsity = (sparsity if sparsity is not None
                        else self._scheduled(self._spec.target_sparsity))
    with tf.variable_scope(self._spec.name, reuse=tf.AUTO_REUSE):
      self._last_update_step = tf.get_variable(
          'last_mask_update_step', [], tf.int32,
          initializer=tf.zeros_initializer(), trainable=False)
    self._update_op = None
    self._conditional_op = None

  @property
  def spec(self):
    return self._spec

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

  def _scheduled(self, target):
    hp = self._spec
    return schedule.sparsity_tensor(
        self._global_step, hp.initial_sparsity, target,
        hp.sparsity_function_begin_step, hp.sparsity_function_end_step,
        hp.sparsity_function_exponent)

  def _sparsity_for(self, name):
    target = self._weight_sparsity.lookup(name)
    if target is None:
      return self._sparsity
    if self._external_sparsity is not None:
      scale = target / self._spec.target_sparsity if self._spec.target_sparsity else 0.0
      return tf.minimum(self._external_sparsity * scale, 1.0)
    return self._scheduled(target)

  def _granularity_for(self, name):
    hp = self._spec
    structured = self._granularity.lookup(name)
    if structured is not None:
      if self._block_dims.lookup(name) is not None:
        raise ValueError('weight %s is in both granularity_map and '
                         'block_dims_map; keep it in one of them' % name)
      # Frozen N:M reads the current mask; _prunable() ran outside any cond.
      mask = self._masks_by_name[name] if structured.frozen else None
      return structured.build(hp.group_importance, mask)
    dims = self._block_dims.lookup(name, (hp.block_height, hp.block_width))
    if tuple(dims) == (1, 1):
      return Element()
    return Block(dims[0], dims[1], hp.block_pooling_function)

  def _prunable(self):
    records = masked_weight_records()
    # Mask entries under a lock keep their value (tf1prune.locks).
    self._frozen = locks.frozen_mask_regions(records)
    names = [r.name for r in records]
    self._masks_by_name = {r.name: r.mask for r in records}
    for name, regex_map in (('weight_sparsity_map', self._weight_sparsity),
                            ('block_dims_map', self._block_dims),
                            ('granularity_map', self._granularity)):
      unmatched = regex_map.unmatched(names)
      if unmatched:
        tf.logging.warning('%s entries %s match no masked weight (%s)', name,
                           unmatched, ', '.join(names))
    # do_not_prune names layers: contrib matched the mask's name, so a regex
    # may match the weight's name or its mask's.
    layers = [(r.name, r.mask.op.name) for r in records]
    unmatched = [r.pattern for r in self._do_not_prune
                 if not any(r.search(n) for pair in layers for n in pair)]
    if unmatched:
      tf.logging.warning('do_not_prune entries %s match no masked weight (%s)',
                         unmatched, ', '.join(names))
    return [r for r, pair in zip(records, layers)
            if not any(regex.search(n) for regex in self._do_not_prune
                       for n in pair)]

  def _mask_assign_ops(self, records):
    """Returns the assign ops of the masks and thresholds of `records`."""
    ops = []
    grouped = global_pruning.group_masks(
        self._global_groups, records, self._granularity_for, self._sparsity,
        lambda r: _selector(self._spec, r.threshold),
        lambda name: self._weight_sparsity.lookup(name) is not None)
    for record in records:
      with tf.name_scope(record.name + '_pruning_ops'):
        if record.name in grouped:
          mask, threshold = grouped[record.name]
        else:
          select = _selector(self._spec, record.threshold)
          mask, threshold = self._granularity_for(record.name).compute_mask(
              record.weight, self._sparsity_for(record.name), select)
        ops.append(_non_finite_warning(record, self._global_step))
        ops.append(tf.assign(record.threshold, threshold))
        mask = tf.cast(mask, record.mask.dtype.base_dtype)
        if record.name in self._frozen:
          mask = tf.where_v2(self._frozen[record.name],
                             record.mask.read_value(), mask)
        ops.append(tf.assign(record.mask, mask))
    return ops

  def _build_update(self, records):
    with tf.name_scope(self._spec.name):
      assigns = self._mask_assign_ops(records)
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
      hp = self._spec
      # Read outside the cond: under TF2 its branches are separate graphs.
      records = self._prunable()
      with tf.name_scope(hp.name + '_conditional'):
        step = self._global_step
        in_range = tf.logical_and(
            step >= hp.begin_pruning_step,
            tf.logical_or(step <= hp.end_pruning_step, hp.end_pruning_step < 0))
        due = (tf.cast(self._last_update_step, tf.int64) +
               hp.pruning_frequency) <= step
        self._conditional_op = tf.cond(
            tf.logical_and(in_range, due), lambda: self._build_update(records),
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
