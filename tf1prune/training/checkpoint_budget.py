"""One-shot pruning of a saved checkpoint to a budget; training resumes from it.

    >>> import os, tempfile, tensorflow.compat.v1 as tf, tf1prune
    >>> from tf1prune.training.checkpoint_budget import prune_to_budget
    >>> work = tempfile.mkdtemp()
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [None, 8, 8, 3])
    ...   net = tf1prune.masked_conv2d(x, 16, 3, scope='a')
    ...   net = tf1prune.masked_conv2d(net, 16, 3, scope='b')
    ...   _ = tf.nn.softmax(tf1prune.masked_fully_connected(
    ...       tf.reshape(net, [-1, 1024]), 10, scope='logits'))
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     path = tf.train.Saver().save(sess, os.path.join(work, 'model.ckpt'))
    >>> result = prune_to_budget(path, os.path.join(work, 'pruned'),
    ...                          'flops:0.5')
    >>> result['budget']['totals']['flops'][1] <= 0.5 * result['budget'][
    ...     'totals']['flops'][0]
    True

`prune_to_budget` reads the checkpoint's meta graph (its masked weights,
from `tf1prune.apply_mask`, `masked_conv2d` or `pruning_scope`), builds the
budget's `Pruning` on it with the schedule at its end, restores the
checkpoint and runs one mask update: the channel groups are ranked
globally and pruned until the exported graph costs the budget
(`tf1prune.training.budget`). The new masks, the weights and their
optimizer slots zeroed where the masks are, and the zeroed biases and
batch norms of the removed channels are written as a new checkpoint
(`tf1prune.export.checkpoint_prune.CheckpointState`), with the meta graph;
training resumes from it and fine-tunes the pruned model.

From the shell: `prune_checkpoint --checkpoint=DIR --output_dir=NEW_DIR
--budget=flops:0.5 [--hparams=budget_criterion=l1,channel_group_multiple=8]`.
"""

import os

import numpy as np

from tf1prune.export.checkpoint_prune import (CheckpointPruneError,
                                              CheckpointState,
                                              check_output_dir)
from tf1prune.graph.masking import masked_weight_records
from tf1prune.plan.hparams import HParams, get_pruning_hparams
from tf1prune.training.pruning import Pruning

__all__ = ['prune_to_budget']


def _hparams(hparams, budget):
  if isinstance(hparams, HParams):
    hparams = HParams(**hparams.values())
  else:
    try:
      hparams = get_pruning_hparams().parse(hparams or '')
    except ValueError as e:
      raise CheckpointPruneError('--hparams: %s' % e)
  hparams.budget = budget
  if hparams.name == get_pruning_hparams().name:
    hparams.name = 'prune_checkpoint'   # beside the training graph's ops
  if hparams.budget_criterion == 'taylor':
    raise CheckpointPruneError(
        'budget_criterion=taylor ranks channels by the gradients of training '
        'steps; a checkpoint has none: give l1, l2 or bn_scale')
  return hparams


def prune_to_budget(checkpoint, output_dir, budget, hparams='',
                    progress=None):
  """Writes a copy of `checkpoint` pruned to `budget`; returns a report.

  Args:
    checkpoint: a checkpoint prefix, or a folder (its latest checkpoint),
      with its `.meta` file.
    output_dir: a new folder (it must not exist) for the pruned checkpoint.
    budget: the `budget` hparam, e.g. 'flops:0.5' or 'params:2e6'.
    hparams: more pruning hparams (a `.parse()` string or an HParams object):
      the criterion, the channel rounding, `do_not_prune`, ...
    progress: optional `progress(stage, done, total, fraction)` callable.

  Returns:
    A dict: 'checkpoint' (the new prefix), 'weights' (as
    `tf1prune.export.prune_checkpoint` reports them), 'budget' (the
    `BudgetReport` as a dict) and 'table' (its text table).

  Raises:
    CheckpointPruneError: a bad argument or checkpoint, or a budget that
      cannot be met (nothing is written).
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  check_output_dir(output_dir)
  hparams = _hparams(hparams, budget)
  state = CheckpointState(checkpoint)
  meta = state.prefix + '.meta'
  if not os.path.exists(meta):
    raise CheckpointPruneError(
        'a budget needs the checkpoint\'s meta graph (its layers and masked '
        'weights), and %s is missing; save with tf.train.Saver, which '
        'writes it' % meta)
  weight_of_mask = dict((m, w) for w, m in state.masks.items())
  with tf.Graph().as_default() as graph:
    saver = tf.train.import_meta_graph(meta, clear_devices=True)
    records = masked_weight_records(graph)
    if not records:
      raise CheckpointPruneError(
          '%s has no masked weights: build the model with tf1prune\'s masked '
          'layers or under tf1prune.pruning_scope(), so that pruning has '
          'masks to set' % meta)
    before = set(v.op.name for v in tf.global_variables())
    try:
      pruning = Pruning(hparams, global_step=tf.constant(
          hparams.sparsity_function_end_step, tf.int64))
      update = pruning.mask_update_op()
    except ValueError as e:
      raise CheckpointPruneError(str(e))
    added = [v for v in tf.global_variables() if v.op.name not in before]
    params = [variable for variable, _, _, _ in pruning.channel_params()]
    with tf.Session() as sess:
      saver.restore(sess, state.prefix)
      sess.run(tf.variables_initializer(added))
      sess.run(update)
      report = pruning.budget_report(sess)
      masks = sess.run(dict((r.mask.op.name, r.mask) for r in records))
      values = sess.run(dict((v.op.name, v) for v in params))
  state.load(progress)
  weights = []
  for mask_name, mask in sorted(masks.items()):
    weight = weight_of_mask.get(mask_name)
    if weight is not None and not (mask != 0).all():
      weights.append(state.prune(weight, mask != 0))
  for name, value in values.items():
    if name in state.values:
      state.values[name] = np.asarray(value, state.values[name].dtype)
  return {'checkpoint': state.write(output_dir), 'weights': weights,
          'budget': report.to_dict(), 'table': report.format_table()}
