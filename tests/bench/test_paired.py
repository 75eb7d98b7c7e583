"""The interleaving and the median interval the benchmarks report with."""

import fractions
import math

import numpy as np
import pytest

from bench._paired import interleaved_samples, median_interval


def _calls(order, repeats=2, rounds=3, names='abc', seed=0):
  calls = []
  samples = interleaved_samples(
      {name: (lambda name=name: calls.append(name)) for name in names},
      repeats=repeats, warmup=0, rounds=rounds, order=order, seed=seed)
  assert sorted(samples) == sorted(names)
  assert all(len(v) == repeats for v in samples.values())
  return calls


def test_the_reversing_order_runs_its_ends_twice_in_a_row():
  calls = _calls('reverse')
  assert calls == ['a', 'b', 'c', 'c', 'b', 'a'] * 3
  assert ('c', 'c') in zip(calls, calls[1:])


def test_a_shuffled_order_is_a_new_permutation_every_round():
  names = 'abcdefg'
  calls = _calls('shuffle', repeats=4, rounds=10, names=names)
  turns = [calls[i:i + len(names)] for i in range(0, len(calls), len(names))]
  assert len(turns) == 40
  assert all(sorted(turn) == list(names) for turn in turns)
  assert all(x != y for x, y in zip(calls, calls[1:]))
  # Each candidate has had every other one before it.
  before = {(x, y) for x, y in zip(calls, calls[1:])}
  assert all((x, y) in before for x in names for y in names if x != y)
  assert calls == _calls('shuffle', repeats=4, rounds=10, names=names)
  assert calls != _calls('shuffle', repeats=4, rounds=10, names=names, seed=1)


def test_an_unknown_order_is_refused_by_name():
  with pytest.raises(ValueError, match="order must be one of .*'random'"):
    _calls('random')


def _reference_interval(x, level):
  """Order statistics x[j-1], x[n-j] with j the most draws that can lie
  below the median with probability <= (1 - level) / 2, in exact
  fractions."""
  x = sorted(x)
  n = len(x)
  tail = fractions.Fraction(1 - fractions.Fraction(level).limit_denominator(
      1000)) / 2
  below, j = fractions.Fraction(0), 0
  while j < n:
    p = fractions.Fraction(math.factorial(n),
                           math.factorial(j) * math.factorial(n - j) * 2**n)
    if below + p > tail:
      break
    below += p
    j += 1
  return (x[0], x[-1]) if j == 0 else (x[j - 1], x[n - j])


@pytest.mark.parametrize('n', [1, 5, 6, 9, 12, 36, 101, 1100])
@pytest.mark.parametrize('level', [0.9, 0.95])
def test_the_median_interval_is_the_binomial_order_statistics(n, level):
  values = np.random.RandomState(n).permutation(n).astype(np.float64) / 7
  assert median_interval(values, level) == _reference_interval(values, level)
