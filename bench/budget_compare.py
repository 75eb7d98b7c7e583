"""Benchmark: pruning to a FLOPs budget, by criterion, against uniform pruning.

    python -m bench.budget_compare --quick   # smoke run (bench/run_all --quick)
    python -m bench.budget_compare           # the full run, about an hour

At equal FLOPs of the exported, shrunk graph, which channels should go? Two
nets on the 8x8 handwritten digits that ship with scikit-learn
(`cifar10_example.input_data.DigitsSource`):

* `demo`: the demo's CNN (`cifar10_example/model.py`: conv1, LRN, conv2,
  LRN, local3, local4, softmax_linear), trained by the demo's own loop
  (`cifar10_example.train.train`: SGD, batch 128, learning rate 0.1) and
  exported by its `frozen.freeze`;
* `mobilenet_v2`: MobileNet v2, width 0.5 (`bench._mobile_nets`), on the
  digits upsampled to 32x32 and tiled to 3 channels, trained with its batch
  norms in training form (batch statistics, moving averages with decay
  0.9) by the same kind of loop (momentum SGD, batch 64, learning rate
  0.05), exported rebuilt with them in inference form (`bn_scale` ranks by
  their trainable gammas).

Per seed (3 in the full run: 1000 steps for the demo net, 300 for the
MobileNet), every model of a net starts from the same initial weights and
sees the same batches, for the same steps at the same learning rate: the
demo's schedule (`train.pruning_spec`: masks change from 20% to 60% of the
steps, then the pruned net trains on). At each FLOPs target (x0.25 and
x0.08 of the dense export) the methods are:

* `uniform`: every channel group pruned to the same fraction
  (`granularity_map=[.*:coupled_filter]`, `prune_channel_params=True`), its
  `target_sparsity` matched to the target on the budget's own cost model:
  `Pruning(...).budget_plan().model` costs a keep of
  `unit_keep_count(n, s)` units in each group, and a bisection finds the
  least `s` whose cost is within the target (the same groups, checked).
  The same fraction everywhere moves in steps of one unit per group, so
  it lands at or below the target, by up to a few percent of it;
* `l2`, `taylor`, `bn_scale`: `budget=flops:<target>` with that
  `budget_criterion` (the channels ranked globally). The demo net has no
  batch norm, so `bn_scale` would rank it by `l2` and is not run there.

The logits layer stays whole in every method (`do_not_prune`). Each model
is stripped to a frozen `.pb` and shrunk (`tf1prune.shrink_pb`); reported
per method and target, over the seeds (mean and min-max): test accuracy of
the shrunk `.pb`, the FLOPs ratio of its shrink report, and its latency over
the dense `.pb`'s at batch 1 and a larger batch (one intra-op thread, every
graph of a seed timed in one process, interleaved: the median of the
per-repeat ratios, `bench._paired`). Also the dense model's accuracy per
seed. A method whose loss becomes NaN is reported as diverged. Results:
bench/results/budget_compare.json (`--quick`: one seed, one target, few
steps, the MobileNet by `bn_scale` only: budget_compare_quick.json). Runs on
TF 2.x and on TF 1.15 (there with tf_slim's own batch norm).
"""

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench import _mobile_nets
from bench._paired import interleaved_samples, load_average, paired_ratio
from bench._timing import one_thread_session, write_results
from cifar10_example import frozen, input_data, train
from tf1prune.masks import unit_keep_count

