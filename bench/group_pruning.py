"""Benchmark: coupled-group filter pruning vs per-layer filter pruning, equal FLOPs.

    python -m bench.group_pruning --quick      # smoke run (bench/run_all --quick)
    python -m bench.group_pruning              # a few minutes on 2 cores

A small ResNet from `tf_slim.nets.resnet_v1` blocks (two blocks of two
bottleneck units, no root block, no batch norm so that it builds on TF 2.x),
masked by `tf1prune.pruning_scope`, on the 8x8 digits embedded in
scikit-learn. One dense pretraining, then per method the same budget: gradual
pruning to the target, then fine-tuning with the masks fixed.

* `coupled`: `granularity_map=[.*:coupled_filter]`, the residual stream of a
  block is pruned as one channel group;
* `filter`: `granularity_map=[.*:filter]`, every layer alone. Its filters
  in a residual stream only vanish from the graph when every member drops
  the same channel, so at the same sparsity it saves fewer FLOPs: its target
  is searched (bisection, one-shot masks of the pretrained weights) to give
  the FLOPs of `coupled` at its target.

FLOPs are those a shrink could reach for the masks: each conv's 2 x
multiply-adds with its dead input and output channels removed, a channel
being dead when it is constant over a test batch and every position (see
tests/export/shrink/test_coupled_slim_nets.py). Both are reported, with test
accuracy.
Results: bench/results/group_pruning[_quick].json.
"""

import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench._timing import write_results

_NOT_WEIGHTS = ('Momentum', 'global_step', 'last_mask_update_step', '/mask',
                '/threshold')
GRANULARITY = {'coupled': 'coupled_filter', 'filter': 'filter'}


def _data():
  from sklearn.datasets import load_digits
  digits = load_digits()
  images = (digits.images / 16.0).astype(np.float32)[..., np.newaxis]
  images = (images - images.mean()) / images.std()
  labels = digits.target.astype(np.int64)
  order = np.random.RandomState(0).permutation(len(labels))
  test, train = order[:360], order[360:]
  return (images[train], labels[train]), (images[test], labels[test])


class _Model(object):
  """One graph: the masked ResNet, its loss, training op and a Pruning."""

  def __init__(self, hparams, one_shot=False, learning_rate=0.05):
    import tf_slim as slim  # pylint: disable=unused-import
    from tf_slim.nets import resnet_v1
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf.set_random_seed(0)
      self.images = tf.placeholder(tf.float32, [None, 8, 8, 1])
      self.labels = tf.placeholder(tf.int64, [None])
      blocks = [resnet_v1.resnet_v1_block('block1', base_depth=8, num_units=2,
                                          stride=2),
                resnet_v1.resnet_v1_block('block2', base_depth=16,
                                          num_units=2, stride=1)]
      with tf1prune.pruning_scope():
        logits, _ = resnet_v1.resnet_v1(
            self.images, blocks, num_classes=10, is_training=True,
            include_root_block=False, scope='resnet')
      if logits.get_shape().ndims == 4:
        logits = tf.squeeze(logits, [1, 2])
      self.step = tf.train.get_or_create_global_step()
      loss = tf.losses.sparse_softmax_cross_entropy(self.labels, logits)
      self.train = tf.train.MomentumOptimizer(learning_rate, 0.9).minimize(
          loss, self.step)
      self.accuracy = tf.reduce_mean(tf.cast(tf.equal(
          tf.argmax(logits, 1), self.labels), tf.float32))
      # one_shot: the sparsity is fed (`Pruning(sparsity=...)`).
      self.sparsity_input = (tf.placeholder(tf.float32, []) if one_shot
                             else None)
      self.pruning = tf1prune.Pruning(
          tf1prune.get_pruning_hparams().parse(hparams),
          sparsity=self.sparsity_input)
      self.update = self.pruning.conditional_mask_update_op()
      self.update_now = self.pruning.mask_update_op()
      self.variables = {v.op.name: v for v in tf.global_variables()}
      self.convs = [op for op in self.graph.get_operations()
                    if op.type in ('Conv2D', 'MatMul') and
                    op.inputs[1].op.type == 'Mul']
      self.sess = tf.Session(graph=self.graph)
      self.sess.run(tf.global_variables_initializer())

  def load(self, values):
    for name, value in values.items():
      self.variables[name].load(value, self.sess)

  def values(self):
    """The weights (no step counters, optimizer slots or masks)."""
    return self.sess.run({n: v for n, v in self.variables.items()
                          if not any(k in n for k in _NOT_WEIGHTS)})

  def fit(self, data, steps, batch, seed, update=False):
    images, labels = data
    rs = np.random.RandomState(seed)
    for _ in range(steps):
      pick = rs.randint(0, len(labels), batch)
      self.sess.run(self.train, {self.images: images[pick],
                                 self.labels: labels[pick]})
      if update:
        self.sess.run(self.update)

  def evaluate(self, data):
    return float(self.sess.run(self.accuracy, {self.images: data[0],
                                               self.labels: data[1]}))

  def flops(self, images):
    """(reachable FLOPs, dense FLOPs) per example: see the module docstring."""
    def source(op):
      x = op.inputs[0]
      return x.op.inputs[0] if x.op.type == 'Pad' else x
    fetch = [(source(op), op.outputs[0]) for op in self.convs]
    values = self.sess.run(fetch, {self.images: images})
    total = dense = 0.0
    for op, (x, y) in zip(self.convs, values):
      kernel = op.inputs[1].get_shape().as_list()
      taps = np.prod(kernel[:-2]) if len(kernel) == 4 else 1
      positions = np.prod(y.shape[1:-1]) if y.ndim == 4 else 1
      full = 2.0 * taps * positions * kernel[-2] * kernel[-1]
      live = [1.0 - np.all(v.reshape(-1, v.shape[-1]) ==
                           v.reshape(-1, v.shape[-1])[:1], axis=0).mean()
              for v in (x, y)]
      total += full * live[0] * live[1]
      dense += full
    return total, dense


