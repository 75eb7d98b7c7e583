"""The Keras `Pruner` to a budget: its units, cost model and importance.

    >>> import keras, tf1prune.keras as tk
    >>> x = keras.Input((8, 8, 3))
    >>> a = keras.layers.Conv2D(8, 3, padding='same', name='a')(x)
    >>> b = keras.layers.Conv2D(8, 3, padding='same', name='b')(a)
    >>> y = keras.layers.Dense(10, name='y')(keras.layers.Flatten()(b))
    >>> pruner = tk.Pruner(keras.Model(x, y), 'budget=flops:0.5')
    >>> plan = pruner.budget_plan()
    >>> plan.dense, [str(g) for g in plan.groups]
    (111616.0, ['8 channels: a/kernel', '8 channels: b/kernel'])
    >>> [(kind, cost) for _, kind, cost in plan.model.layer_costs()]
    [('conv', 27648.0), ('conv', 73728.0), ('dense', 10240.0)]

With the `budget` hparam, every weight that `granularity_map` does not give
another granularity is pruned by `coupled_filter` (`tf1prune.plan`), and
the channel groups (`tf1prune.keras.shrink.groups`) compete in one ranking
(`tf1prune.masks.budget_masks`, as the graph `Pruning` ranks them) for a
cost that the schedule lowers from the dense model's to the budget
(`tf1prune.plan.budget.cost_ratio_tensor`). The cost is the
`tf1prune.channels.cost.CostModel` of the model's layers, made here from
its `LayerView` (`tf1prune.keras.shrink.layer_view`): each Conv2D, Conv1D,
Conv2DTranspose, depthwise conv, the two parts of a SeparableConv2D and
each Dense, its kernel, its output positions (an output's height x width,
a transposed conv's input's), its bias, and the widths of what it reads
and writes in units of the groups (`ChannelTrace`); each
BatchNormalization a `norm` layer of its vectors. So its FLOPs are those
`tk.shrink_model`'s report counts, and its parameters those of the report
over these layers (the shrink report counts every layer's weights).

The importance of a unit (`budget_criterion`, `tf1prune.channels.
importance`): `l1` or `l2`, the norms of its members' filters and of the
next layers' input slices, each weight's over its mean, summed; `bn_scale`,
`|gamma|` of the batch norms after its members (a group without one is
ranked by `l2`, with a warning). `taylor` needs the gradients the optimizer
applies, which the Pruner does not see: it is refused.
"""

import numpy as np
import tensorflow as tf

from tf1prune.channels import importance
from tf1prune.channels.budget_units import BudgetUnits
from tf1prune.channels.cost import CostModel, Layer
from tf1prune.channels.importance import Touch
from tf1prune.keras._channel_params import kept_units
from tf1prune.masks import budget_masks, group_floors, minimum_keep
from tf1prune.plan.budget import cost_ratio_tensor
from tf1prune.plan.coupled import units_kept_by_locks

__all__ = ['KerasBudget', 'check_budget_hparams']

_KERNEL_OPS = ('Conv2D', 'DepthwiseConv2dNative', 'MatMul')
KERAS_CRITERIA = ('l1', 'l2', 'bn_scale')


def check_budget_hparams(spec):
  """Refuses what the Keras `Pruner` cannot prune to (a `PruningSpec`
  with a budget): a latency budget, `taylor`, `budget_sensitivity`."""
  budget = spec.budget
  if budget.kind == 'latency':
    raise ValueError(
        'budget=%s: the Keras Pruner prunes to flops or params budgets, not '
        'latency (its table is timed on a TF1 graph); give budget=flops:R, '
        'params:R or flops:<FLOPs>, or prune to latency with tf1prune.Pruning'
        % (budget,))
  if spec.budget_criterion not in KERAS_CRITERIA:
    raise ValueError(
        'budget_criterion=%s: the Keras Pruner ranks channels by %s (taylor '
        'needs the gradients the optimizer applies, which the Pruner does '
        'not see); give one of those' % (spec.budget_criterion,
                                        ', '.join(KERAS_CRITERIA)))
  if spec.budget_sensitivity:
    raise ValueError(
        'budget_sensitivity=%s: the Keras Pruner does not read sensitivity '
        'limits (the analysis runs on a TF1 graph); drop the hparam, or set '
        'channel_group_min_channels' % spec.budget_sensitivity)


