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

The hook runs `conditional_mask_update_op()` after each training step, in a
run of its own: the update then reads the weights that step wrote, never
half-written ones.

Resuming: `MonitoredTrainingSession` runs its `CheckpointSaverHook` before the
user's hooks, so the checkpoint of a pruning step holds the masks from before
that step's update. Given a `Pruning`, the hook therefore also runs the
conditional update once when the session is created or restored: a run killed
after any checkpoint continues exactly as if it had never stopped (the update
is a no-op when the checkpoint already holds it).

Between-graph replication: pass the hook in `chief_only_hooks`, so that one
process updates the masks; see the README section "Reliability".
"""

import tensorflow.compat.v1 as tf

__all__ = ['PruningHook', 'train']


class PruningHook(tf.train.SessionRunHook):
  """Runs a mask update op after every `session.run` of the training loop.

  Args:
    pruning: a `Pruning` (its `conditional_mask_update_op()` is used) or an op
      to run as it is.
  """

  def __init__(self, pruning):
    self._pruning = pruning
    self._op = None

  def begin(self):
    if hasattr(self._pruning, 'conditional_mask_update_op'):
      self._op = self._pruning.conditional_mask_update_op()
    else:
      self._op = self._pruning

  def after_create_session(self, session, coord):
    # Only the conditional op is known to be idempotent within a step.
    if hasattr(self._pruning, 'conditional_mask_update_op'):
      session.run(self._op)

  def after_run(self, run_context, run_values):
    run_context.session.run(self._op)


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