NETS = ('demo', 'mobilenet_v2')
METHODS = ('uniform', 'l2', 'taylor', 'bn_scale')
TARGETS = (0.25, 0.08)
# The output op of each net's exported graph, and its logits layer.
OUTPUTS = {'demo': 'logits', 'mobilenet_v2': 'output'}
LOGITS = {'demo': 'softmax_linear', 'mobilenet_v2': 'logits'}
# Training per net (full run; --quick shortens it): steps, batch, learning
# rate; the latency's larger batch.
SETTINGS = {
    'demo': dict(steps=1000, batch=128, learning_rate=0.1,
                 latency_batch=256),
    'mobilenet_v2': dict(steps=300, batch=64, learning_rate=0.05,
                         latency_batch=32),
}
# The smoke run: a few steps, and on MobileNet only `bn_scale` (its graphs
# take the longest to build; the demo net runs the other methods).
QUICK = {
    'demo': dict(steps=40, batch=64),
    'mobilenet_v2': dict(steps=12, batch=16, methods=('bn_scale',)),
}
MOBILE_SIZE = 32
# The moving statistics follow the last ten or so batches: the pruning
# changes them until 60% of the steps, and the export normalizes by them.
BN_DECAY = 0.9


def _quiet(*_):
  """A `log` for the example's training loop: no progress lines."""


class Upsampled(object):
  """A digits source whose images are resized to `size` and tiled to 3
  channels: what `bench._mobile_nets` takes (its stride-2 stem needs more
  than 8x8)."""

  def __init__(self, source, size):
    self._source = source
    self._size = size
    self.name = source.name + '_%d' % size
    self.num_classes = source.num_classes
    self.num_train, self.num_test = source.num_train, source.num_test
    self.image_shape = (size, size, 3)
    self.description = '%s, upsampled to %dx%d (bilinear), 3 channels' % (
        source.description, size, size)

  def _map(self, dataset):
    size = self._size
    return dataset.map(lambda x, y: (tf.tile(tf.image.resize_bilinear(
        x, [size, size]), [1, 1, 1, 3]), y))

  def train_dataset(self, batch_size, seed=None):
    return self._map(self._source.train_dataset(batch_size, seed=seed))

  def test_dataset(self, batch_size):
    return self._map(self._source.test_dataset(batch_size))


def hparams(net, method, target, steps):
  """The pruning hparams of `method` at FLOPs `target` (for `uniform`,
  `target` is the sparsity), on the demo's schedule over `steps`."""
  if method == 'uniform':
    text = ('target_sparsity=%r,granularity_map=[.*:coupled_filter],'
            'prune_channel_params=true' % target)
  else:
    text = 'budget=flops:%r,budget_criterion=%s' % (target, method)
  text += ',do_not_prune=[%s]' % LOGITS[net]
  return train.pruning_spec(steps, text)


# ------------------------------------------------------------ the models

def _mobile_train(source, train_dir, steps, batch, learning_rate, spec,
                  seed):
  """Trains MobileNet v2 as `cifar10_example.train.train` trains the demo
  net (seeded graph, seeded batches, `PruningHook`, a checkpoint at the
  end), with momentum SGD and its batch norms' updates; returns the last
  loss."""
  with tf.Graph().as_default():
    tf.set_random_seed(seed)
    step = tf.train.get_or_create_global_step()
    images, labels = tf.data.make_one_shot_iterator(
        source.train_dataset(batch, seed=seed)).get_next()
    _, logits = _mobile_nets.build(
        'mobilenet_v2', MOBILE_SIZE, source.num_classes, images=images,
        is_training=True, batch_norm_decay=BN_DECAY)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
      train_op = tf.train.MomentumOptimizer(learning_rate, 0.9).minimize(
          loss, step)
    hooks = [tf.train.StopAtStepHook(last_step=steps),
             tf.train.NanTensorHook(loss)]
    if spec is not None:
      hooks.insert(0, tf1prune.PruningHook(
          tf1prune.Pruning(spec, global_step=step)))
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=train_dir, hooks=hooks, save_checkpoint_secs=10**6,
        save_summaries_steps=None, save_summaries_secs=None) as sess:
      last = None
      while not sess.should_stop():
        last, _ = sess.run([loss, train_op])
  return float(last)


