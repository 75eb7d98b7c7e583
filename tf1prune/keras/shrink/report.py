"""What `shrink_model` removed: parameters and FLOPs per layer, and stops.

    >>> from tf1prune.export.shrink.report import LayerShrink
    >>> from tf1prune.keras.shrink.report import KerasShrinkReport
    >>> row = LayerShrink('fc', 'Dense', 8, 8, 4, 2, 36, 18, 64, 32)
    >>> report = KerasShrinkReport([row], [], ['fc'])
    >>> report.to_dict()['totals']['flops_ratio'], report.params_after
    (0.5, 18)

The graph shrink's `ShrinkReport`, with one row (`LayerShrink`, its `op`
the Keras layer class) per layer that has weights or FLOPs. Parameters are
every weight of a layer (kernel, bias, a batch norm's four vectors), as
`model.count_params()` counts them. FLOPs are per example, 2 x the
multiply-adds of Dense and convolution layers (Conv1D / 2D / 3D, grouped or
channels_first too, depthwise, separable: the kernel size per output
position; a transposed conv: per input position), as the graph shrink counts
them; biases, activations, batch norms, pools and the other layers
(attention, recurrent, embedding) count 0. Stops are `plan.Stop`s
(layer, channels, reason): empty filters that had to stay.
"""

import numpy as np

from tf1prune.export.shrink.report import LayerShrink, ShrinkReport
from tf1prune.keras.shrink.layer_calls import is_conv

__all__ = ['KerasShrinkReport', 'layer_row']


def _channels_first(layer):
  config = layer.get_config() if hasattr(layer, 'get_config') else {}
  return config.get('data_format') == 'channels_first'


def _flops(layer, out_shape, in_shape=None):
  """2 x multiply-adds per example of a Dense or convolution call (None
  when the positions it is applied at are not static; 0 for other layers).

  A convolution (1D, 2D or 3D, grouped, channels_first) does `kernel size`
  multiply-adds per output position, a transposed one per input position.
  """
  name = type(layer).__name__
  shapes = {v.name.split('/')[-1].split(':')[0]: tuple(v.shape)
            for v in getattr(layer, 'weights', [])}
  conv = bool(shapes) and is_conv(layer)     # a ConvLSTM2D counts 0
  if not (name == 'Dense' or conv):
    return 0
  shape = in_shape if name.endswith('Transpose') else out_shape
  spatial = tuple(shape[2:] if _channels_first(layer) else shape[1:-1])
  if None in spatial:
    return None
  if 'pointwise_kernel' in shapes:
    macs = (np.prod(shapes['depthwise_kernel']) +
            np.prod(shapes['pointwise_kernel']))
  else:
    macs = np.prod(shapes.get('kernel', shapes.get('depthwise_kernel', 0)))
  return int(2 * macs * np.prod(spatial or [1]))


def _params(layers):
  return int(sum(np.prod(v.shape) for layer in layers for v in layer.weights))


def layer_row(old, new, call, in_shape, in_after, out_after, helpers=()):
  """A `LayerShrink` for one pair of layers, or None if it has nothing
  to count.

  Args:
    old, new: the layer before and after the shrink.
    call: the old layer's `layer_calls.Call`.
    in_shape: the static shape of its (first) input before the shrink.
    in_after: the input channels after it.
    out_after: the new output's static shape.
    helpers: (layer, output shape[, input shape]) of the layers the shrink
      added for this one (a ones channel's 1x1 conv, a border map's conv, a
      map's transposed conv); their parameters and FLOPs count as this
      layer's.
  """
  params_before = _params([old])
  params_after = _params([new] + [h[0] for h in helpers])
  flops_before = _flops(old, call.shape, in_shape)
  flops_after = [_flops(new, out_after, in_shape)] + [
      _flops(*h) for h in helpers]
  flops_after = None if None in flops_after else sum(flops_after)
  if not (params_before or flops_before):
    return None
  axis = -1
  if _channels_first(old):    # a stop: its inputs keep all their channels
    axis, in_after = 1, in_shape[1]
  return LayerShrink(old.name, type(old).__name__, in_shape[axis], in_after,
                     call.shape[axis], out_after[axis], params_before,
                     params_after, flops_before, flops_after)


class KerasShrinkReport(ShrinkReport):
  """The result of `tf1prune.keras.shrink_model`.

  Args:
    layers: list of `LayerShrink`, in the model's order.
    stops: list of `plan.Stop` (layer, channels, reason).
    output_nodes: the names of the layers that give the model's outputs.

  Attributes:
    check: the `tf1prune.export.same_outputs.OutputDifference` of each
      output (empty when `shrink_model` ran with `check=False`).
  """

  def __init__(self, layers, stops, output_nodes):
    super(KerasShrinkReport, self).__init__(layers, [], output_nodes)
    self.stops = list(stops)
    self.check = []

  @property
  def max_difference(self):
    """The largest |shrunk - model| of any output on the check's inputs
    (None if not checked)."""
    if not self.check:
      return None
    return max(row.difference for row in self.check)

  def _check_dict(self):
    """`to_dict`'s `check`: per output its name, largest difference, max
    |y| and tolerance."""
    return [dict(name=r.name, difference=r.difference, largest=r.largest,
                 tolerance=r.tolerance) for r in self.check]

  def _check_line(self):
    return None     # the table of a Keras shrink lists no check line

  def format_table(self):
    """The report as a text table, then one line per stop."""
    stops, self.stops = self.stops, []
    try:
      lines = [super(KerasShrinkReport, self).format_table()]
    finally:
      self.stops = stops
    lines.extend('kept %d empty filter(s) of %s: %s' % (
        stop.channels, stop.layer, stop.reason) for stop in self.stops)
    return '\n'.join(lines)

  def __str__(self):
    return self.format_table()
