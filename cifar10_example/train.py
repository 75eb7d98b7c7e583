"""Training the masked CNN with gradual pruning (MonitoredTrainingSession).

    python -m cifar10_example.train --train_dir=/tmp/cifar10_train \\
        --pruning_hparams=target_sparsity=0.9,sparsity_function_end_step=2000

From Python (graph mode), the same as the script does:

    >>> import tensorflow.compat.v1 as tf, tempfile
    >>> from cifar10_example import input_data, train
    >>> tf.disable_eager_execution()
    >>> result = train.train(input_data.DigitsSource(), tempfile.mkdtemp(),
    ...                      max_steps=20, batch_size=32,
    ...                      pruning_spec=train.pruning_spec(20, 'target_sparsity=0.5'))
    >>> result['step'], result['sparsity'] > 0
    (20, True)

`pruning_spec(max_steps, text)` starts from the example's schedule, scaled to
`max_steps` (masks change from 20% to 60% of the steps, sparsity rising to
0.9), and applies `text` in the old `--pruning_hparams` syntax on top. With
`pruning_spec=None` the same model trains dense (masks stay all ones). Each
step runs `train_op`; `tf1prune.PruningHook` runs the conditional mask update
after it; checkpoints and TensorBoard summaries (loss, learning rate, the
pruning summaries) go to the training folder.
"""

import argparse
import collections
import time

import tensorflow.compat.v1 as tf

import tf1prune
from cifar10_example import cli, model

__all__ = ['ProgressHook', 'Training', 'build_training', 'default_max_steps',
           'main', 'pruning_spec', 'train']

Training = collections.namedtuple(
    'Training', ['train_op', 'loss', 'global_step', 'sparsity', 'pruning'])
Training.__doc__ = """The training graph's handles.

Attributes:
  train_op: one SGD step (increments `global_step`).
  loss: float32 scalar, cross entropy plus weight decay.
  global_step: the int64 global step variable.
  sparsity: float32 scalar, the fraction of zeros over all masks.
  pruning: the `tf1prune.Pruning`, or None when training dense.
"""


def default_max_steps(source_name):
  """Steps the example trains by default: 3000 on digits, 100000 on CIFAR-10."""
  return 3000 if source_name == 'digits' else 100000


