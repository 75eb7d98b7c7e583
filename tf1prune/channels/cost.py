"""What a model costs with some of its channels removed: FLOPs and parameters.

    >>> import numpy as np
    >>> from tf1prune.channels.cost import CostModel, Layer, Width
    >>> # x (3 channels) -> conv a [3x3, 3 -> 4 units] -> dense [4 -> 2]
    >>> a_out = Width(0, ((0, 1), (1, 1), (2, 1), (3, 1)))
    >>> model = CostModel(4, [
    ...     Layer('a', 'conv', Width(3, ()), a_out, 9, 1, 64, True),
    ...     Layer('fc', 'dense', a_out, Width(2, ()), 1, 1, 1, True)])
    >>> model.cost(None, 'flops'), model.cost([1, 0, 1, 0], 'flops')
    (13840.0, 6920.0)
    >>> model.cost([1, 0, 1, 0], 'params')    # (9 * 3 * 2 + 2) + (2 * 2 + 2)
    62.0

A `Width` is the channel count of a tensor as a function of which units are
kept: `fixed` channels no pruned unit owns (an image's colours, a group left
dense) plus, per unit, how many of the tensor's channels it owns (one, or
the positions of a flatten, or a depthwise multiplier). A `Layer` is one op
that costs, with the widths of what it reads and writes; its cost per
example is the one the shrink reports (`tf1prune.export.shrink.report`):

- `conv` (Conv2D, weight `[kh, kw, in, out]`): `kh * kw * in * out`
  parameters (plus `out` with a bias or a batch norm after it, which folds
  into one), `2 * kh * kw * in * out * positions` FLOPs (`positions`: the
  output's height x width); a Conv3D (`[kd, kh, kw, in, out]`) is one with
  `kernel` `kd * kh * kw` and the output's depth x height x width
  positions, a transposed conv (`Conv2DBackpropInput`, filter `[kh, kw,
  out, in]`) one whose `positions` are its input's height x width (each
  meets the whole filter);
- `depthwise` (weight `[kh, kw, in, m]`, output `in * m`): `kh * kw * in * m`
  parameters (plus `in * m` with a bias), `2 * kh * kw * in * m * positions`
  FLOPs; its width is its input's (`inputs`);
- `dense` (MatMul, weight `[in, out]`): `in * out` (plus `out`) parameters,
  `2 * in * out` FLOPs;
- `lrn`: no parameters, `2 * (2 * depth_radius + 1) * C * positions` FLOPs
  (the multiply-adds of its band sums), with `C` its input's width;
- `norm` (a Keras batch norm, whose vectors the Keras shrink report counts
  as parameters): `kernel * C` parameters (`kernel`: its vectors, gamma,
  beta, moving mean and variance), no FLOPs.

Element-wise ops, bias adds and pools are not counted. `CostModel.arrays`
gives the same sums as arrays for tensors (`tf1prune.masks.budget_masks`
evaluates them for many candidate masks at once).
"""

import collections

import numpy as np

__all__ = ['CostModel', 'Geometry', 'Layer', 'Width', 'METRICS']

METRICS = ('flops', 'params')


class Width(collections.namedtuple('Width', ['fixed', 'units'])):
  """A tensor's channel count: `fixed` plus, for each (unit, count) pair of
  `units`, `count` channels while that unit is kept."""

  def value(self, keep):
    """The width when `keep` (a 0/1 array over the units) are kept."""
    return float(self.fixed) + float(sum(c * keep[u] for u, c in self.units))


class Geometry(collections.namedtuple('Geometry', [
    'size', 'kernel', 'strides', 'padding', 'dilations', 'activation',
    'channels'])):
  """What it takes to build a layer again, at other widths (to time it).

  Attributes:
    size: the input's (height, width); (1, 1) for dense.
    kernel: (kh, kw); strides, dilations: (h, w); padding: 'SAME' or
      'VALID' (a conv's), or the LRN's (depth_radius, bias, alpha, beta).
    activation: the op type of the activation after its bias, or None.
    channels: the full (input, output) widths.
  """