def _mobile_freeze(source, train_dir, export_dir, pb):
  """The trained MobileNet rebuilt with inference-form batch norms on a
  placeholder `images`, restored, stripped to the frozen `pb`."""
  with tf.Graph().as_default():
    step = tf.train.get_or_create_global_step()
    _mobile_nets.build('mobilenet_v2', MOBILE_SIZE, source.num_classes)
    saver = tf.train.Saver(tf.global_variables())
    with tf.Session() as sess:
      saver.restore(sess, tf.train.latest_checkpoint(train_dir))
      saver.save(sess, os.path.join(export_dir, 'model.ckpt'),
                 global_step=step)
  tf1prune.strip_checkpoint(export_dir, [OUTPUTS['mobilenet_v2']], pb)


def train_and_export(net, source, folder, settings, spec, seed):
  """Trains one model from scratch and writes its frozen `.pb`; returns
  (pb path, last loss, seconds), the path None when the loss became NaN
  (a method that diverges is reported as such, not left out)."""
  began = time.time()
  try:
    return _train_and_export(net, source, folder, settings, spec, seed) + (
        time.time() - began,)
  except tf.train.NanLossDuringTrainingError:
    return None, float('nan'), time.time() - began


def _train_and_export(net, source, folder, settings, spec, seed):
  train_dir = os.path.join(folder, 'train')
  pb = os.path.join(folder, 'model.pb')
  if net == 'demo':
    result = train.train(
        source, train_dir, settings['steps'], settings['batch'],
        settings['learning_rate'], pruning_spec=spec, seed=seed,
        log_every_secs=10**6, save_checkpoint_secs=10**6,
        save_summaries_steps=None, log=_quiet)
    loss = result.get('loss')
    frozen.freeze(source, train_dir, os.path.join(folder, 'export'), pb)
  else:
    loss = _mobile_train(source, train_dir, settings['steps'],
                         settings['batch'], settings['learning_rate'], spec,
                         seed)
    _mobile_freeze(source, train_dir, os.path.join(folder, 'export'), pb)
  shutil.rmtree(train_dir)
  return pb, loss


def accuracy(pb, output, images, labels):
  """Test accuracy of the frozen graph `pb` (placeholder `images`)."""
  with one_thread_session(pb) as sess:
    logits = sess.run(output + ':0', {'images:0': images})
  return float(np.mean(np.argmax(logits, 1) == labels))


# ------------------------------------------------------------ uniform

class UniformMatch(object):
  """The uniform sparsity whose export costs a FLOPs target.

  Builds `net`'s training graph with a budget `Pruning` for its cost model
  (`budget_plan().model`) and groups, and with a uniform one to check that
  it prunes the same groups; `sparsity(target)` bisects.
  """

  def __init__(self, net, source, settings):
    groups = {}
    for method in ('l2', 'uniform'):
      with tf.Graph().as_default():
        spec = hparams(net, method, 0.5, settings['steps'])
        if net == 'demo':
          pruning = train.build_training(source, 16, pruning=spec).pruning
        else:
          step = tf.train.get_or_create_global_step()
          _mobile_nets.build('mobilenet_v2', MOBILE_SIZE,
                             source.num_classes, is_training=True,
                             batch_norm_decay=BN_DECAY)
          pruning = tf1prune.Pruning(spec, global_step=step)
        groups[method] = [str(item.group) for item in
                          pruning.coupled_groups()]
        if method == 'l2':
          plan = pruning.budget_plan()
          self.model, self.dense = plan.model, plan.dense
          self.sizes = [g.num_units for g in plan.groups]
          self.offsets = plan.offsets
          self.rules = plan.spec.channel_groups[1:]
    if groups['l2'] != groups['uniform']:
      raise ValueError('uniform pruning and the budget prune different '
                       'channel groups: %s against %s' % (
                           groups['uniform'], groups['l2']))
    self.groups = groups['l2']
    with tf.Graph().as_default():
      self._sparsity = tf.placeholder(tf.float64, [])
      self._counts = [unit_keep_count(n, self._sparsity, *self.rules)
                      for n in self.sizes]
      self._sess = tf.Session()

  def counts(self, sparsity):
    """Units each group keeps at `sparsity` (coupled_filter's rule)."""
    return self._sess.run(self._counts, {self._sparsity: sparsity})

  def ratio(self, sparsity):
    """The cost model's FLOPs ratio of a uniform `sparsity`."""
    keep = np.zeros(self.model.num_units)
    for offset, count in zip(self.offsets, self.counts(sparsity)):
      keep[offset:offset + count] = 1.0
    return self.model.cost(keep, 'flops') / self.dense

  def _bisect(self, low, high, fits, iterations=40):
    """The least value in (low, high] for which `fits` holds (it holds at
    `high` and, once it holds, for every value above)."""
    for _ in range(iterations):
      middle = (low + high) / 2.0
      if fits(middle):
        high = middle
      else:
        low = middle
    return high

  def sparsity(self, target):
    """(sparsity, its FLOPs ratio): the least sparsity whose cost is
    within `target` (the ratio never grows with the sparsity), moved to
    the middle of the range that keeps the same units, so that the float32
    schedule lands on the same counts."""
    top = 1.0 - 1e-9
    if self.ratio(top) > target:
      raise ValueError('uniform pruning cannot reach FLOPs x%g: x%.4f at '
                       'most' % (target, self.ratio(top)))
    least = self._bisect(0.0, top, lambda s: self.ratio(s) <= target)
    counts = self.counts(least)
    beyond = self._bisect(least, top,
                          lambda s: self.counts(s) != counts) \
        if self.counts(top) != counts else top
    middle = (least + beyond) / 2.0
    assert self.counts(middle) == counts
    return middle, self.ratio(middle)

  def close(self):
    self._sess.close()


