"""Iterative lottery-ticket pruning of a small MLP on scikit-learn's digits.

    python examples/lottery_ticket.py --rounds 5 --rate 0.5 --steps 300

Each round trains the network from its rewind point (step `--rewind_step`,
0: the initialization), prunes `--rate` of the surviving weights of every
layer by magnitude (`LotteryTicket.prune_op`), and rewinds the survivors to
their snapshot (`LotteryTicket.rewind_op`, Adam's slots reset too). For
comparison the same masks are also trained from a fresh random
initialization. Prints one line per round: sparsity, test accuracy of the
ticket and of the random re-initialization. Runs in seconds on a CPU.

The model is plain `tf.get_variable` + `tf.matmul` code; `pruning_scope()`
adds the masks without touching it.
"""

import argparse
import sys

import numpy as np

# TensorFlow and tf1prune are imported on use: a bad flag fails fast and quiet.


def _data(seed):
  """Digits (8x8 images, 10 classes) scaled to [0, 1]: 1437 train, 360 test."""
  from sklearn.datasets import load_digits
  digits = load_digits()
  x = (digits.data / 16.0).astype(np.float32)
  y = digits.target.astype(np.int64)
  order = np.random.RandomState(seed).permutation(len(x))
  x, y = x[order], y[order]
  return (x[:1437], y[:1437]), (x[1437:], y[1437:])


def model(images, hidden=(128, 64)):
  """An MLP written with get_variable, as an unmodified script would."""
  import tensorflow.compat.v1 as tf
  net, depth = images, images.get_shape().as_list()[1]
  for i, width in enumerate(list(hidden) + [10]):
    with tf.variable_scope('fc%d' % (i + 1)):
      kernel = tf.get_variable('weights', [depth, width])
      bias = tf.get_variable('biases', [width],
                             initializer=tf.zeros_initializer())
      net = tf.matmul(net, kernel) + bias
      if i < len(hidden):
        net = tf.nn.relu(net)
    depth = width
  return net


def _batches(x, y, size, rs):
  while True:
    order = rs.permutation(len(x))
    for start in range(0, len(x) - size + 1, size):
      pick = order[start:start + size]
      yield x[pick], y[pick]


def run(rounds, rate, steps, rewind_step, batch_size, learning_rate, seed,
        out=sys.stdout):
  """Runs the experiment; returns a list of (sparsity, ticket, random) accuracies."""
  import tensorflow.compat.v1 as tf
  import tf1prune
  (train_x, train_y), (test_x, test_y) = _data(seed)
  rs = np.random.RandomState(seed)
  with tf.Graph().as_default():
    tf.set_random_seed(seed)
    images = tf.placeholder(tf.float32, [None, 64])
    labels = tf.placeholder(tf.int64, [None])
    with tf1prune.pruning_scope():
      logits = model(images)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels),
                                      tf.float32))
    optimizer = tf.train.AdamOptimizer(learning_rate)
    train_op = optimizer.minimize(loss)
    ticket = tf1prune.LotteryTicket()
    sparsity = tf.placeholder(tf.float32, [])
    prune = ticket.prune_op(sparsity)
    rewind = ticket.rewind_op(reinitialize=optimizer.variables())
    weights = [v for v in tf.trainable_variables()]
    random_reinit = tf.variables_initializer(weights + optimizer.variables())
    bake = tf1prune.bake_masks_op()
    masks = tf1prune.get_masks()
    batches = _batches(train_x, train_y, batch_size, rs)

    def train(sess, count):
      for _ in range(count):
        x, y = next(batches)
        sess.run(train_op, {images: x, labels: y})

    def test(sess):
      return float(sess.run(accuracy, {images: test_x, labels: test_y}))

    results = []
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      train(sess, rewind_step)
      sess.run(ticket.snapshot_op())
      out.write('round  sparsity  ticket_acc  random_reinit_acc\n')
      for r in range(rounds + 1):
        s = tf1prune.round_sparsity(r, rate)
        if r:
          sess.run(prune, {sparsity: s})
        # The control: the same masks, trained from a new random start.
        sess.run(random_reinit)
        sess.run(bake)
        train(sess, steps)
        control = test(sess)
        sess.run(rewind)
        train(sess, max(steps - rewind_step, 0))
        acc = test(sess)
        kept = sum(sess.run(tf.reduce_sum(m)) for m in masks)
        total = sum(m.shape.num_elements() for m in masks)
        results.append((1.0 - kept / total, acc, control))
        out.write('%5d  %8.3f  %10.3f  %17.3f\n' % (r, 1.0 - kept / total, acc,
                                                    control))
        out.flush()
  return results


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--rounds', type=int, default=5,
                      help='pruning rounds after the dense round 0')
  parser.add_argument('--rate', type=float, default=0.5,
                      help='fraction of the surviving weights pruned per round')
  parser.add_argument('--steps', type=int, default=300,
                      help='training steps per round')
  parser.add_argument('--rewind_step', type=int, default=0,
                      help='step whose weights the ticket rewinds to')
  parser.add_argument('--batch_size', type=int, default=64)
  parser.add_argument('--learning_rate', type=float, default=1e-3)
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args(argv)
  problems = []
  if args.rounds < 0:
    problems.append('--rounds must be >= 0, got %d' % args.rounds)
  if not 0.0 <= args.rate < 1.0:
    problems.append('--rate must be in [0, 1), got %r' % args.rate)
  if args.steps < 1 or not 0 <= args.rewind_step <= args.steps:
    problems.append('--steps must be >= 1 and --rewind_step in [0, steps], got '
                    '%d and %d' % (args.steps, args.rewind_step))
  if args.batch_size < 1:
    problems.append('--batch_size must be >= 1, got %d' % args.batch_size)
  if problems:
    sys.stderr.write('lottery_ticket: error: %s\n' % problems[0])
    return 2
  import tensorflow.compat.v1 as tf
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  run(args.rounds, args.rate, args.steps, args.rewind_step, args.batch_size,
      args.learning_rate, args.seed)
  return 0


if __name__ == '__main__':
  sys.exit(main())
