"""Latency tables: each layer's time on a runtime, measured at a few widths.

    >>> from tf1prune.latency.table import LayerTimes
    >>> times = LayerTimes('conv', 'conv', (8, 16), (4, 8),
    ...                    ((1.0, 2.0), (2.0, 4.0)))
    >>> times.at(12, 6), times.at(16, 8), times.at(4, 8)
    (2.25, 4.0, 1.0)

A `LayerTimes` holds the milliseconds a layer took on a grid of input and
output widths (a depthwise conv and an LRN have one width: their outputs
follow their input); `at(w_in, w_out)` interpolates bilinearly between the
grid's points and extrapolates linearly beyond them (never below 0). A
`LatencyTable` is the `LayerTimes` of a model's layers with the runtime they
were measured on (`runtime`, `threads`, `batch`, the CPU and TensorFlow
versions) and the runtime's channel step (`step`: widths it runs as fast as
the next multiple of `step`); it is saved as JSON next to the checkpoint
(`save`, `load`) and reused while its layers and runtime are those asked for
(`matches`).
"""

import collections
import json

import numpy as np

__all__ = ['LatencyTable', 'LayerTimes']


def _weights(grid, value):
  """(index, fraction): `value` lies `fraction` of the way from grid[index]
  to grid[index + 1] (beyond the ends: extrapolated)."""
  grid = np.asarray(grid, np.float64)
  if len(grid) == 1:
    return 0, 0.0
  index = int(np.clip(np.searchsorted(grid, value) - 1, 0, len(grid) - 2))
  return index, (value - grid[index]) / (grid[index + 1] - grid[index])


class LayerTimes(collections.namedtuple('LayerTimes', [
    'name', 'kind', 'inputs', 'outputs', 'ms'])):
  """One layer's times: `ms[i][o]` at input width `inputs[i]` and output
  width `outputs[o]` (ascending); see the module docstring."""

  def at(self, w_in, w_out=None):
    """The interpolated milliseconds at (`w_in`, `w_out`)."""
    ms = np.asarray(self.ms, np.float64)
    i, a = _weights(self.inputs, w_in)
    o, b = (0, 0.0) if len(self.outputs) == 1 or w_out is None else \
        _weights(self.outputs, w_out)
    i1 = min(i + 1, ms.shape[0] - 1)
    o1 = min(o + 1, ms.shape[1] - 1)
    value = ((1 - a) * (1 - b) * ms[i, o] + a * (1 - b) * ms[i1, o] +
             (1 - a) * b * ms[i, o1] + a * b * ms[i1, o1])
    return max(float(value), 0.0)


class LatencyTable(object):
  """The `LayerTimes` of a model's layers on one runtime.

  Args:
    layers: list of `LayerTimes`.
    runtime: 'tf' (a TF session) or 'tflite' (the TFLite interpreter).
    threads: the intra-op (interpreter) threads.
    batch: the batch size the layers ran at.
    step: the runtime's channel step (1: none found).
    machine: a dict describing where it was measured (CPU, TensorFlow).
    signature: {layer name: its geometry as a list}, what `matches` checks.
  """

  def __init__(self, layers, runtime, threads, batch, step=1, machine=None,
               signature=None):
    self.layers = list(layers)
    self.runtime, self.threads, self.batch = runtime, int(threads), int(batch)
    self.step = int(step)
    self.machine = dict(machine or {})
    self.signature = dict(signature or {})
    self._by_name = dict((l.name, l) for l in self.layers)

  def __getitem__(self, name):
    return self._by_name[name]

  def __contains__(self, name):
    return name in self._by_name

  def matches(self, signature, runtime, threads, batch):
    """True if the table was measured for these layers and this runtime."""
    return (self.runtime, self.threads, self.batch) == (
        runtime, int(threads), int(batch)) and self.signature == signature

  def to_dict(self):
    return {'runtime': self.runtime, 'threads': self.threads,
            'batch': self.batch, 'step': self.step, 'machine': self.machine,
            'signature': self.signature,
            'layers': [{'name': l.name, 'kind': l.kind,
                        'inputs': list(l.inputs), 'outputs': list(l.outputs),
                        'ms': [list(row) for row in l.ms]}
                       for l in self.layers]}

  @classmethod
  def from_dict(cls, data):
    return cls([LayerTimes(l['name'], l['kind'], tuple(l['inputs']),
                           tuple(l['outputs']),
                           tuple(tuple(row) for row in l['ms']))
                for l in data['layers']], data['runtime'], data['threads'],
               data['batch'], data.get('step', 1), data.get('machine'),
               data.get('signature'))

  def save(self, path):
    """Writes the table as JSON to `path`, atomically."""
    from tf1prune.export.atomic import write_atomically
    with write_atomically(path) as f:
      f.write((json.dumps(self.to_dict(), indent=1) + '\n').encode())

  @classmethod
  def load(cls, path):
    """Reads a table `save` wrote.

    Raises:
      ValueError: `path` is not such a file.
    """
    try:
      with open(path) as f:
        return cls.from_dict(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ValueError('latency_table=%r is not a latency table that '
                       'tf1prune.latency.profile wrote (%s); remove it to '
                       'measure the layers again' % (path, e))
