"""Lottery tickets on a Keras model: a small MLP on breast-cancer data.

    python examples/keras_lottery_ticket.py [--rounds 5 --rate 0.5 --epochs 20]

The model: Dense 256/128/64/32 with softsign and
bias_initializer='ones', Dense(1, 'tanh'), Adam, binary cross-entropy,
`model.fit`. The data set is scikit-learn's embedded Wisconsin breast-cancer
set (569 samples, 30 features, binary), standardized, split 70/30. Round 0
trains the dense model; each round r then prunes to `round_sparsity(r, rate)`
of the trained weights, rewinds the survivors to their initial values (and
Adam to its initial state), and trains again. The control trains a freshly,
randomly initialized model under the same masks. Runs in about a minute on a
laptop CPU.
"""

import argparse
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402


def load_data(seed=0):
  from sklearn.datasets import load_breast_cancer
  x, y = load_breast_cancer(return_X_y=True)
  order = np.random.RandomState(seed).permutation(len(x))
  x, y = x[order].astype(np.float32), y[order].astype(np.float32)
  cut = int(0.7 * len(x))
  mean, std = x[:cut].mean(0), x[:cut].std(0) + 1e-7
  x = (x - mean) / std
  return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def build_model(keras, seed):
  """The model of the question, unchanged."""
  keras.utils.set_random_seed(seed)
  model = keras.Sequential([
      keras.Input((30,)),
      keras.layers.Dense(256, activation='softsign', bias_initializer='ones'),
      keras.layers.Dense(128, activation='softsign', bias_initializer='ones'),
      keras.layers.Dense(64, activation='softsign', bias_initializer='ones'),
      keras.layers.Dense(32, activation='softsign', bias_initializer='ones'),
      keras.layers.Dense(1, activation='tanh'),
  ])
  model.compile(keras.optimizers.Adam(1e-3), 'binary_crossentropy',
                metrics=['accuracy'])
  return model


def train_and_evaluate(model, train, test, epochs):
  model.fit(train[0], train[1], batch_size=32, epochs=epochs, verbose=0,
            shuffle=False)
  return model.evaluate(test[0], test[1], verbose=0)[1]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--rate', type=float, default=0.5,
                      help='fraction of the remaining weights pruned per round')
  parser.add_argument('--epochs', type=int, default=20)
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args(argv)

  import keras  # Keras 3; with TF_USE_LEGACY_KERAS=1 use tf_keras instead.
  if os.environ.get('TF_USE_LEGACY_KERAS', '').lower() in ('1', 'true'):
    import tf_keras as keras
  import tf1prune.keras as tk

  train, test = load_data(args.seed)
  model = build_model(keras, args.seed)
  ticket = tk.LotteryTicket(model)
  ticket.snapshot()                      # the rewind point: initialization
  accuracy = train_and_evaluate(model, train, test, args.epochs)
  print('%s %s, %d train / %d test samples, %d epochs per round'
        % (keras.__name__, keras.__version__, len(train[0]), len(test[0]),
           args.epochs))
  print('round  sparsity  kept weights  ticket acc  random re-init acc')
  total = sum(m.size for m in ticket.masks().values())
  print('%5d  %8.3f  %12d  %10.4f  %18s' % (0, 0.0, total, accuracy, '-'))
  results = [(0, 0.0, accuracy, None)]
  for r in range(1, args.rounds + 1):
    sparsity = tk.round_sparsity(r, args.rate)
    ticket.prune(sparsity)
    ticket.rewind()
    ticket_accuracy = train_and_evaluate(model, train, test, args.epochs)
    masks = ticket.masks()
    control = build_model(keras, args.seed + 1000 + r)
    tk.LotteryTicket(control).apply_masks(list(masks.values()))
    random_accuracy = train_and_evaluate(control, train, test, args.epochs)
    kept = sum(int(m.sum()) for m in masks.values())
    print('%5d  %8.3f  %12d  %10.4f  %18.4f'
          % (r, sparsity, kept, ticket_accuracy, random_accuracy))
    results.append((r, sparsity, ticket_accuracy, random_accuracy))
  return results


if __name__ == '__main__':
  main()