def _hparams(method, target, prune_steps):
  return ('target_sparsity=%r,sparsity_function_end_step=%d,'
          'end_pruning_step=%d,pruning_frequency=%d,granularity_map=[.*:%s],'
          'do_not_prune=[logits]' % (target, prune_steps, prune_steps,
                                     max(prune_steps // 20, 1),
                                     GRANULARITY[method]))


def _one_shot(method, pretrained, probe):
  """Returns flops(sparsity): FLOPs of one-shot masks of the pretrained weights."""
  model = _Model(_hparams(method, 0.5, 1), one_shot=True)

  def flops(sparsity):
    model.load(pretrained)
    model.sess.run(model.update_now, {model.sparsity_input: sparsity})
    return model.flops(probe)[0]

  return model, flops


def _bisect(method, pretrained, probe, wanted, iterations):
  """(target, FLOPs) of `method` whose one-shot FLOPs are closest to `wanted`."""
  model, one_shot = _one_shot(method, pretrained, probe)
  low, high = 0.0, 0.99
  best = None
  for _ in range(iterations):
    middle = (low + high) / 2.0
    flops = one_shot(middle)
    if best is None or abs(flops - wanted) < abs(best[1] - wanted):
      best = (middle, flops)
    if flops > wanted:
      low = middle
    else:
      high = middle
  model.sess.close()
  return best


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='smoke run')
  parser.add_argument('--targets', default='0.5,0.75',
                      help='coupled_filter target sparsities')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args(argv)
  quick = args.quick
  pretrain, prune, finetune = (40, 40, 20) if quick else (1500, 900, 600)
  targets = [0.5] if quick else [float(t) for t in args.targets.split(',')]
  batch = 64
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  train, test = _data()
  probe = test[0][:64]
  start = time.time()
  dense = _Model(_hparams('coupled', 0.5, 1))
  dense.fit(train, pretrain, batch, args.seed)
  pretrained = dense.values()
  dense_flops = dense.flops(probe)
  runs = {'dense': {'accuracy_pretrained': dense.evaluate(test),
                    'flops': dense_flops[0]}}
  dense.fit(train, prune + finetune, batch, args.seed + 1)
  runs['dense']['accuracy'] = dense.evaluate(test)
  dense.sess.close()
  results = []
  for target in targets:
    row = {'coupled_target': target}
    calibration, one_shot = _one_shot('coupled', pretrained, probe)
    wanted = one_shot(target)
    calibration.sess.close()
    row['one_shot_flops'] = {'coupled': wanted}
    for method in ('coupled', 'filter'):
      sparsity = target
      if method == 'filter':
        sparsity, row['one_shot_flops']['filter'] = _bisect(
            method, pretrained, probe, wanted, 4 if quick else 9)
      model = _Model(_hparams(method, sparsity, prune))
      model.load(pretrained)
      model.fit(train, prune, batch, args.seed + 2, update=True)
      model.fit(train, finetune, batch, args.seed + 3)
      flops = model.flops(probe)[0]
      row[method] = {'target_sparsity': round(sparsity, 4),
                     'flops': flops, 'flops_ratio': flops / dense_flops[1],
                     'accuracy': model.evaluate(test)}
      model.sess.close()
    results.append(row)
    print('coupled target %.2f: coupled acc %.4f FLOPs x%.3f | filter (target '
          '%.3f) acc %.4f FLOPs x%.3f' % (
              target, row['coupled']['accuracy'], row['coupled']['flops_ratio'],
              row['filter']['target_sparsity'], row['filter']['accuracy'],
              row['filter']['flops_ratio']))
  payload = {
      'description': __doc__.split('\n')[0],
      'data': 'scikit-learn digits, 8x8, 1437 train / 360 test',
      'model': 'tf_slim resnet_v1: 2 blocks x 2 bottleneck units (base depth '
               '8, 16), no root block, no batch norm; logits not pruned',
      'steps': {'pretrain': pretrain, 'prune': prune, 'finetune': finetune,
                'batch': batch},
      'dense': runs['dense'], 'dense_flops': dense_flops[1],
      'results': results, 'seconds': time.time() - start}
  path = write_results('group_pruning_quick' if quick else 'group_pruning',
                       payload)
  print('wrote', path)


if __name__ == '__main__':
  main()
