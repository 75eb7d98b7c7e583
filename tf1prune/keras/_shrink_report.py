"""What `shrink_model` removed: parameters and FLOPs per layer, and stops.

    >>> from tf1prune.export.shrink.report import LayerShrink
    >>> from tf1prune.keras._shrink_report import KerasShrinkReport
    >>> row = LayerShrink('fc', 'Dense', 8, 8, 4, 2, 36, 18, 64, 32)
    >>> report = KerasShrinkReport([row], [], ['fc'])
    >>> report.to_dict()['totals']['flops_ratio'], report.params_after
    (0.5, 18)

The graph shrink's `ShrinkReport`, with one row (`LayerShrink`, its `op`
the Keras layer class) per layer that has weights or FLOPs. Parameters are
every weight of a layer (kernel, bias, a batch norm's four vectors), as
`model.count_params()` counts them. FLOPs are per example, 2 x the
multiply-adds of Dense, Conv2D, DepthwiseConv2D and SeparableConv2D layers
(biases, activations, batch norms and pools are not counted), as the graph
shrink counts them. Stops are `_shrink_plan.Stop`s (layer, channels,
reason): empty filters that had to stay.
"""

import numpy as np

from tf1prune.export.shrink.report import LayerShrink, ShrinkReport

__all__ = ['KerasShrinkReport', 'layer_row']


def _flops(layer, kind, out_shape):
  """2 x multiply-adds per example of a Dense / conv layer call (None when
  its output's height or width is not static)."""
  if kind not in ('dense', 'conv', 'depthwise', 'separable'):
    return 0
  if None in tuple(out_shape[1:-1]):
    return None
  positions = int(np.prod([d for d in out_shape[1:-1]] or [1]))
  shapes = {v.name.split('/')[-1].split(':')[0]: tuple(v.shape)
            for v in layer.weights}
  if kind == 'separable':
    macs = (np.prod(shapes['depthwise_kernel']) +
            np.prod(shapes['pointwise_kernel']))
  else:
    kernel = shapes.get('kernel', shapes.get('depthwise_kernel'))
    macs = np.prod(kernel)
  return int(2 * macs * positions)


def _params(layers):
  return int(sum(np.prod(v.shape) for layer in layers for v in layer.weights))


def layer_row(old, new, call, in_shape, in_after, out_after, helpers=()):
  """A `LayerShrink` for one pair of layers, or None if it has nothing
  to count.

  Args:
    old, new: the layer before and after the shrink.
    call: the old layer's `_shrink_view.Call`.
    in_shape: the static shape of its (first) input before the shrink.
    in_after: the input channels after it.
    out_after: the new output's static shape.
    helpers: (layer, output shape) of the layers the shrink added for this
      one (a ones channel's 1x1 conv, a border map's conv); their parameters
      and FLOPs count as this layer's.
  """
  params_before = _params([old])
  params_after = _params([new] + [h for h, _ in helpers])
  flops_before = _flops(old, call.kind, call.shape)
  flops_after = [_flops(new, call.kind, out_after)] + [
      _flops(h, 'conv', shape) for h, shape in helpers]
  flops_after = None if None in flops_after else sum(flops_after)
  if not (params_before or flops_before):
    return None
  return LayerShrink(old.name, type(old).__name__, in_shape[-1], in_after,
                          call.shape[-1], out_after[-1], params_before,
                          params_after, flops_before, flops_after)


class KerasShrinkReport(ShrinkReport):
  """The result of `tf1prune.keras.shrink_model`.

  Args:
    layers: list of `LayerShrink`, in the model's order.
    stops: list of `_shrink_plan.Stop` (layer, channels, reason).
    output_nodes: the names of the layers that give the model's outputs.
  """

  def __init__(self, layers, stops, output_nodes):
    super(KerasShrinkReport, self).__init__(layers, [], output_nodes)
    self.stops = list(stops)

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
