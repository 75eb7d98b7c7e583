"""A model's latency as a function of its kept units, from a latency table.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.channels.cost import CostModel, Layer, Width
    >>> from tf1prune.latency.model import LatencyCost
    >>> from tf1prune.latency.table import LatencyTable, LayerTimes
    >>> a = Width(0, ((0, 1), (1, 1)))                 # two units
    >>> model = CostModel(2, [Layer('fc', 'dense', Width(4, ()), a, 1, 1, 1,
    ...                             True)])
    >>> table = LatencyTable([LayerTimes('fc', 'dense', (4,), (1, 2),
    ...                                  ((1.0, 3.0),))], 'tf', 1, 1)
    >>> cost = LatencyCost(model, table)
    >>> cost.dense, cost.layer_ms(np.array([1.0, 0.0]))
    (3.0, [('fc', 'dense', 1.0)])
    >>> with tf.Session() as sess:
    ...   ms, saves = sess.run([
    ...       cost.cost(tf.constant([1.0, 0.0], tf.float64)),
    ...       cost.marginals(tf.constant([1.0, 1.0], tf.float64), 2)])
    >>> float(ms), saves.tolist()
    (1.0, [2.0, 2.0])

The widths of each layer are the cost model's (`tf1prune.channels.cost`);
its time is its `LayerTimes` interpolated at them (a layer the table has no
times for counts 0). `cost(keep)` and `marginals(keep, U)` are the tensors
`tf1prune.masks.budget_masks` ranks and bisects with; `dense` is the sum at
every width full, what a `latency:` budget's ratio is of.
"""

import numpy as np
import tensorflow.compat.v1 as tf

__all__ = ['LatencyCost']


class LatencyCost(object):
  """The latency of a `CostModel`'s layers, from a `LatencyTable`."""

  def __init__(self, model, table):
    self.model = model
    self.table = table
    index = dict((w, i) for i, w in enumerate(model.widths))
    self._layers = []
    for layer in model.layers:
      if layer.name not in table:
        continue
      times = table[layer.name]
      two = layer.kind in ('conv', 'dense') and len(times.outputs) > 1
      self._layers.append((layer, times, index[layer.inputs],
                           index[layer.outputs] if two else None))
    arrays = model.arrays('params')
    self._fixed = arrays['fixed']
    self._entries = (arrays['entry_width'], arrays['entry_unit'],
                     arrays['entry_count'])
    self.dense = self.cost_of(np.ones(model.num_units))

  def layer_ms(self, keep):
    """[(layer name, kind, ms)] with `keep` (NumPy, 0/1 per unit)."""
    widths = [w.value(keep) for w in self.model.widths]
    return [(layer.name, layer.kind, times.at(
        widths[i], None if o is None else widths[o]))
            for layer, times, i, o in self._layers]

  def cost_of(self, keep):
    """The model's latency with `keep` (NumPy), in ms."""
    return float(sum(ms for _, _, ms in self.layer_ms(keep)))

  def _widths(self, keep):
    width, unit, count = self._entries
    return self._fixed + tf.unsorted_segment_sum(
        tf.gather(keep, unit) * count, width, len(self._fixed))

  @staticmethod
  def _axis(grid, value):
    """(index, fraction, span) of `value` on the ascending `grid`."""
    grid = np.asarray(grid, np.float64)
    if len(grid) == 1:
      zero = tf.zeros_like(value)
      return tf.zeros_like(value, tf.int32), zero, zero + 1.0
    index = tf.clip_by_value(
        tf.searchsorted(grid, tf.reshape(value, [1]))[0] - 1, 0,
        len(grid) - 2)
    low = tf.gather(grid, index)
    span = tf.gather(grid, index + 1) - low
    return index, (value - low) / span, span

  def _layer(self, times, w_in, w_out):
    """(ms, d ms / d w_in, d ms / d w_out) as float64 scalars."""
    ms = np.asarray(times.ms, np.float64)
    i, a, span_i = self._axis(times.inputs, w_in)
    if w_out is None:
      o, b, span_o = tf.constant(0), tf.constant(np.float64(0)), 1.0
    else:
      o, b, span_o = self._axis(times.outputs, w_out)
    i1 = tf.minimum(i + 1, ms.shape[0] - 1)
    o1 = tf.minimum(o + 1, ms.shape[1] - 1)
    flat = tf.constant(ms.ravel())
    cols = ms.shape[1]
    v00 = tf.gather(flat, i * cols + o)
    v10 = tf.gather(flat, i1 * cols + o)
    v01 = tf.gather(flat, i * cols + o1)
    v11 = tf.gather(flat, i1 * cols + o1)
    value = ((1 - a) * (1 - b) * v00 + a * (1 - b) * v10 +
             (1 - a) * b * v01 + a * b * v11)
    d_in = ((1 - b) * (v10 - v00) + b * (v11 - v01)) / span_i
    d_out = ((1 - a) * (v01 - v00) + a * (v11 - v10)) / span_o
    positive = value > 0
    zero = tf.zeros_like(value)
    return (tf.maximum(value, zero), tf.where_v2(positive, d_in, zero),
            tf.where_v2(positive, d_out, zero))

  def cost(self, keep):
    """The float64 latency (ms) with the float64 [U] `keep`."""
    widths = self._widths(keep)
    total = tf.constant(np.float64(0.0))
    for _, times, i, o in self._layers:
      value, _, _ = self._layer(times, widths[i],
                                None if o is None else widths[o])
      total += value
    return total

  def marginals(self, keep, num_units):
    """Float64 [num_units]: d latency / d keep[u] at `keep`."""
    widths = self._widths(keep)
    per_width = [tf.constant(np.float64(0.0))] * len(self._fixed)
    for _, times, i, o in self._layers:
      _, d_in, d_out = self._layer(times, widths[i],
                                   None if o is None else widths[o])
      per_width[i] += d_in
      if o is not None:
        per_width[o] += d_out
    width, unit, count = self._entries
    return tf.unsorted_segment_sum(
        tf.gather(tf.stack(per_width), width) * count, unit, num_units)
