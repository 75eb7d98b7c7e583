"""Benchmark: test accuracy against sparsity, for three ways of pruning.

    python -m bench.quality --quick                       # sklearn digits
    python -m bench.quality --data_dir=/data/cifar10     # CIFAR-10 if there

The model is the CIFAR-10 example's (`cifar10_example.model.inference`, every
kernel masked); the data the 8x8 digits embedded in scikit-learn, or CIFAR-10
when `--data_dir` holds its binary files (`cifar10_example.input_data`).

Every run starts from the same dense network, trained `pretrain_steps` steps
(masks all ones), and then gets the same budget of `budget_steps` steps:

* `dense`: keeps training without pruning (the sparsity-0 point);
* `gradual`: tf1prune's schedule (Zhu & Gupta) from 0 to the target sparsity
  over the first 70% of the budget, a mask update every `frequency` steps by
  `conditional_mask_update_op()` run after each step, then fine-tuning with
  the masks fixed;
* `one_shot`: masks set at once to the target sparsity by magnitude
  (`Pruning(sparsity=...)` + `mask_update_op()`), then fine-tuning;
* `lottery_rewind`: the one-shot masks of the pretrained weights, the weights
  rewound to their values at step `rewind_step` of the pretraining, then
  training with the masks fixed (lottery ticket with rewinding, Frankle et al.
  2019), by `tf1prune.LotteryTicket` when `tf1prune` exports it; else the
  bench does the same with `mask_update_op` and variable loads, and says so
  in the results.

Test accuracy is the mean over `--seeds` seeds (the pretraining shared per
seed). Results: bench/results/quality[_quick].json (with the published
reference points, which are other models and data sets, for context only).
"""

import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench._timing import write_results
from cifar10_example import input_data, model

# 0.98 and 0.99 too: on the easy digits set the methods part only there.
SPARSITIES = (0.5, 0.75, 0.9, 0.95, 0.98, 0.99)

# Published points, other models and data sets: context, not comparable 1:1.
REFERENCES = [
    {'source': 'TF contrib model_pruning CIFAR-10 example (README)',
     'model': 'the same CIFAR-10 CNN, 24x24 CIFAR-10 crops',
     'metric': 'test accuracy (approx.)',
     'points': [[0.0, 0.86], [0.5, 0.86], [0.95, 0.77]]},
    {'source': 'Zhu & Gupta 2017, "To prune, or not to prune"',
     'model': 'InceptionV3 on ImageNet',
     'metric': 'top-1 accuracy',
     'points': [[0.0, 0.781], [0.5, 0.780], [0.75, 0.761], [0.875, 0.746]]},
]


class _Run(object):
  """One fresh graph: the masked model, its training op and test accuracy."""

  def __init__(self, source, batch, learning_rate, seed):
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf.set_random_seed(seed)
      self.step = tf.train.get_or_create_global_step()
      images, labels = tf.data.make_one_shot_iterator(
          source.train_dataset(batch, seed=seed)).get_next()
      logits = model.inference(images, source.num_classes)
      loss = model.loss(logits, labels)
      self.train_op = tf.train.MomentumOptimizer(learning_rate, 0.9).minimize(
          loss, global_step=self.step)
      test_iter = tf.data.make_initializable_iterator(
          source.test_dataset(500))
      self._test_init = test_iter.initializer
      test_images, test_labels = test_iter.get_next()
      with tf.variable_scope(tf.get_variable_scope(), reuse=True):
        test_logits = model.inference(test_images, source.num_classes)
      self._correct = tf.reduce_sum(tf.cast(tf.equal(
          tf.argmax(test_logits, 1, output_type=tf.int32),
          tf.cast(test_labels, tf.int32)), tf.int32))
      self._count = tf.size(test_labels)
      self.trainable = tf.trainable_variables()
      self.sess = tf.Session(graph=self.graph)
      self.sess.run(tf.global_variables_initializer())

  def train(self, steps, after_step=None):
    for _ in range(steps):
      self.sess.run(self.train_op)
      if after_step is not None:
        self.sess.run(after_step)

  def accuracy(self):
    self.sess.run(self._test_init)
    correct = total = 0
    while True:
      try:
        c, n = self.sess.run([self._correct, self._count])
      except tf.errors.OutOfRangeError:
        return correct / float(total)
      correct += c
      total += n

  def weights(self):
    return {v.op.name: v for v in self.trainable}

  def snapshot(self):
    return dict(zip([v.op.name for v in self.trainable],
                    self.sess.run(self.trainable)))

  def load(self, values, step=None):
    for name, var in self.weights().items():
      var.load(values[name], self.sess)
    if step is not None:
      self.step.load(step, self.sess)

  def mask_sparsity(self):
    with self.graph.as_default():
      masks = tf1prune.get_masks()
      sizes = [m.shape.num_elements() for m in masks]
      zeros = self.sess.run([tf.reduce_sum(1.0 - m) for m in masks])
    return float(sum(zeros)) / sum(sizes)

  def close(self):
    self.sess.close()