class Layer(collections.namedtuple('Layer', [
    'name', 'kind', 'inputs', 'outputs', 'kernel', 'multiplier', 'positions',
    'bias', 'geometry'])):
  """One op that costs (see the module docstring).

  Attributes:
    name: its node name (the shrink report's layer name).
    kind: 'conv', 'depthwise', 'dense', 'lrn' or 'norm'.
    inputs, outputs: the `Width`s it reads and writes (a depthwise conv's
      and an LRN's outputs are not used).
    kernel: the weights per input-output channel pair (`kh * kw`; 1 for
      dense); for an LRN its band, `2 * depth_radius + 1`; for a norm its
      vectors.
    multiplier: a depthwise conv's channel multiplier `m` (1 otherwise).
    positions: output positions per example (height x width; 1 for dense),
      or None when unknown (its FLOPs are then NaN).
    bias: True if a bias (or a batch norm, folded into one) follows it.
    geometry: its `Geometry`, or None.
  """

  def __new__(cls, name, kind, inputs, outputs, kernel, multiplier,
              positions, bias, geometry=None):
    return super(Layer, cls).__new__(cls, name, kind, inputs, outputs,
                                     kernel, multiplier, positions, bias,
                                     geometry)

  def terms(self):
    """[(metric, coefficient, (Width, ...))]: the cost as sums of products
    of widths."""
    k, m = float(self.kernel), float(self.multiplier)
    # Unknown positions: the FLOPs are unknown (NaN), the parameters are not.
    p = float('nan') if self.positions is None else float(self.positions)
    if self.kind == 'lrn':
      return [('flops', 2.0 * k * p, (self.inputs,))]
    if self.kind == 'norm':
      return [('params', k, (self.inputs,))]
    if self.kind == 'depthwise':
      return [('params', k * m + (m if self.bias else 0.0), (self.inputs,)),
              ('flops', 2.0 * k * m * p, (self.inputs,))]
    terms = [('params', k, (self.inputs, self.outputs)),
             ('flops', 2.0 * k * p, (self.inputs, self.outputs))]
    if self.bias:
      terms.append(('params', 1.0, (self.outputs,)))
    return terms


class CostModel(object):
  """The cost of a model's layers as a function of its kept units.

  Args:
    num_units: int, how many prunable units there are (indices of `Width`).
    layers: the `Layer`s, in graph order.
  """

  def __init__(self, num_units, layers):
    self.num_units = int(num_units)
    self.layers = list(layers)
    widths, index = [], {}
    self._terms = []      # (layer index, metric, coefficient, width indices)
    for position, layer in enumerate(self.layers):
      for metric, coef, operands in layer.terms():
        ids = []
        for width in operands:
          if width not in index:
            index[width] = len(widths)
            widths.append(width)
          ids.append(index[width])
        self._terms.append((position, metric, coef, tuple(ids)))
    self.widths = widths
    for width in widths:
      for unit, _ in width.units:
        if not 0 <= unit < self.num_units:
          raise ValueError('a width names unit %d of %d units'
                           % (unit, self.num_units))

  def _keep(self, keep):
    keep = np.ones(self.num_units) if keep is None else np.asarray(
        keep, np.float64)
    if keep.shape != (self.num_units,):
      raise ValueError('keep must have one entry per unit (%d), got shape %s'
                       % (self.num_units, keep.shape))
    return keep

  def layer_costs(self, keep=None, metric='flops'):
    """[(layer name, kind, cost)] with `keep` (None: every unit)."""
    _check_metric(metric)
    keep = self._keep(keep)
    values = [w.value(keep) for w in self.widths]
    costs = [0.0] * len(self.layers)
    for position, term_metric, coef, ids in self._terms:
      if term_metric == metric:
        costs[position] += coef * float(np.prod([values[i] for i in ids]))
    return [(l.name, l.kind, c) for l, c in zip(self.layers, costs)]

  def cost(self, keep=None, metric='flops'):
    """The model's cost with `keep` (0/1 per unit; None: every unit)."""
    return float(sum(c for _, _, c in self.layer_costs(keep, metric)))

  def arrays(self, metric):
    """The cost as arrays, for tensors.

    Returns:
      A dict of NumPy arrays: `fixed` [T] (float64, the fixed part of each
      width), `entry_width`, `entry_unit` [E] (int32) and `entry_count` [E]
      (float64): width `entry_width[e]` has `entry_count[e]` channels of
      unit `entry_unit[e]`; `coef` [N] (float64), `first`, `second` [N]
      (int32): term n is `coef[n] * width[first[n]] * width[second[n]]`,
      the second factor 1 where `second[n]` is -1.
    """
    _check_metric(metric)
    entries = [(t, u, c) for t, w in enumerate(self.widths)
               for u, c in w.units]
    terms = [(coef, ids) for _, m, coef, ids in self._terms if m == metric]
    return {
        'fixed': np.array([w.fixed for w in self.widths], np.float64),
        'entry_width': np.array([e[0] for e in entries], np.int32),
        'entry_unit': np.array([e[1] for e in entries], np.int32),
        'entry_count': np.array([e[2] for e in entries], np.float64),
        'coef': np.array([c for c, _ in terms], np.float64),
        'first': np.array([ids[0] for _, ids in terms], np.int32),
        'second': np.array([ids[1] if len(ids) > 1 else -1
                            for _, ids in terms], np.int32),
    }


def _check_metric(metric):
  if metric not in METRICS:
    raise ValueError("metric must be 'flops' or 'params', got %r" % (metric,))