# ------------------------------------------------------------ measuring

def latency_ratios(pbs, output, images, batches, repeats, seconds):
  """{name: {batch: latency / the dense graph's}} of the frozen graphs
  `pbs` ({name: path}, one named 'dense'), one intra-op thread each, timed
  in this process: every repeat runs each graph back to back, and a ratio
  is the median over repeats of the per-repeat ratios. A sample is
  `calls` runs, as many as take the dense graph about `seconds`, the same
  for every graph."""
  sessions = {name: one_thread_session(path) for name, path in pbs.items()}
  result = {name: {} for name in pbs if name != 'dense'}
  try:
    for batch in batches:
      feed = {'images:0': np.resize(images, (batch,) + images.shape[1:])}

      def runner(sess, calls):
        def run():
          for _ in range(calls):
            sess.run(output + ':0', feed)
        return run

      once = runner(sessions['dense'], 1)
      once()
      began = time.perf_counter()
      once()
      calls = max(1, int(seconds / max(time.perf_counter() - began, 1e-6)))
      samples = interleaved_samples(
          {name: runner(sess, calls) for name, sess in sessions.items()},
          repeats, order='shuffle')
      for name in result:
        result[name][str(batch)] = paired_ratio(samples, name, 'dense')
  finally:
    for sess in sessions.values():
      sess.close()
  return result


def _stats(values):
  values = [v for v in values if v is not None]
  if not values:
    return None
  return {'mean': float(np.mean(values)), 'min': float(min(values)),
          'max': float(max(values)), 'n': len(values)}


def summarize(runs, methods, targets, batches):
  """Per method and target, mean and min-max over the seeds of the
  accuracy, the FLOPs and parameter ratios and the latency ratios; and the
  dense models' accuracy."""
  out = {'dense': {'accuracy': _stats([r['accuracy'] for r in runs
                                        if r['method'] == 'dense'])}}
  for method in methods:
    out[method] = {}
    for target in targets:
      chosen = [r for r in runs
                if r['method'] == method and r['target'] == target]
      if not chosen:
        continue
      out[method][str(target)] = {
          'accuracy': _stats([r['accuracy'] for r in chosen]),
          'accuracy_drop': _stats([r.get('accuracy_drop') for r in chosen]),
          'diverged': sum(r['diverged'] for r in chosen), 'runs': len(chosen),
          'flops_ratio': _stats([r['flops_ratio'] for r in chosen]),
          'params_ratio': _stats([r['params_ratio'] for r in chosen]),
          'latency_ratio': {str(b): _stats([r['latency_ratio'].get(str(b))
                                            for r in chosen])
                            for b in batches}}
  return out


