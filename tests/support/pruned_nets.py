"""Nets pruned by coupled filter groups at 50% and checkpointed, to shrink.

    prune_and_save(lambda: _mobile_nets.build('mobilenet_v1', 64), directory)

`prune_and_save` builds a net in a new graph, gives its biases and batch-norm
variables random values (`randomize_batch_norm`: the channels the mask
removes then do not give 0), prunes every masked weight but the logits by
`coupled_filter` to 50% and writes a checkpoint. The shrink's tests of real
nets (tests/export/shrink/) and its benchmarks (bench/shrink_mobile.py,
bench/shrink_resnet.py) start from it.
"""

import collections
import os

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune

COUPLED_HALF = ('target_sparsity=0.5,granularity_map=[.*:coupled_filter],'
                'do_not_prune=[logits]')
# Masks updated on every step from step 0, at 50% from step 2 on.
_WHILE_TRAINING = (',begin_pruning_step=0,pruning_frequency=1,'
                   'sparsity_function_begin_step=0,'
                   'sparsity_function_end_step=2')

PrunedNet = collections.namedtuple(
    'PrunedNet', 'images output groups graph masked masks')


def randomize_batch_norm(sess, rs):
  """Gives the biases and batch-norm variables of the default graph random
  values (`rs` a NumPy RandomState): beta, moving_mean and biases from
  N(0, 0.2), gamma and moving_variance from U(0.5, 1.5).

  One `session.run` of their initializers with the values fed: a `load`
  per variable prepares a run of a large graph each time (40 s for a
  MobileNet with its update ops).
  """
  feeds, initializers = {}, []
  for var in tf.global_variables():
    base = var.op.name.rsplit('/', 1)[-1]
    shape = var.get_shape().as_list()
    if base in ('beta', 'moving_mean', 'biases'):
      value = rs.normal(0, 0.2, shape)
    elif base in ('gamma', 'moving_variance'):
      value = rs.uniform(0.5, 1.5, shape)
    else:
      continue
    feeds[var.initializer.inputs[1]] = value.astype(np.float32)
    initializers.append(var.initializer)
  sess.run(initializers, feeds)


def prune_and_save(build, directory, train_steps=0, batch=2, read_masks=False):
  """Builds a net, prunes it by coupled filter groups to 50%, checkpoints it.

  Args:
    build: () -> (images placeholder [batch, size, size, 3], logits tensor
      [batch, classes]), building the net under `tf1prune.pruning_scope()`
      (or with masked layers) into the default graph; the logits' scope is
      `logits`. It runs in a new graph with random seed 0.
    directory: where the checkpoint goes (model.ckpt-<global step>).
    train_steps: 0: the masks are set once, at 50%, on step 1. More: that
      many steps of SGD on random images and labels (`batch` of each, 10
      classes), the masks updated after each step
      (`conditional_mask_update_op`), at 50% from step 2 on.
    batch: the batch size of the training steps.
    read_masks: also return the value of every mask (a net's worth of
      floats: leave it off for big nets).

  Returns:
    PrunedNet: images and output (the placeholder's and the logits' node
    names), groups (the coupled channel groups, `ChannelGroup`s), graph
    (the tf.Graph), masked ({masked weight op name: weight op name}) and
    masks ({weight op name: mask value}, or None without `read_masks`).
  """
  with tf.Graph().as_default() as graph:
    tf.set_random_seed(0)
    images, logits = build()
    step = tf.train.get_or_create_global_step()
    hparams = tf1prune.get_pruning_hparams()
    if train_steps:
      labels = tf.placeholder(tf.int32, [None], name='labels')
      loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
      train = tf.train.GradientDescentOptimizer(0.01).minimize(
          loss, global_step=step)
      pruning = tf1prune.Pruning(hparams.parse(COUPLED_HALF + _WHILE_TRAINING))
      with tf.control_dependencies([train]):
        update = pruning.conditional_mask_update_op()
    else:
      pruning = tf1prune.Pruning(hparams.parse(
          COUPLED_HALF + ',sparsity_function_end_step=1'))
      update = pruning.mask_update_op()
    groups = [item.group for item in pruning.coupled_groups()]
    masked = {t.op.name: w.op.name for t, w in zip(
        tf1prune.get_masked_weights(), tf1prune.get_weights())}
    rs = np.random.RandomState(0)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      randomize_batch_norm(sess, rs)
      if train_steps:
        size = images.shape.as_list()[1]
        for _ in range(train_steps):
          sess.run(update, {images: rs.uniform(0, 1, [batch, size, size, 3]),
                            labels: rs.randint(0, 10, [batch])})
      else:
        sess.run(tf.assign(step, 1))
        sess.run(update)
      masks = None
      if read_masks:
        masks = {w.op.name: m for w, m in zip(
            tf1prune.get_weights(), sess.run(tf1prune.get_masks()))}
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                            global_step=step)
  return PrunedNet(images.op.name, logits.op.name, groups, graph, masked,
                   masks)
