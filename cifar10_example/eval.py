"""Precision @ 1 of a training checkpoint on the test set.

    python -m cifar10_example.eval --checkpoint_dir=/tmp/cifar10_train --run_once

From Python (graph mode):

    >>> import tensorflow.compat.v1 as tf, tempfile
    >>> from cifar10_example import eval as cifar10_eval, input_data, train
    >>> tf.disable_eager_execution()
    >>> source, folder = input_data.DigitsSource(), tempfile.mkdtemp()
    >>> _ = train.train(source, folder, max_steps=5, batch_size=32)
    >>> result = cifar10_eval.evaluate(source, tf.train.latest_checkpoint(folder))
    >>> result['count'], 0.0 <= result['precision'] <= 1.0
    (360, True)

The eval graph is the training model fed by `source.test_dataset()`; the
checkpoint's weights and masks are restored, so a pruned checkpoint is
evaluated with its masks. Without `--run_once` the script waits for new
checkpoints and evaluates each, writing `precision @ 1` summaries to
`--eval_dir` for TensorBoard.
"""

import argparse
import time

import tensorflow.compat.v1 as tf

from cifar10_example import cli, model

__all__ = ['evaluate', 'main']


def evaluate(source, checkpoint_path, batch_size=500, summary_dir=None):
  """Counts the test images whose top logit is the label, in a new graph.

  Args:
    source: an `input_data` source.
    checkpoint_path: a checkpoint prefix (e.g. `tf.train.latest_checkpoint`).
    batch_size: test images per `session.run`.
    summary_dir: if set, a `precision @ 1` summary is written there.

  Returns:
    dict: `precision` (float in [0, 1]), `correct`, `count` and
    `global_step` (ints).

  Raises:
    ValueError: `checkpoint_path` is None (no checkpoint found).
  """
  if not checkpoint_path:
    raise ValueError('no checkpoint to evaluate: train first, or pass the '
                     'folder holding one as --checkpoint_dir')
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    images, labels = tf.data.make_one_shot_iterator(
        source.test_dataset(batch_size)).get_next()
    logits = model.inference(images, source.num_classes)
    hits = tf.reduce_sum(tf.cast(tf.nn.in_top_k(logits, labels, 1), tf.int32))
    count = tf.size(labels)
    saver = tf.train.Saver(tf.global_variables())
    correct = total = 0
    with tf.Session() as sess:
      saver.restore(sess, checkpoint_path)
      step = int(sess.run(global_step))
      while True:
        try:
          h, c = sess.run([hits, count])
        except tf.errors.OutOfRangeError:
          break
        correct += int(h)
        total += int(c)
    precision = correct / float(max(total, 1))
    if summary_dir:
      writer = tf.summary.FileWriter(summary_dir)
      writer.add_summary(tf.Summary(value=[tf.Summary.Value(
          tag='precision @ 1', simple_value=precision)]), step)
      writer.close()
  return {'precision': precision, 'correct': correct, 'count': total,
          'global_step': step}


def _parser():
  parser = argparse.ArgumentParser(
      description='Evaluate CIFAR-10 checkpoints: precision @ 1 on the test '
                  'set.')
  cli.data_flags(parser)
  parser.add_argument('--checkpoint_dir', default='/tmp/cifar10_train',
                      help='folder of the training checkpoints '
                           '(default: %(default)s)')
  parser.add_argument('--eval_dir', default='/tmp/cifar10_eval',
                      help='where the summaries go (default: %(default)s)')
  parser.add_argument('--run_once', action='store_true',
                      help='evaluate the newest checkpoint once and exit')
  parser.add_argument('--eval_interval_secs', type=int, default=300)
  parser.add_argument('--batch_size', type=int, default=500)
  return parser


def main(argv=None):
  args = _parser().parse_args(argv)
  if args.eval_interval_secs < 0 and not args.run_once:
    # Found only after the first evaluation, as 'sleep length must be
    # non-negative'.
    raise ValueError('--eval_interval_secs must be >= 0, got %d'
                     % args.eval_interval_secs)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  source = cli.load_data(args)
  cli.LOG.info('data: %s', source.description)
  last = None
  while True:
    path = tf.train.latest_checkpoint(args.checkpoint_dir)
    if path is None and last is None and not args.run_once:
      # Said once: otherwise the script waits without a word, forever if
      # --checkpoint_dir is wrong.
      cli.LOG.info('no checkpoint in --checkpoint_dir=%s yet: looking again '
                   'every %d s', args.checkpoint_dir, args.eval_interval_secs)
      last = ''
    if path and path != last:
      r = evaluate(source, path, args.batch_size, args.eval_dir)
      cli.LOG.info('%s: precision @ 1 = %.4f (%d/%d) at step %d', path,
                   r['precision'], r['correct'], r['count'], r['global_step'])
      last = path
    elif args.run_once:
      raise ValueError('no checkpoint to evaluate in --checkpoint_dir=%s: '
                       'train first, or pass the folder holding one'
                       % args.checkpoint_dir)
    if args.run_once:
      return 0
    time.sleep(args.eval_interval_secs)


if __name__ == '__main__':
  raise SystemExit(cli.run(main))