def run_net(net, seeds, targets, methods, settings, quick, work, log):
  """Trains, exports, shrinks, evaluates and times every model of `net`."""
  source = input_data.DigitsSource()
  if net == 'mobilenet_v2':
    source = Upsampled(source, MOBILE_SIZE)
  images, labels = frozen.test_arrays(source)
  methods = [m for m in methods if m in settings.get('methods', methods)
             and not (net == 'demo' and m == 'bn_scale')]
  uniform, groups = {}, None
  if 'uniform' in methods:
    match = UniformMatch(net, source, settings)
    for target in targets:
      uniform[target] = match.sparsity(target)
      log('%s: uniform sparsity %.4f gives FLOPs x%.4f (target x%g)', net,
          uniform[target][0], uniform[target][1], target)
    groups = match.groups
    match.close()
  batches = (1, settings['latency_batch'])
  output = OUTPUTS[net]
  runs = []
  for seed in seeds:
    pbs = {}
    for method in ['dense'] + [m for m in methods]:
      for target in ([None] if method == 'dense' else targets):
        name = method if target is None else '%s@%g' % (method, target)
        folder = os.path.join(work, net, str(seed), name)
        spec = None if method == 'dense' else hparams(
            net, method, uniform[target][0] if method == 'uniform'
            else target, settings['steps'])
        pb, loss, seconds = train_and_export(net, source, folder, settings,
                                             spec, seed)
        run = {'seed': seed, 'method': method, 'target': target,
               'final_loss': loss, 'train_seconds': round(seconds, 1),
               'diverged': pb is None, 'accuracy': None,
               'flops_ratio': None, 'params_ratio': None,
               'latency_ratio': {}}
        if pb is None:
          runs.append(run)
          log('%s seed %d %s: the loss became NaN (diverged), %.0f s', net,
              seed, name, seconds)
          continue
        if method != 'dense':
          small = os.path.join(folder, 'shrunk.pb')
          report = tf1prune.shrink_pb(pb, [output], small)
          pb = small
          run.update(
              flops_ratio=report.flops_after / float(report.flops_before),
              params_ratio=report.params_after / float(report.params_before),
              stops=[str(s) for s in report.stops],
              widths={l.name: [l.outputs_before, l.outputs_after]
                      for l in report.layers if l.op != 'LRN'})
          if method == 'uniform':
            run['sparsity'] = uniform[target][0]
            run['planned_flops_ratio'] = uniform[target][1]
        run['accuracy'] = accuracy(pb, output, images, labels)
        pbs[name] = pb
        runs.append(run)
        log('%s seed %d %s: accuracy %.4f%s, %.0f s', net, seed, name,
            run['accuracy'], '' if method == 'dense' else
            ', FLOPs x%.4f' % run['flops_ratio'], seconds)
    dense = [r for r in runs if r['seed'] == seed and r['method'] == 'dense']
    for run in runs:
      if run['seed'] == seed and run['accuracy'] is not None and \
          dense[0]['accuracy'] is not None:
        run['accuracy_drop'] = dense[0]['accuracy'] - run['accuracy']
    latency = {} if 'dense' not in pbs else latency_ratios(
        pbs, output, images, batches,
        3 if quick else 21, 0.003 if quick else 0.03)
    for run in runs:
      name = run['method'] if run['target'] is None else '%s@%g' % (
          run['method'], run['target'])
      if run['seed'] == seed and name in latency:
        run['latency_ratio'] = latency[name]
    log('%s seed %d latency over dense: %s', net, seed, ', '.join(
        '%s %s' % (n, '/'.join('%.2f' % v for _, v in sorted(
            r.items(), key=lambda kv: int(kv[0])))) for n, r in
        sorted(latency.items())))
    shutil.rmtree(os.path.join(work, net, str(seed)))
  model = ('the demo CNN (cifar10_example/model.py)' if net == 'demo' else
           'MobileNet v2, width 0.5, %dx%d input, batch norm' % (
               MOBILE_SIZE, MOBILE_SIZE))
  return {
      'model': model, 'data': source.description,
      'settings': dict(settings, optimizer=(
          'SGD, the demo\'s loop' if net == 'demo' else
          'momentum 0.9, batch norm decay %g' % BN_DECAY),
                       latency_batches=list(batches)),
      'methods': methods,
      'groups': groups,
      'uniform_sparsity': {str(t): v[0] for t, v in uniform.items()},
      'uniform_planned_flops_ratio': {str(t): v[1]
                                      for t, v in uniform.items()},
      'runs': runs,
      'summary': summarize(runs, methods, targets, batches)}