def _one_shot_masks(run, sparsity):
  with run.graph.as_default():
    pruning = tf1prune.Pruning(
        tf1prune.get_pruning_hparams().parse('name=one_shot'),
        sparsity=tf.constant(sparsity))
    run.sess.run(pruning.mask_update_op())


def _gradual_op(run, sparsity, start, budget, frequency):
  end = start + int(0.7 * budget)
  spec = tf1prune.get_pruning_hparams().parse(
      'name=gradual,begin_pruning_step=%d,end_pruning_step=%d,'
      'pruning_frequency=%d,target_sparsity=%g,'
      'sparsity_function_begin_step=%d,sparsity_function_end_step=%d' %
      (start, end, frequency, sparsity, start, end))
  with run.graph.as_default():
    pruning = tf1prune.Pruning(spec)
    op = pruning.conditional_mask_update_op()
    run.sess.run(tf.variables_initializer([pruning.last_update_step]))
    run.sess.run(tf.assign(pruning.last_update_step, start - frequency))
  return op


def _lottery_api():
  return getattr(tf1prune, 'LotteryTicket', None)


def _lottery(run, sparsity, pretrained, rewind, rewind_step):
  """Masks from the pretrained weights, weights rewound to `rewind`.

  With `tf1prune.LotteryTicket` when it exists (snapshot at the rewind point,
  prune_op, rewind_op); else the same with `mask_update_op` and variable
  loads. Either way the biases are rewound too.
  """
  ticket_cls = _lottery_api()
  if ticket_cls is None:
    run.load(pretrained)
    _one_shot_masks(run, sparsity)
    run.load(rewind, step=rewind_step)
    return
  with run.graph.as_default():
    ticket = ticket_cls()
    run.sess.run(tf.variables_initializer(
        [v for v in tf.global_variables()
         if v.op.name.startswith('lottery_ticket/')]))
    run.load(rewind, step=rewind_step)
    run.sess.run(ticket.snapshot_op())
    run.load(pretrained)
    run.sess.run(ticket.prune_op(sparsity))
    run.sess.run(ticket.rewind_op())
    masked = set(r.name for r in ticket.records)
  for name, var in run.weights().items():
    if name not in masked:
      var.load(rewind[name], run.sess)