def pruning_spec(max_steps, text=''):
  """Returns pruning hparams scaled to `max_steps`, updated by `text`.

  Args:
    max_steps: training length, >= 1.
    text: hparams in the old syntax (`name=value,...`), applied last.

  Returns:
    A `tf1prune.get_pruning_hparams()` object: name `cifar10_pruning`, target
    0.9, masks updated every `max(1, max_steps // 100)` steps from step
    `max_steps // 5` to `3 * max_steps // 5`, the schedule spanning the same
    steps.

  Raises:
    ValueError: `text` is malformed or names an unknown hparam.
  """
  begin = max_steps // 5
  end = max(3 * max_steps // 5, begin + 1)
  default = ('name=cifar10_pruning,target_sparsity=0.9,'
             'begin_pruning_step=%d,end_pruning_step=%d,pruning_frequency=%d,'
             'sparsity_function_begin_step=%d,sparsity_function_end_step=%d' %
             (begin, end, max(1, max_steps // 100), begin, end))
  return tf1prune.get_pruning_hparams().parse(default).parse(text or '')


def _mask_sparsity(masks):
  """Fraction of zeros over all `masks`, each counted by its size."""
  if not masks:
    return tf.constant(0.0)
  kept = tf.add_n([tf.reduce_sum(m) for m in masks])
  total = sum(m.get_shape().num_elements() for m in masks)
  return tf.subtract(1.0, kept / float(total), name='mask_sparsity')


def build_training(source, batch_size=128, learning_rate=0.1,
                   num_epochs_per_decay=350.0, decay_factor=0.1,
                   pruning=None, seed=0):
  """Builds input, model, loss, SGD and (optionally) pruning ops in the graph.

  Args:
    source: an `input_data` source (`Cifar10Source` or `DigitsSource`).
    batch_size: images per step.
    learning_rate: initial SGD learning rate.
    num_epochs_per_decay, decay_factor: the learning rate is multiplied by
      `decay_factor` every `num_epochs_per_decay` epochs (staircase).
    pruning: pruning hparams (see `pruning_spec`), or None for dense training.
    seed: graph-level random seed; the same seed gives the same initial
      weights and batch order to the dense and the pruned run.

  Returns:
    A `Training`.

  Raises:
    ValueError: an argument or a pruning hparam is out of range.
  """
  if batch_size < 1 or learning_rate <= 0:
    raise ValueError('batch_size must be >= 1 and learning_rate > 0, got %r '
                     'and %r' % (batch_size, learning_rate))
  if not num_epochs_per_decay > 0 or not 0 < decay_factor <= 1:
    # 0 made the learning rate decay at every step: no training at all.
    raise ValueError('num_epochs_per_decay must be > 0 and decay_factor in '
                     '(0, 1], got %r and %r' % (num_epochs_per_decay,
                                                decay_factor))
  tf.set_random_seed(seed)
  global_step = tf.train.get_or_create_global_step()
  images, labels = tf.data.make_one_shot_iterator(
      source.train_dataset(batch_size, seed=seed)).get_next()
  logits = model.inference(images, source.num_classes)
  loss = model.loss(logits, labels)
  steps_per_decay = max(1, int(source.num_train / float(batch_size) *
                               num_epochs_per_decay))
  lr = tf.train.exponential_decay(learning_rate, global_step, steps_per_decay,
                                  decay_factor, staircase=True)
  train_op = tf.train.GradientDescentOptimizer(lr).minimize(
      loss, global_step=global_step)
  tf.summary.scalar('learning_rate', lr)
  tf.summary.scalar('loss', loss)
  pruner = None
  if pruning is not None:
    pruner = tf1prune.Pruning(pruning, global_step=global_step)
    pruner.add_pruning_summaries()
  sparsity = _mask_sparsity(tf1prune.get_masks())
  return Training(train_op, loss, global_step, sparsity, pruner)


class ProgressHook(tf.train.SessionRunHook):
  """Logs step, loss, examples/sec and mask sparsity every `every_secs`.

  Args:
    training: the `Training` to report on.
    batch_size: images per step (for examples/sec).
    max_steps: the last step, shown as `step/max_steps`.
    every_secs: seconds between log lines (a last line is logged at the end).
    log: callable taking a format string and its arguments.
  """

  def __init__(self, training, batch_size, max_steps, every_secs=5.0,
               log=cli.LOG.info):
    self._t = training
    self._batch_size = batch_size
    self._max_steps = max_steps
    self._every = every_secs
    self._log = log
    self._loss = float('nan')
    self.last = {}
    self.history = []

  def after_create_session(self, session, coord):
    self._start = self._last_time = time.time()
    self._last_step = session.run(self._t.global_step)

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(self._t.loss)

  def after_run(self, run_context, run_values):
    self._loss = run_values.results
    if time.time() - self._last_time >= self._every:
      self._report(run_context.session)

  def _report(self, session):
    step, sparsity = session.run([self._t.global_step, self._t.sparsity])
    now = time.time()
    rate = (step - self._last_step) * self._batch_size / max(
        now - self._last_time, 1e-9)
    target, cost = '', {}
    pruning = self._t.pruning
    if pruning is not None and pruning.cost_ratio is not None:
      reached, allowed = session.run([pruning.cost_ratio,
                                      pruning.cost_ratio_target])
      target = ' (%s x%.3f, schedule x%.3f)' % (
          pruning.pruning_spec.budget.kind, reached, allowed)
      cost = {'cost_ratio': float(reached),
              'cost_ratio_target': float(allowed)}
    elif pruning is not None:
      target = ' (schedule %.1f%%)' % (100 * session.run(pruning.sparsity))
    self._log('step %d/%d  loss %.3f  %.0f examples/sec  sparsity %.1f%%%s',
              step, self._max_steps, self._loss, rate, 100 * sparsity, target)
    self._last_time, self._last_step = now, step
    self.last = dict({'step': int(step), 'loss': float(self._loss),
                      'sparsity': float(sparsity)}, **cost)
    self.history.append(self.last)

  def end(self, session):
    self._report(session)


def train(source, train_dir, max_steps, batch_size=128, learning_rate=0.1,
          num_epochs_per_decay=350.0, decay_factor=0.1, pruning_spec=None,
          seed=0, log_every_secs=5.0, save_checkpoint_secs=60,
          save_summaries_steps=100, log=cli.LOG.info):
  """Trains in a new graph until `max_steps`, checkpointing to `train_dir`.

  Training resumes from the newest checkpoint in `train_dir` if there is one.

  Args:
    source: an `input_data` source.
    train_dir: folder for checkpoints and TensorBoard event files.
    max_steps: global step to stop at.
    pruning_spec: pruning hparams, or None to train dense.
    log: callable taking a format string and its arguments.
    Others: as `build_training`; `log_every_secs` is the progress interval.

  Returns:
    dict with the final `step`, `loss` and mask `sparsity`, and `history`:
    the same dict at every progress line.
  """
  if max_steps < 1:
    raise ValueError('max_steps must be >= 1, got %r' % (max_steps,))
  with tf.Graph().as_default():
    t = build_training(source, batch_size, learning_rate, num_epochs_per_decay,
                       decay_factor, pruning_spec, seed)
    progress = ProgressHook(t, batch_size, max_steps, log_every_secs, log)
    hooks = [tf.train.StopAtStepHook(last_step=max_steps),
             tf.train.NanTensorHook(t.loss), progress]
    if t.pruning is not None:
      hooks.insert(0, tf1prune.PruningHook(t.pruning))
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=train_dir, hooks=hooks,
        save_checkpoint_secs=save_checkpoint_secs,
        save_summaries_steps=save_summaries_steps) as sess:
      while not sess.should_stop():
        sess.run(t.train_op)
  return dict(progress.last, history=progress.history)


def _parser():
  parser = argparse.ArgumentParser(
      description='Train the CIFAR-10 CNN with gradual pruning (tf1prune).')
  cli.data_flags(parser)
  parser.add_argument('--train_dir', default='/tmp/cifar10_train',
                      help='checkpoints and event logs (default: %(default)s)')
  parser.add_argument('--max_steps', type=int, default=None,
                      help='steps to train (default: 3000 on the digits, '
                           '100000 on CIFAR-10)')
  parser.add_argument('--pruning_hparams', default='',
                      help='comma-separated name=value pruning hparams, the '
                           'old syntax, e.g. target_sparsity=0.95,'
                           'begin_pruning_step=1000; applied on top of the '
                           'schedule scaled to --max_steps')
  parser.add_argument('--dense', action='store_true',
                      help='train without pruning (masks stay all ones)')
  parser.add_argument('--batch_size', type=int, default=128)
  parser.add_argument('--learning_rate', type=float, default=0.1)
  parser.add_argument('--num_epochs_per_decay', type=float, default=350.0)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--log_every_secs', type=float, default=5.0)
  parser.add_argument('--save_checkpoint_secs', type=int, default=60)
  return parser


def main(argv=None):
  args = _parser().parse_args(argv)
  if args.max_steps is not None and args.max_steps < 1:
    # 0 would read as 'not given' and train the default 3000 or
    # 100000 steps.
    raise ValueError('--max_steps must be >= 1, got %d; leave it out for '
                     'the default' % args.max_steps)
  if args.save_checkpoint_secs < 1:
    # MonitoredTrainingSession then has no saver: not even a last checkpoint.
    raise ValueError('--save_checkpoint_secs must be >= 1, got %d: then no '
                     'checkpoint is written, not even the last; a large value '
                     'writes only the last' % args.save_checkpoint_secs)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  source = cli.load_data(args)
  cli.LOG.info('data: %s', source.description)
  max_steps = args.max_steps or default_max_steps(source.name)
  spec = None if args.dense else pruning_spec(max_steps, args.pruning_hparams)
  if spec is not None:
    cli.LOG.info('pruning hparams: %s', args.pruning_hparams or '(defaults)')
  result = train(source, args.train_dir, max_steps, args.batch_size,
                 args.learning_rate, args.num_epochs_per_decay,
                 pruning_spec=spec, seed=args.seed,
                 log_every_secs=args.log_every_secs,
                 save_checkpoint_secs=args.save_checkpoint_secs)
  cli.LOG.info('done: step %d, loss %.3f, sparsity %.1f%%; checkpoints in %s',
               result['step'], result['loss'], 100 * result['sparsity'],
               args.train_dir)


if __name__ == '__main__':
  raise SystemExit(cli.run(main))
