"""Running the mask update beside training: a SessionRunHook, and slim's train.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> step = tf.train.get_or_create_global_step()
    >>> w = tf1prune.apply_mask(tf.get_variable('w', initializer=[[1., 2.], [3., 4.]]))
    >>> pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
    ...     'target_sparsity=0.5,sparsity_function_end_step=1,pruning_frequency=1'))
    >>> train_op = tf.assign_add(step, 1)
    >>> hook = tf1prune.PruningHook(pruning)      # or PruningHook(update_op)
    >>> with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
    ...   while sess.run(step) < 2:
    ...     _ = sess.run(train_op)
    ...   print(sess.run(tf1prune.get_masks()[0]))
    [[0. 0.]
     [1. 1.]]

The hook runs the update after each training step, in a run of its own: the
update then reads the weights that step wrote, never half-written ones. Given
a `Pruning`, it runs that run only when an update can be due: it fetches the
global step with the training step (`before_run`), keeps the step of the last
update in Python (read back from the graph after the session is created or
restored, and after every update it runs) and checks `begin_pruning_step`,
`end_pruning_step` and `pruning_frequency` itself. A step on which nothing is
due costs one scalar fetch and no extra `session.run`. The check errs on the
side of running: the fetched step may be read before or after the training
step increments it, so the hook runs the update op (which decides exactly, on
the real step) when it would be due at that step or the next; if another
process moves the step further, a due update runs one run later.

Resuming: `MonitoredTrainingSession` runs its `CheckpointSaverHook` before the
hooks given in `hooks=` (after those in `chief_only_hooks`), so the checkpoint
of a pruning step can hold the masks from before that step's update. Given a
`Pruning`, the hook therefore also runs the conditional update once when the
session is created or restored: a run killed after any checkpoint continues
exactly as if it had never stopped (the update is a no-op when the checkpoint
already holds it). Before that update it captures the current-value locks the
update reads (`apply_mask(lock(w))`) that are not captured yet, as `LockHook`
would: in `chief_only_hooks` this hook runs before a `LockHook` in `hooks=`.

Between-graph replication: pass the hook in `chief_only_hooks`, so that one
process updates the masks; see docs/reliability.md.

Checkpoints for unpatched code: `PruningHook(pruning, bake_masks=True)` writes
`mask * w` into every masked raw variable (and into its
`ExponentialMovingAverage` shadow, what eval scripts restore) after every step,
so an eval, freeze or serving script that knows nothing of masks reads the
pruned model from the checkpoint. See `PruningHook` for the cost and for where
to put the hook so that the saved values are exact.
"""

import tensorflow.compat.v1 as tf

from tf1prune.graph.locks import (bake_masks_op, capture_lock_values_op,
                                  lock_records)
from tf1prune.graph.masking import graph_variables, masked_weight_records

__all__ = ['PruningHook', 'train']

_EMA_SUFFIX = '/ExponentialMovingAverage'


def _bake_op(after):
  """Returns an op that, after `after`, writes `mask * w` into each masked
  variable and into its moving-average shadow (`<w>/ExponentialMovingAverage`,
  the name `tf.train.ExponentialMovingAverage` gives it by default)."""
  with tf.control_dependencies([after]):
    ops = [bake_masks_op()]
    variables = graph_variables(tf.get_default_graph())
    for record in masked_weight_records():
      shadow = variables.get(record.name + _EMA_SUFFIX)
      if shadow is None:
        continue
      with tf.name_scope(shadow.op.name + '_bake'):
        mask = tf.cast(record.mask.read_value(), shadow.dtype.base_dtype)
        ops.append(tf.assign(shadow, mask * shadow.read_value()))
    return tf.group(*ops, name='bake_masks_and_averages')


