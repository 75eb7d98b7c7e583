"""Prune a mobile net by coupled filter groups, strip it, shrink it; the ideal.

    >>> import numpy as np
    >>> from tests.support.pruned_nets import live_fraction
    >>> live_fraction(np.array([[1.0, 0.0], [2.0, 0.0]]))   # 1 of 2 outputs
    0.5

`prune_net` builds one of `bench._mobile_nets`' nets in a fresh graph, trains
it a few steps on random data with `Pruning` at 50% (`coupled_filter`,
`do_not_prune=[logits]`) and writes a checkpoint; `ideal_flops` computes,
with NumPy from the masks and the channel groups, the FLOPs the mask leaves:
a group unit is dead when every member's mask is zero on it, each layer then
costs its FLOPs times the live fractions of its input and output channels.
"""

import os

import numpy as np
import tensorflow.compat.v1 as tf

from tests.support import graphs as graph_support
import tf1prune
from tests.support.graphs import read_graph
from bench import _mobile_nets

HPARAMS = ('target_sparsity=0.5,begin_pruning_step=0,pruning_frequency=1,'
           'sparsity_function_begin_step=0,sparsity_function_end_step=2,'
           'granularity_map=[.*:coupled_filter],do_not_prune=[logits]')


def live_fraction(weight):
  """Fraction of the output channels (last axis) with a nonzero entry."""
  weight = np.asarray(weight)
  return float(np.any(weight.reshape(-1, weight.shape[-1]) != 0,
                      axis=0).mean())


def prune_net(name, size, directory, steps=3, batch=2):
  """Trains net `name` a few steps while pruning; checkpoints it.

  Returns:
    dict: images (input node name), output (output node name), masks
    {layer op name: mask of its weight}, live {layer op name: bool per
    output channel}, inputs {layer op name: its data input tensor name},
    graph_def (the training GraphDef).
  """
  with tf.Graph().as_default() as graph:
    tf.set_random_seed(0)
    images, logits = _mobile_nets.build(name, size)
    step = tf.train.get_or_create_global_step()
    labels = tf.placeholder(tf.int32, [None], name='labels')
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train = tf.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=step)
    pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(HPARAMS))
    with tf.control_dependencies([train]):
      update = pruning.conditional_mask_update_op()
    groups = [item.group for item in pruning.coupled_groups()]
    rs = np.random.RandomState(0)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      _mobile_nets.randomize_normalization(sess, rs)
      for _ in range(steps):
        sess.run(update, {images: rs.uniform(0, 1, [batch, size, size, 3]),
                          labels: rs.randint(0, 10, [batch])})
      masks = {w.op.name: m for w, m in zip(
          tf1prune.get_weights(), sess.run(tf1prune.get_masks()))}
      masked = {t.op.name: w.op.name for t, w in zip(
          tf1prune.get_masked_weights(), tf1prune.get_weights())}
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                            global_step=step)
    live = _live_outputs(graph, groups, masks, masked)
    return dict(images=images.op.name, output=logits.op.name, live=live,
                graph=graph, groups=len(groups))


def _live_outputs(graph, groups, masks, masked):
  """{layer op name: bool per output channel} from the masks and groups.

  `masks` is {raw weight name: mask}, `masked` {masked weight op name: raw
  weight name}.
  """
  dead_units = {}
  for index, group in enumerate(groups):
    alive = np.zeros(group.num_units, bool)
    for member in group.members:
      mask = masks[member.name]
      axis = member.axis % mask.ndim
      nonzero = np.moveaxis(mask, axis, -1).reshape(-1, mask.shape[axis])
      np.logical_or.at(alive, np.asarray(member.units),
                       nonzero.any(axis=0))
    dead_units[index] = alive
  live = {}
  for op in graph.get_operations():
    if op.type not in ('Conv2D', 'MatMul'):
      continue
    weight = op.inputs[1]
    while weight.op.type == 'Identity':
      weight = weight.op.inputs[0]
    weight = masked.get(weight.op.name)
    width = op.outputs[0].shape.as_list()[-1]
    out = np.ones(width, bool)
    for index, group in enumerate(groups):
      for member in group.members:
        if member.name == weight and member.axis == -1:
          out = dead_units[index][np.asarray(member.units)]
    live[op.name] = out
  return live


def ideal_flops(net, report):
  """FLOPs of the report's layers with the channels the mask killed gone."""
  return graph_support.ideal_flops(net['graph'], report, net['live'])


def run(path, feed, output):
  with tf.Session(graph=read_graph(path)) as sess:
    return sess.run(output + ':0', feed)
