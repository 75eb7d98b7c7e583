"""Lottery tickets: rewind the unpruned weights to early values, keep the masks.

    >>> import numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   w = tf.get_variable('fc/weights', initializer=np.arange(1., 5.))
    ...   _ = tf1prune.apply_mask(w, 'fc')
    ...   ticket = tf1prune.LotteryTicket()
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     sess.run(ticket.snapshot_op())           # remember step 0
    ...     _ = sess.run(tf.assign(w, [-9., 8., 7., 6.]))  # "training"
    ...     sess.run(ticket.prune_op(0.5))           # keep the 2 largest
    ...     sess.run(ticket.rewind_op())             # back to step 0, masked
    ...     sess.run(w).tolist()
    [1.0, 2.0, 0.0, 0.0]

The workflow (Frankle & Carbin, "The Lottery Ticket Hypothesis", 2019):
initialize, `snapshot_op()` (at step 0, or at step k for late rewinding), train,
`prune_op(round_sparsity(r, rate))`, `rewind_op(reinitialize=optimizer
variables)`, and again for the next round. `prune_op` ranks `|mask * w|`, so a
weight pruned in an earlier round scores 0 and stays pruned: masks only shrink.
`rewind_op` writes `snapshot * mask` into the raw variables, so pruned entries
hold exact zeros. Rewinding the optimizer's slots too (`reinitialize=`) keeps
momentum from moving them; `examples/lottery_ticket.py` runs it end to end.

Snapshots are non-trainable variables `<scope>/<weight name>` (default scope
`lottery_ticket`), saved in checkpoints like any other, so a ticket survives a
restart. Only masked weights that are variables are handled; others are
skipped with a warning.
"""

import numbers

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.graph.locks import frozen_mask_regions, lock_records
from tf1prune.graph.masking import masked_weight_records
from tf1prune.masks import Element, global_masks, magnitude_mask
from tf1prune.plan.schedule import round_sparsity

__all__ = ['LotteryTicket', 'round_sparsity']


