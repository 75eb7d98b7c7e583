"""Interleaved timing that keeps every sample, for paired ratios.

    >>> from bench._paired import interleaved_samples, paired_ratio
    >>> samples = interleaved_samples({'a': lambda: None, 'b': lambda: None},
    ...                               repeats=3)
    >>> len(samples['a']), paired_ratio(samples, 'a', 'b') > 0
    (3, True)

`bench._timing.interleaved_medians` returns medians; on a machine whose load
drifts over a run, the ratio of two medians can still carry the drift. Here
each repeat runs every candidate once, back to back (the order alternating),
so `paired_ratio` can take the median of the per-repeat ratios: both sides of
one ratio saw about the same load.
"""

import os
import time

import numpy as np


def interleaved_samples(candidates, repeats, warmup=1):
  """Runs each callable once per repeat, alternating the order.

  Returns:
    dict name -> list of `repeats` durations in seconds.
  """
  for fn in candidates.values():
    for _ in range(warmup):
      fn()
  samples = {name: [] for name in candidates}
  names = list(candidates)
  for r in range(repeats):
    for name in (names if r % 2 == 0 else names[::-1]):
      start = time.perf_counter()
      candidates[name]()
      samples[name].append(time.perf_counter() - start)
  return samples


def paired_ratio(samples, name, base):
  """Median over repeats of `samples[name][i] / samples[base][i]`."""
  return float(np.median(np.array(samples[name]) / np.array(samples[base])))


def medians(samples):
  """dict name -> median of its samples."""
  return {name: float(np.median(v)) for name, v in samples.items()}


def load_average():
  """The 1-minute load average (other processes compete for the CPUs)."""
  try:
    return float(os.getloadavg()[0])
  except (AttributeError, OSError):
    return None