def _positions(shape):
  """The product of a static shape's dims between batch and channels, or
  None if one is unknown."""
  dims = list(shape[1:-1])
  return None if None in dims else int(np.prod(dims or [1]))


class KerasBudget(object):
  """The units, cost model and importance of one Keras `Pruner`'s budget.

  Args:
    spec: the `PruningSpec` (with a flops or params `budget`).
    view: the model's `LayerView`.
    trace: the `ChannelTrace` of the model's kernels over `view`.
    items: the `CoupledTargets` the budget prunes (their targets: the
      Pruner's records, with `.pin`, `.variable`).
    params: the Keras `_channel_params.Param`s of `items` (owner i: item i).
    warn: `warn(text)`, for a group that `bn_scale` ranks by `l2`.

  Attributes:
    budget: the `tf1prune.plan.budget.Budget`.
    groups: the `ChannelGroup`s, in `items` order.
    model: the `CostModel` over their units.
    dense: the dense model's cost in the budget's kind.
    ratio: the budget as a ratio of `dense`.

  Raises:
    ValueError: no group to prune, a FLOPs budget on a layer whose output
      size is unknown, or a budget below what the kept minimums allow.
  """

  def __init__(self, spec, view, trace, items, params, warn):
    self.spec, self.budget = spec, spec.budget
    self.units = BudgetUnits(self.budget, items, trace.groups)
    self.items, self.groups = self.units.items, self.units.groups
    self.offsets, self.unit_group = self.units.offsets, self.units.unit_group
    self._view, self._trace = view, trace
    self._consumers = []
    self.model = CostModel(self.units.num_units, self._layers())
    unknown = [l.name for l in self.model.layers if l.positions is None]
    if self.budget.kind == 'flops' and unknown:
      raise ValueError(
          'budget %s: the output size of %s is unknown, so its FLOPs are; '
          'give the model input a static height and width' % (
              self.budget, ', '.join(unknown[:3])))
    self.floors = group_floors([g.num_units for g in self.groups],
                               spec.channel_groups[1])
    self.multiple = spec.channel_groups[2]
    self.dense = self.model.cost(None, self.budget.kind)
    self.ratio = self.budget.ratio(self.dense)
    self.budget.check_reachable(
        self.model.cost(minimum_keep(self.unit_group, self.floors,
                                     self.multiple), self.budget.kind),
        self.dense, 'channel_group_min_channels=%d and 2 at least, '
        'channel_group_multiple=%d' % (spec.channel_groups[1],
                                       self.multiple))
    self._scales = [(p.variable, self.offsets[p.owner] + p.ids)
                    for p in params if p.what == 'scale']
    if spec.budget_criterion == 'bn_scale':
      covered = importance.covered(self._scales, self.model.num_units)
      for position, group in enumerate(self.groups):
        if not covered[self.unit_group == position].any():
          warn('budget_criterion=bn_scale: channel group [%s] has no batch '
               'norm with a scale after it; it is ranked by l2' % (group,))

  # ------------------------------------------------------------ cost model

  def _width(self, tensor):
    """The `Width` of a tensor of the view, in units."""
    return self.units.width(self._trace.channels(tensor),
                            (self._view.shape(tensor) or [None])[-1])

  def _layers(self):
    """The `Layer`s of the view's kernel nodes and batch norms, in order;
    notes the kernels reading units (`_consumers`)."""
    view = self._view
    kernels = dict((m.node, (layer_id, short))
                   for (layer_id, short), m in view.members.items())
    layers = []
    for node in view.walk_order():
      if type(node.call.layer).__name__ == 'BatchNormalization' and \
          node.part == 'scale':
        width = self._width(node.inputs[0])
        layers.append(Layer(node.call.name, 'norm', width, width,
                            len(node.call.layer.weights), 1, 1, False))
        continue
      if node.op not in _KERNEL_OPS or node.name not in kernels:
        continue
      layers.append(self._layer(node, kernels[node.name][1]))
    return layers

  def _layer(self, node, short):
    """The `Layer` of one kernel node (see the module docstring)."""
    view = self._view
    kernel = view.shape(node.inputs[1])
    inputs, outputs = self._width(node.inputs[0]), self._width(node.output)
    bias = any(r.op == 'BiasAdd' and r.call is node.call
               for r, _ in view.consumers(node.output))
    name = '%s/%s' % (node.call.name, short)
    if node.op == 'DepthwiseConv2dNative':
      return Layer(name, 'depthwise', inputs, outputs,
                   kernel[0] * kernel[1], kernel[3],
                   _positions(view.shape(node.output)), bias)
    transposed = bool(node.attrs.get('transposed'))
    if inputs.units:
      variable = [v for v in node.call.layer.weights
                  if v.name.split('/')[-1].split(':')[0] == short][0]
      self._consumers.append((name, variable, -1 if transposed else -2,
                              self.units.channel_units(
                                  self._trace.channels(node.inputs[0]))))
    positions = _positions(view.shape(
        node.inputs[0] if transposed else node.output))
    if node.op == 'MatMul':
      return Layer(name, 'dense' if positions == 1 else 'conv', inputs,
                   outputs, 1, 1, positions, bias)
    return Layer(name, 'conv', inputs, outputs, kernel[0] * kernel[1], 1,
                 positions, bias)

  # ------------------------------------------------------------ the update

  def allowed(self, step):
    """The cost the schedule allows at `step` (Python float): the ratio as
    the graph computes it (float32), times the dense cost."""
    ratio = cost_ratio_tensor(tf.constant(int(step), tf.int64), self.ratio,
                              self.spec.schedule)
    return float(tf.cast(ratio, tf.float64).numpy()) * self.dense

  def current(self):
    """float64 [U]: 1 for the units the members' masks keep now."""
    return np.concatenate([
        kept_units(item.targets[0].pin.mask, item.group.members[0].axis,
                   item.group.members[0].units, item.group.num_units)
        for item in self.items]).astype(np.float64)

  def _locked(self, item):
    """bool [num_units]: the units a lock keeps (`units_kept_by_locks`)."""
    units = units_kept_by_locks(item.group, [
        t.pin.locked & t.pin.mask if t.pin.locked.any() else None
        for t in item.targets])
    return (np.zeros(item.group.num_units, bool) if units is None
            else np.asarray(units))

  def importance(self):
    """float64 [U]: every unit's importance by `budget_criterion`."""
    criterion = self.spec.budget_criterion
    touches = [Touch(t.name, tf.convert_to_tensor(t.variable), m.axis,
                     offset + np.asarray(m.units, np.int32))
               for offset, item in zip(self.offsets, self.items)
               for m, t in zip(item.group.members, item.targets)]
    touches += [Touch(name, tf.convert_to_tensor(variable), axis, units)
                for name, variable, axis, units in self._consumers]
    values = importance.magnitude(touches, 'l1' if criterion == 'l1'
                                  else 'l2', self.model.num_units)
    if criterion != 'bn_scale':
      return values
    return importance.scales_or(
        values, [(tf.convert_to_tensor(v), units) for v, units in
                 self._scales], self.model.num_units)

  def keep_units(self, step):
    """(float32 [U] keep mask, float64 cost) at `step`."""
    locked = np.concatenate([self._locked(item) for item in self.items])
    keep, cost = budget_masks(
        self.importance(), self.unit_group,
        self.model.arrays(self.budget.kind), self.allowed(step),
        self.current(), self.spec.budget_normalization, self.floors,
        self.multiple, locked, self.spec.budget_cost_exponent,
        monotone=True)
    return keep.numpy(), float(cost.numpy())

  def split(self, units):
    """The [U] array `units`, one piece per group."""
    return self.units.split(units)