class LotteryTicket(object):
  """Snapshots of the masked weights, and the ops of the lottery workflow.

  Args:
    records: the `MaskedWeight`s to handle; default all of the graph
      (`masked_weight_records()`).
    scope: variable scope of the snapshot variables.

  Raises:
    ValueError: no record is a variable, or a record is a lock under its
      mask (`apply_mask(lock(w))`: build `lock(apply_mask(w))` instead).
  """

  def __init__(self, records=None, scope='lottery_ticket'):
    records = masked_weight_records() if records is None else list(records)
    variables = {v.op.name: v for v in tf.global_variables()}
    # Checked before any snapshot variable is made.
    locked = sorted({r.name for r in records} & {
        lock.effective.op.name for lock in lock_records()})
    if locked:
      raise ValueError(
          'LotteryTicket: the masked weights %s are locks under the mask '
          '(apply_mask(lock(w))), whose snapshot and rewind would not see '
          'the lock; build them as lock(apply_mask(w)), the order that '
          'keeps the locked entries whatever the mask' % ', '.join(locked))
    self._entries = []
    skipped = []
    with tf.variable_scope(scope, reuse=tf.AUTO_REUSE):
      for record in records:
        var = variables.get(record.name)
        if var is None:
          skipped.append(record.name)
          continue
        snapshot = tf.get_variable(
            record.name, var.get_shape(), var.dtype.base_dtype,
            initializer=tf.zeros_initializer(), trainable=False)
        self._entries.append((record, var, snapshot))
      self._taken = tf.get_variable('snapshot_taken', [], tf.bool,
                                    initializer=tf.zeros_initializer(),
                                    trainable=False)
    if skipped:
      tf.logging.warning('LotteryTicket skips masked weights that are not '
                         'variables: %s', ', '.join(skipped))
    if not self._entries:
      raise ValueError('LotteryTicket found no masked weight that is a '
                       'variable (records: %s); build the model with '
                       'apply_mask or the masked layers first' %
                       [r.name for r in records])

  @property
  def records(self):
    """The handled `MaskedWeight`s."""
    return [record for record, _, _ in self._entries]

  @property
  def snapshots(self):
    """Dict weight name -> its snapshot variable."""
    return {record.name: snapshot for record, _, snapshot in self._entries}

  def snapshot_op(self):
    """Returns an op storing the current weights as the rewind point."""
    with tf.name_scope('lottery_snapshot'):
      assigns = [tf.assign(snapshot, var.read_value())
                 for _, var, snapshot in self._entries]
      with tf.control_dependencies(assigns):
        return tf.assign(self._taken, True).op

  def prune_op(self, sparsity, global_pruning=False):
    """Returns an op setting each mask to the top `|mask * w|` at `sparsity`.

    Args:
      sparsity: float scalar (number or tensor) in [0, 1), the fraction of
        each weight (or with `global_pruning`, of all of them together) that
        is pruned afterwards; entries pruned before score 0.
      global_pruning: one threshold over all the weights, instead of one per
        weight.

    Mask entries under a lock keep their value, as in `Pruning`'s update, so
    a weight with locked entries can end a few entries off `sparsity`.

    Returns:
      An op that also sets each threshold variable; with a tensor `sparsity`
      outside [0, 1) it fails with InvalidArgumentError.

    Raises:
      ValueError: `sparsity` is a number outside [0, 1).
    """
    checks = []
    if isinstance(sparsity, np.ndarray) and sparsity.ndim == 0:
      sparsity = sparsity.item()     # a number: checked now, not in the run
    if isinstance(sparsity, numbers.Real):
      if isinstance(sparsity, bool) or not 0.0 <= sparsity < 1.0:
        raise ValueError('sparsity must be in [0, 1), got %r: the fraction of '
                         'each weight that is pruned' % (sparsity,))
    else:
      value = tf.convert_to_tensor(sparsity)
      checks.append(tf.Assert(
          tf.logical_and(value >= 0.0, value < 1.0),
          ['LotteryTicket.prune_op: sparsity must be in [0, 1), got', value]))
    with tf.name_scope('lottery_prune'), tf.control_dependencies(checks):
      scores = [tf.abs(record.mask * var.read_value())
                for record, var, _ in self._entries]
      if global_pruning:
        masks = global_masks([(s, Element()) for s in scores], sparsity,
                             magnitude_mask)
      else:
        masks = [magnitude_mask(s, sparsity) for s in scores]
      # Mask entries under a lock (lock(apply_mask(w))) keep their value,
      # as in Pruning's mask update.
      frozen = frozen_mask_regions(self.records)
      ops = []
      for (record, _, _), (mask, threshold) in zip(self._entries, masks):
        mask = tf.cast(mask, record.mask.dtype.base_dtype)
        if record.name in frozen:
          mask = tf.where_v2(frozen[record.name], record.mask.read_value(),
                             mask)
        ops.append(tf.assign(record.mask, mask))
        ops.append(tf.assign(record.threshold, tf.cast(
            threshold, record.threshold.dtype.base_dtype)))
      return tf.group(*ops)

  def rewind_op(self, reinitialize=None):
    """Returns an op resetting each weight to `snapshot * mask`.

    Args:
      reinitialize: optional list of variables to re-initialize too, e.g. the
        optimizer's slots (`optimizer.variables()`) and the global step.

    Returns:
      An op; it fails with InvalidArgumentError if `snapshot_op` never ran.
    """
    with tf.name_scope('lottery_rewind'):
      check = tf.Assert(self._taken, [
          'LotteryTicket.rewind_op: no snapshot yet; run snapshot_op() after '
          'initializing (or at the rewind step)'])
      with tf.control_dependencies([check]):
        ops = [tf.assign(var, record.mask * snapshot.read_value())
               for record, var, snapshot in self._entries]
      if reinitialize:
        ops.append(tf.variables_initializer(list(reinitialize)))
      return tf.group(*ops)