def run_seed(source, args, seed, log):
  """Returns {method: {sparsity: accuracy}} for one seed."""
  new = lambda: _Run(source, args.batch, args.learning_rate, seed)  # pylint: disable=unnecessary-lambda-assignment
  p, b = args.pretrain_steps, args.budget_steps
  base = new()
  base.train(args.rewind_step)
  rewind = base.snapshot()
  base.train(p - args.rewind_step)
  pretrained = base.snapshot()
  pretrained_accuracy = base.accuracy()
  base.train(b)
  results = {'dense': {0.0: base.accuracy()},
             'gradual': {}, 'one_shot': {}, 'lottery_rewind': {},
             'mask_sparsity': {}}
  base.close()
  log('seed %d: pretrained %.4f, dense after budget %.4f' %
      (seed, pretrained_accuracy, results['dense'][0.0]))
  for sparsity in args.sparsities:
    run = new()
    run.load(pretrained, step=p)
    op = _gradual_op(run, sparsity, p, b, args.frequency)
    run.train(b, after_step=op)
    results['gradual'][sparsity] = run.accuracy()
    results['mask_sparsity'][sparsity] = {'gradual': run.mask_sparsity()}
    run.close()

    run = new()
    run.load(pretrained, step=p)
    _one_shot_masks(run, sparsity)
    run.train(b)
    results['one_shot'][sparsity] = run.accuracy()
    results['mask_sparsity'][sparsity]['one_shot'] = run.mask_sparsity()
    run.close()

    run = new()
    _lottery(run, sparsity, pretrained, rewind, args.rewind_step)
    run.train(b)
    results['lottery_rewind'][sparsity] = run.accuracy()
    run.close()
    log('seed %d sparsity %.2f: gradual %.4f  one_shot %.4f  lottery_rewind '
        '%.4f' % (seed, sparsity, results['gradual'][sparsity],
                  results['one_shot'][sparsity],
                  results['lottery_rewind'][sparsity]))
  return results


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='one sparsity, few steps, one seed (CI smoke run)')
  parser.add_argument('--data_dir', default='',
                      help='directory holding CIFAR-10 (cifar-10-batches-bin); '
                      'empty or without it: the sklearn digits')
  parser.add_argument('--pretrain_steps', type=int, default=None)
  parser.add_argument('--budget_steps', type=int, default=None)
  parser.add_argument('--rewind_step', type=int, default=None)
  parser.add_argument('--frequency', type=int, default=None)
  parser.add_argument('--batch', type=int, default=None)
  parser.add_argument('--learning_rate', type=float, default=None)
  parser.add_argument('--seeds', type=int, default=None)
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  source = input_data.load_source(args.data_dir)
  cifar = source.name == 'cifar10'
  defaults = {  # (quick, full) per data set
      'pretrain_steps': ((100, 500), (300, 20000)),
      'budget_steps': ((100, 500), (300, 20000)),
      'rewind_step': ((10, 50), (30, 1000)),
      'learning_rate': ((0.03, 0.03), (0.02, 0.02)),
      'frequency': ((5, 10), (10, 100)),
      'batch': ((64, 64), (128, 128)),
      'seeds': ((1, 2), (1, 1)),
  }
  for name, values in defaults.items():
    if getattr(args, name) is None:
      setattr(args, name, values[int(cifar)][int(not args.quick)])
  args.sparsities = (0.9,) if args.quick else SPARSITIES
  start = time.time()

  def log(text):
    print('[%5.0fs] %s' % (time.time() - start, text), flush=True)

  log('data: %s' % source.description)
  per_seed = [run_seed(source, args, seed, log) for seed in range(args.seeds)]
  methods = ('gradual', 'one_shot', 'lottery_rewind')
  dense = float(np.mean([r['dense'][0.0] for r in per_seed]))
  table = {'dense': {'0.0': dense}}
  for method in methods:
    table[method] = {'0.0': dense}
    for s in args.sparsities:
      table[method][str(s)] = float(np.mean([r[method][s] for r in per_seed]))
  payload = {
      'data': source.name, 'data_description': source.description,
      'model': 'cifar10_example.model.inference (masked CIFAR-10 CNN)',
      'sparsities': [0.0] + list(args.sparsities),
      'accuracy': table,
      'per_seed': [{m: {str(k): v for k, v in r[m].items()}
                    for m in ('dense',) + methods} for r in per_seed],
      'mask_sparsity_seed0': {str(k): v for k, v in
                              per_seed[0]['mask_sparsity'].items()},
      'settings': {k: getattr(args, k) for k in (
          'pretrain_steps', 'budget_steps', 'rewind_step', 'frequency',
          'batch', 'learning_rate', 'seeds')},
      'lottery': ('tf1prune.LotteryTicket (snapshot_op at the rewind step, '
                  'prune_op, rewind_op; biases rewound too)' if _lottery_api()
                  else 'no tf1prune.LotteryTicket in this tf1prune: '
                  'rewinding done by the bench with the public API'),
      'references': REFERENCES,
      'seconds': time.time() - start,
  }
  name = 'quality_%s' % source.name
  path = write_results(name + '_quick' if args.quick else name, payload)
  log('wrote %s' % path)
  for method in ('dense',) + methods:
    print('%-15s ' % method + '  '.join(
        '%s: %.4f' % kv for kv in sorted(table[method].items())))


if __name__ == '__main__':
  main()