def _range(stats, scale=100.0, fmt='%.1f'):
  if stats is None:
    return '-'
  return (fmt + ' (' + fmt + '-' + fmt + ')') % (
      scale * stats['mean'], scale * stats['min'], scale * stats['max'])


def format_table(payload):
  """The results as text: per net, method and target."""
  lines = []
  for net, data in payload['nets'].items():
    summary = data['summary']
    batches = data['settings']['latency_batches']
    lines.append('%s: dense accuracy %s%%' % (
        net, _range(summary['dense']['accuracy'])))
    lines.append('  %-10s %-6s %-22s %-8s %s' % (
        'method', 'target', 'accuracy % (min-max)', 'FLOPs',
        '  '.join('latency b%d' % b for b in batches)))
    for target in payload['targets']:
      for method in data['methods']:
        row = summary[method].get(str(target))
        if row is None:
          continue
        diverged = ('  diverged in %d of %d' % (row['diverged'], row['runs'])
                    if row['diverged'] else '')
        lines.append('  %-10s x%-5g %-22s %-8s %s%s' % (
            method, target, _range(row['accuracy']),
            'x%.4f' % row['flops_ratio']['mean'] if row['flops_ratio']
            else '-', '  '.join(
                '%-10s' % _range(row['latency_ratio'][str(b)], 1.0, '%.2f')
                for b in batches), diverged))
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true',
                      help='smoke run: one seed, x0.25, a few steps')
  parser.add_argument('--seeds', type=int, default=3)
  parser.add_argument('--nets', default=','.join(NETS))
  parser.add_argument('--methods', default=','.join(METHODS))
  parser.add_argument('--targets', default=','.join(str(t) for t in TARGETS))
  parser.add_argument('--steps', type=int, default=None,
                      help='training steps of every net (default: '
                      + ', '.join('%s %d' % (n, SETTINGS[n]['steps'])
                                  for n in NETS) + ')')
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  nets = args.nets.split(',')
  methods = args.methods.split(',')
  targets = [float(t) for t in args.targets.split(',')]
  seeds = list(range(args.seeds))
  if args.quick:
    seeds, targets = seeds[:1], targets[:1]

  def log(fmt, *values):
    print(fmt % values, flush=True)

  began = time.time()
  load_before = load_average()
  work = tempfile.mkdtemp(prefix='budget_compare_')
  payload = {'description': __doc__.split('\n')[0], 'seeds': seeds,
             'targets': targets, 'quick': args.quick, 'nets': {}}
  try:
    for net in nets:
      settings = dict(SETTINGS[net], **(QUICK[net] if args.quick else {}))
      if args.steps:
        settings['steps'] = args.steps
      payload['nets'][net] = run_net(net, seeds, targets, methods, settings,
                                     args.quick, work, log)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  payload['load_average_1min'] = [load_before, load_average()]
  payload['seconds'] = round(time.time() - began, 1)
  print(format_table(payload))
  path = write_results('budget_compare_quick' if args.quick
                       else 'budget_compare', payload)
  print('wrote %s (%.0f s)' % (path, payload['seconds']))


if __name__ == '__main__':
  main()
