"""What `shrink_model` removed: parameters and FLOPs per layer, and stops.

    >>> from tf1prune.keras._shrink_report import KerasLayerShrink, KerasShrinkReport
    >>> row = KerasLayerShrink('fc', 'Dense', 8, 8, 4, 2, 36, 18, 64, 32)
    >>> report = KerasShrinkReport([row], [])
    >>> report.to_dict()['totals']['flops_ratio'], report.params_after
    (0.5, 18)

Parameters are every weight of a layer (kernel, bias, a batch norm's four
vectors), as `model.count_params()` counts them. FLOPs are per example,
2 x the multiply-adds of Dense, Conv2D, DepthwiseConv2D and SeparableConv2D
layers (biases, activations, batch norms and pools are not counted), as the
graph shrink's `ShrinkReport` counts them. Layers without weights and
without FLOPs are left out.
"""

import collections

import numpy as np

from tf1prune.export.table import count, ratio, table

__all__ = ['KerasLayerShrink', 'KerasShrinkReport', 'layer_row']


class KerasLayerShrink(collections.namedtuple('KerasLayerShrink', [
    'name', 'layer_class', 'inputs_before', 'inputs_after', 'outputs_before',
    'outputs_after', 'params_before', 'params_after', 'flops_before',
    'flops_after'])):
  """One layer before and after the shrink (channels, parameters, FLOPs)."""


def _flops(layer, kind, out_shape):
  """2 x multiply-adds per example of a Dense / conv layer call."""
  if kind not in ('dense', 'conv', 'depthwise', 'separable'):
    return 0
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
  """A `KerasLayerShrink` for one pair of layers, or None if it has nothing
  to count.

  Args:
    old, new: the layer before and after the shrink.
    call: the old layer's `_shrink_view.Call`.
    in_shape: the static shape of its (first) input before the shrink.
    in_after: the input channels after it.
    out_after: the new output's static shape.
    helpers: layers the shrink added for this one (a ones channel's 1x1
      conv); their parameters and FLOPs count as this layer's.
  """
  params_before, params_after = _params([old]), _params([new] + list(helpers))
  flops_before = _flops(old, call.kind, call.shape)
  flops_after = _flops(new, call.kind, out_after) + sum(
      _flops(h, 'conv', tuple(in_shape[:-1]) + (1,)) for h in helpers)
  if not (params_before or flops_before):
    return None
  return KerasLayerShrink(old.name, type(old).__name__, in_shape[-1], in_after,
                          call.shape[-1], out_after[-1], params_before,
                          params_after, flops_before, flops_after)


class KerasShrinkReport(object):
  """The result of `tf1prune.keras.shrink_model`.

  Args:
    layers: list of `KerasLayerShrink`, in the model's order.
    stops: list of `_shrink_plan.Stop` (layer, channels, reason): empty
      filters that had to stay.
  """

  def __init__(self, layers, stops):
    self.layers = list(layers)
    self.stops = list(stops)

  def _total(self, field):
    return sum(getattr(layer, field) for layer in self.layers)

  @property
  def params_before(self):
    return self._total('params_before')

  @property
  def params_after(self):
    return self._total('params_after')

  @property
  def flops_before(self):
    return self._total('flops_before')

  @property
  def flops_after(self):
    return self._total('flops_after')

  def to_dict(self):
    """The report as a JSON-serializable dict."""
    totals = {'params_before': self.params_before,
              'params_after': self.params_after,
              'flops_before': self.flops_before,
              'flops_after': self.flops_after,
              'params_ratio': ratio(self.params_after, self.params_before),
              'flops_ratio': ratio(self.flops_after, self.flops_before)}
    return {'layers': [dict(layer._asdict()) for layer in self.layers],
            'stops': [dict(stop._asdict()) for stop in self.stops],
            'totals': totals}

  def format_table(self):
    """The report as a text table."""
    def arrow(before, after):
      return '%s -> %s' % (count(before), count(after))

    rows = [(l.name, l.layer_class, arrow(l.inputs_before, l.inputs_after),
             arrow(l.outputs_before, l.outputs_after),
             arrow(l.params_before, l.params_after),
             arrow(l.flops_before, l.flops_after)) for l in self.layers]
    total = ('total', '', '', '', arrow(self.params_before, self.params_after),
             arrow(self.flops_before, self.flops_after))
    out = table(('layer', 'class', 'inputs', 'outputs', 'params', 'FLOPs'),
                rows, total)
    totals = self.to_dict()['totals']
    out.append('params x%s, FLOPs x%s' % tuple(
        'n/a' if v is None else '%.3f' % v
        for v in (totals['params_ratio'], totals['flops_ratio'])))
    for stop in self.stops:
      out.append('kept %d empty filter(s) of %s: %s' % (
          stop.channels, stop.layer, stop.reason))
    return '\n'.join(out)

  def __str__(self):
    return self.format_table()