class PruningHook(tf.train.SessionRunHook):
  """Runs the mask update after the training steps on which it can be due.

  Args:
    pruning: a `Pruning` (its `conditional_mask_update_op()` is run after the
      steps on which an update can be due, see the module docstring) or an op
      to run as it is after every `session.run`.
    bake_masks: also write `mask * w` into every masked raw variable and its
      `ExponentialMovingAverage` shadow after every step (and the locked
      values, as `tf1prune.bake_masks_op()` does), so checkpoints hold the
      pruned weights and unpatched eval/export code sees the pruned model.
      Costs one `session.run` and one pass over the masked weights per step.
      A checkpoint is exact (raw weight == mask * raw weight, for any
      optimizer) when the saver runs after this hook: put the hook in
      `chief_only_hooks` of `MonitoredTrainingSession` (those run before its
      `CheckpointSaverHook`). In `hooks=` the saver runs first: the saved
      raw weights are the ones baked one step earlier plus one optimizer
      step, exact for plain SGD (pruned entries get a zero gradient), not for
      momentum or Adam, whose accumulators still move them.
  """

  def __init__(self, pruning, bake_masks=False):
    self._pruning = pruning
    self._bake = bool(bake_masks)
    self._gated = hasattr(pruning, 'conditional_mask_update_op')
    # With a budget or prune_channel_params: more to run after each step.
    self._budget = self._gated and (
        pruning.budget_plan() is not None or
        pruning.pruning_spec.prune_channel_params)
    self._op = None
    self._beside = None
    self._params = None
    self._capture = None
    self._last_read = None
    self._step = None
    self._last = None

  def begin(self):
    if not self._gated:
      self._op = self._pruning
      if self._bake:
        self._op = _bake_op(self._op)
      return
    # The update reads the locks under a mask (apply_mask(lock(w))): they
    # must hold their value before the update run by after_create_session,
    # which runs before LockHook's when this hook is in chief_only_hooks.
    weights = set(r.weight.name for r in masked_weight_records())
    read = [l for l in lock_records() if l.effective.name in weights]
    self._capture = capture_lock_values_op(locks=read) if read else None
    if self._budget:
      # With a budget: the importance averages beside the training op (they
      # read its gradients), the update after it, then the removed
      # channels' parameters zeroed after every step.
      # pylint: disable=protected-access
      update = self._pruning._gated_update_op()
      self._beside = self._pruning.importance_update_op()
      with tf.control_dependencies([update]):
        self._params = self._pruning.channel_params_op()
    else:
      update = self._pruning.conditional_mask_update_op()
    if self._bake:
      update = _bake_op(update)
    self._op = update
    with tf.control_dependencies([update]):
      # Read after the update: the value it left, never a stale one.
      self._last_read = tf.identity(
          self._pruning.last_update_step.read_value())
    self._step = self._pruning.global_step

  def after_create_session(self, session, coord):
    # Only the conditional op is known to be idempotent within a step.
    if self._gated:
      if self._capture is not None:
        session.run(self._capture)
      self._last = int(session.run(self._last_read))

  def before_run(self, run_context):
    if self._budget:
      return tf.train.SessionRunArgs([self._step, self._beside])
    if self._gated and not self._bake:
      return tf.train.SessionRunArgs(self._step)
    return None

  def after_run(self, run_context, run_values):
    if not self._gated:
      run_context.session.run(self._op)
    elif self._budget:
      due = self._bake or self._may_be_due(int(run_values.results[0]))
      fetches = [self._params] + ([self._last_read] if due else [])
      results = run_context.session.run(fetches)
      if due:
        self._last = int(results[1])
    elif self._bake or self._may_be_due(int(run_values.results)):
      self._last = int(run_context.session.run(self._last_read))

  def _may_be_due(self, step):
    """Whether an update can be due at `step` or `step + 1`.

    `step` was read during the run, before or after the training op
    incremented it; the step after the run is at least `step`.
    """
    hp = self._pruning.spec
    if self._last + hp.pruning_frequency > step + 1:
      return False
    end = hp.end_pruning_step
    return step + 1 >= hp.begin_pruning_step and (end < 0 or step <= end)


def train(train_op, logdir, mask_update_op, train_step_fn=None, **kwargs):
  """tf-slim's `learning.train`, also running `mask_update_op` after each step.

  Args:
    train_op, logdir: as in `tf_slim.learning.train`.
    mask_update_op: the op to run after every step, typically
      `Pruning.conditional_mask_update_op()`.
    train_step_fn: the step function to wrap; default slim's `train_step`.
    **kwargs: passed on to `tf_slim.learning.train` (number_of_steps, saver,
      save_interval_secs, ...).

  Returns:
    The final loss, as `tf_slim.learning.train` returns it.
  """
  from tf_slim import learning  # imported on use: it pulls in Supervisor.
  step_fn = train_step_fn or learning.train_step

  def step_with_pruning(sess, op, global_step, step_kwargs):
    total_loss, should_stop = step_fn(sess, op, global_step, step_kwargs)
    sess.run(mask_update_op)
    return total_loss, should_stop

  return learning.train(train_op, logdir, train_step_fn=step_with_pruning,
                        **kwargs)
