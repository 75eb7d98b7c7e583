"""Interleaved timing that keeps every sample, for paired ratios.

    >>> from bench._paired import interleaved_samples, paired_ratio
    >>> samples = interleaved_samples({'a': lambda: None, 'b': lambda: None},
    ...                               repeats=3)
    >>> len(samples['a']), paired_ratio(samples, 'a', 'b') > 0
    (3, True)

`bench._timing.interleaved_medians` returns medians; on a machine whose load
drifts over a run, the ratio of two medians can still carry the drift. Here
each repeat runs every candidate once, back to back (the order alternating
or shuffled), or `rounds` times, one round at a time, so
`paired_ratio` can take the median of the per-repeat ratios: both sides of
one ratio saw about the same load.
"""

import math
import os
import time

import numpy as np


ORDERS = ('reverse', 'shuffle')


def interleaved_samples(candidates, repeats, warmup=1, rounds=1,
                        order='reverse', seed=0):
  """Runs each callable `rounds` times per repeat, one round at a time.

  A round runs every candidate once, back to back, in an `order` that goes
  from round to round:

  * 'reverse': the given order, reversed every other round (the two ends
    run twice in a row every other round);
  * 'shuffle': a fresh random permutation every round (`seed`), never
    starting with the candidate the last round ended with, so what runs
    before and after a candidate varies and no candidate follows itself.

  A candidate's sample for a repeat is the sum of its `rounds` durations.
  With rounds > 1, candidates are interleaved call by call, so both sides
  of a ratio see the same load more closely than with whole repeats run one
  after the other.

  Returns:
    dict name -> list of `repeats` durations in seconds.
  """
  if order not in ORDERS:
    raise ValueError('order must be one of %s, got %r' % (ORDERS, order))
  for fn in candidates.values():
    for _ in range(warmup):
      fn()
  samples = {name: [] for name in candidates}
  names = list(candidates)
  rng = np.random.RandomState(seed)
  last = None
  for r in range(repeats):
    for name in names:
      samples[name].append(0.0)
    for i in range(rounds):
      if order == 'shuffle':
        turn = [names[j] for j in rng.permutation(len(names))]
        if len(turn) > 1 and turn[0] == last:
          turn[0], turn[1] = turn[1], turn[0]
      elif order == 'reverse' and (r * rounds + i) % 2:
        turn = names[::-1]
      else:
        turn = names
      for name in turn:
        start = time.perf_counter()
        candidates[name]()
        samples[name][-1] += time.perf_counter() - start
      last = turn[-1]
  return samples


def paired_ratio(samples, name, base):
  """Median over repeats of `samples[name][i] / samples[base][i]`."""
  return float(np.median(np.array(samples[name]) / np.array(samples[base])))


def medians(samples):
  """dict name -> median of its samples."""
  return {name: float(np.median(v)) for name, v in samples.items()}


def median_interval(values, level=0.95):
  """A distribution-free interval for the median of `values`: the order
  statistics between which the median lies with probability >= `level`
  when the values are independent draws. Returns (low, high); the whole
  range when there are too few values for `level`.
  """
  x = np.sort(np.asarray(values, dtype=np.float64))
  n = len(x)
  # P(fewer than j of n draws lie below the median) = P(Binomial(n, 1/2) < j).
  below, j = 0.0, 0
  while j < n and below + _binomial_half(n, j) <= (1.0 - level) / 2:
    below += _binomial_half(n, j)
    j += 1
  if j == 0:
    return float(x[0]), float(x[-1])
  return float(x[j - 1]), float(x[n - j])


def _binomial_half(n, k):
  """P(Binomial(n, 1/2) == k), in logs (2.0**n overflows past n = 1023)."""
  return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) -
                  math.lgamma(n - k + 1) - n * math.log(2.0))


def load_average():
  """The 1-minute load average (other processes compete for the CPUs)."""
  try:
    return float(os.getloadavg()[0])
  except (AttributeError, OSError):
    return None
