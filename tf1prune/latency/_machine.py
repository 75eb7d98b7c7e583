"""Where a latency table was measured: the CPU and TensorFlow.

    >>> from tf1prune.latency._machine import describe
    >>> sorted(describe())
    ['cpu', 'cpus', 'tensorflow']
"""

import os
import platform


def _cpu():
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        key, sep, value = line.partition(':')
        if sep and key.strip() == 'model name':
          return value.strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def describe():
  """{'cpu', 'cpus', 'tensorflow'} of this machine."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {'cpu': _cpu(), 'cpus': os.cpu_count(),
          'tensorflow': tf.__version__}
