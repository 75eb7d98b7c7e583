"""`Pruning` to a budget: the channel groups, their cost and importance.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [None, 8, 8, 3])
    ...   a = tf1prune.masked_conv2d(x, 8, 3, scope='a')
    ...   b = tf1prune.masked_conv2d(a, 8, 3, scope='b')
    ...   y = tf1prune.masked_fully_connected(tf.reshape(b, [-1, 512]), 10,
    ...                                       activation_fn=None, scope='y')
    ...   loss = tf.reduce_mean(tf.nn.softmax(y))
    ...   _ = tf.train.get_or_create_global_step()
    ...   p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
    ...       'budget=flops:0.5'))
    ...   budget = p.budget_plan()
    >>> budget.dense, [str(g) for g in budget.groups]
    (111616.0, ['8 channels: a/weights', '8 channels: b/weights'])
    >>> [(kind, cost) for _, kind, cost in budget.model.layer_costs()]
    [('conv', 27648.0), ('conv', 73728.0), ('dense', 10240.0)]

With the `budget` hparam, every weight that `granularity_map` does not give
another granularity is pruned by `coupled_filter`, and the channel groups
compete in one ranking (`tf1prune.masks.budget_masks`) for a cost that the
schedule lowers from the dense model's to the budget. The cost is that of
the exported, shrunk graph (`tf1prune.channels.cost`): this module finds the
graph's layers (Conv2D, depthwise convs and MatMuls of weights, and LRNs, of
the forward graph, once per weight), the widths of what they read and write
in units of the groups, and the batch norms and biases after each member.

The importance of a unit (`budget_criterion`): `l1` or `l2`, the filter
norms of its members summed (`channel_group_reduction`); `taylor`,
`|sum(w * dL/dw)|` over each member's channel, a moving average over the
training steps (`budget_taylor_decay`) of the gradients the optimizer
applies; `bn_scale`, `|gamma|` of the batch norms after its members (a
group with none is ranked by `l2`, with a warning).

A removed channel is exactly 0: the biases and the batch norm scales and
offsets after its filters are zeroed with them
(`tf1prune.training.channel_params`), so nothing of it stays for the
shrink to stop at.
"""

import math
import os

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.channels.budget_units import BudgetUnits
from tf1prune.channels.cost import CostModel, Geometry, Layer, Width
from tf1prune.channels.graph_view import GraphView
from tf1prune.channels.training_graph import trace_channels
from tf1prune.latency import LatencyCost, LatencyTable, signature
from tf1prune.latency.budget_report import BudgetReport
from tf1prune.latency import profile as profile_latency
from tf1prune.masks import budget_masks, group_floors, minimum_keep
from tf1prune.plan.budget import cost_ratio_tensor
from tf1prune.channels import importance
from tf1prune.channels.importance import Touch
from tf1prune.training import channel_params
from tf1prune.training.coupled import warn_once as coupled_warn

__all__ = ['BudgetPlan', 'BudgetReport', 'Taylor', 'applied_gradients']

_LAYERS = ('Conv2D', 'DepthwiseConv2dNative', 'MatMul', 'LRN',
           'Conv2DBackpropInput', 'Conv3D')
# A transposed conv reads its data at input 2, and its filter `[kh, kw, out,
# in]` holds its input channels on its last axis.
_DATA = {'Conv2DBackpropInput': 2}
_INPUT_AXIS = {'Conv2DBackpropInput': -1}
_BATCH_NORMS = channel_params.BATCH_NORMS
_BIAS_ADDS = channel_params.BIAS_ADDS
_source, _static, _followers = (channel_params.source, channel_params.static,
                                channel_params.followers)


_ACTIVATIONS = frozenset(['Relu', 'Relu6', 'Elu', 'Selu', 'Sigmoid', 'Tanh',
                          'LeakyRelu', 'Softplus'])


def _activation(op):
  """The op type of the activation after layer `op`'s bias (or batch
  norm), or None."""
  tensor = op.outputs[0]
  for _ in range(3):
    nexts = [f for f in _followers(tensor)]
    if len(nexts) != 1:
      return None
    follower = nexts[0]
    if follower.type in _ACTIVATIONS:
      return follower.type
    if follower.type not in _BIAS_ADDS and follower.type not in _BATCH_NORMS:
      return None
    tensor = follower.outputs[0]
  return None


def _geometry(op):
  """The `Geometry` of a Conv2D, depthwise conv or MatMul op."""
  shape, weight = _static(op.inputs[0]), _static(op.inputs[1])
  if op.type == 'MatMul':
    return Geometry((1, 1), (1, 1), (1, 1), 'VALID', (1, 1), _activation(op),
                    (weight[0], weight[1]))
  attr = lambda key: [int(v) for v in op.get_attr(key)]
  padding = op.get_attr('padding')
  padding = padding.decode() if isinstance(padding, bytes) else padding
  outputs = weight[2] * weight[3] if op.type == 'DepthwiseConv2dNative' \
      else weight[3]
  return Geometry(tuple(shape[1:3]), tuple(weight[:2]),
                  tuple(attr('strides')[1:3]), padding,
                  tuple(attr('dilations')[1:3]), _activation(op),
                  (weight[2], outputs))


def _has_bias(op):
  """True if the exported graph will have a bias after layer `op`: a bias
  add or a batch norm follows (a batch norm folds into one)."""
  out = op.outputs[0]
  channels = (_static(out) or [None])[-1]
  for follower in _followers(out):
    if follower.type in _BATCH_NORMS:
      return True
    if follower.type in _BIAS_ADDS and len(follower.inputs) == 2:
      shape = _static(follower.inputs[1])
      if shape is not None and [d for d in shape if d != 1] in (
          [channels], []) and len(shape) <= 1:
        return True
  return False


class BudgetPlan(object):
  """The groups, units and cost model of one `Pruning` with a budget.

  Args:
    graph: the training graph.
    records: every `MaskedWeight` of it.
    spec: the `PruningSpec` (with `budget` set).

  Attributes:
    trace: the `tf1prune.channels.training_graph.ChannelTrace`.
    groups: the `ChannelGroup`s the budget prunes (in `items` order, set by
      `use`).
    model: the `tf1prune.channels.cost.CostModel` over their units.
    dense: the dense model's cost in the budget's metric.
  """

  def __init__(self, graph, records, spec):
    self.graph = graph
    self.spec = spec
    self.budget = spec.budget
    self.records = list(records)
    self.trace = trace_channels(graph, records)
    self.items = []
    self.groups = []
    self.model = None
    self.dense = None
    self.offsets = []

  def use(self, items):
    """Takes the `CoupledTargets` the budget prunes; builds the cost model.

    Raises:
      ValueError: no group to prune, a FLOPs budget on a layer whose output
        size is unknown, or a budget below what the kept minimums allow.
    """
    self.units = BudgetUnits(self.budget, items, self.trace.groups)
    self.items, self.groups = self.units.items, self.units.groups
    self.offsets, self.unit_group = self.units.offsets, self.units.unit_group
    self.floors = self._floors()
    self._consumers = []
    self._raw = dict((r.masked_weight.name, r.weight) for r in self.records)
    self.model = CostModel(self.units.num_units, self._layers())
    # What touches each unit: its members' filters, the next layers' inputs.
    self.touches = [
        Touch(t.record.name, t.record.masked_weight, m.axis,
              offset + np.asarray(m.units, np.int32), t.record.weight)
        for offset, item in zip(self.offsets, self.items)
        for m, t in zip(item.group.members, item.targets)] + self._consumers
    metric = self.budget.kind
    unknown = [l.name for l in self.model.layers if l.positions is None]
    if metric == 'flops' and unknown:
      raise ValueError(
          'budget %s: the output size of %s is unknown, so its FLOPs are; '
          'give the model input a static height and width' % (
              self.budget, ', '.join(unknown[:3])))
    self.multiple = self.spec.channel_groups[2]
    self.latency = None
    if metric == 'latency':
      self.latency = LatencyCost(self.model, self._latency_table())
      if self.multiple == 1:
        self.multiple = self.latency.table.step   # the runtime's channel step
    self.dense = self.cost_of(None)
    self.ratio = self.budget.ratio(self.dense)
    self.budget.check_reachable(
        self.cost_of(minimum_keep(self.unit_group, self.floors,
                                  self.multiple)), self.dense,
        'channel_group_min_channels=%d and 2 at least, '
        'channel_group_multiple=%d%s' % (
            self.spec.channel_groups[1], self.multiple,
            ', the limits of budget_sensitivity with budget_max_drop=%g'
            % self.spec.budget_max_drop if self.spec.budget_sensitivity
            else ''))
    return self

  def cost_of(self, keep):
    """The model's cost in the budget's metric with `keep` (NumPy 0/1 per
    unit; None: every unit)."""
    if self.latency is not None:
      return self.latency.cost_of(np.ones(self.model.num_units)
                                  if keep is None else keep)
    return self.model.cost(keep, self.budget.kind)

  def _latency_table(self):
    """The latency table of `latency_table`: read if it fits the layers and
    the runtime, else measured now and written there."""
    spec = self.spec
    if not spec.latency_table:
      raise ValueError(
          'budget %s needs latency_table=PATH: the file the layers\' times on '
          'the runtime are written to (measured once, a minute or so) and '
          'read from; e.g. next to the checkpoints' % (self.budget,))
    wanted = signature(self.model.layers)
    if os.path.exists(spec.latency_table):
      table = LatencyTable.load(spec.latency_table)
      if table.matches(wanted, spec.latency_runtime, spec.latency_threads,
                       spec.latency_batch):
        return table
      tf.logging.warning('latency_table %s was measured for other layers or '
                         'another runtime; measuring again',
                         spec.latency_table)
    tf.logging.info('budget %s: timing %d layers on %s (%d thread(s), batch '
                    '%d) for %s', self.budget, len(wanted),
                    spec.latency_runtime, spec.latency_threads,
                    spec.latency_batch, spec.latency_table)
    table = profile_latency(self.model.layers, spec.latency_runtime,
                            spec.latency_threads, spec.latency_batch,
                            find_step=True)
    table.save(spec.latency_table)
    return table

  def _floors(self):
    """int [G]: the units each group keeps at least
    (`tf1prune.masks.group_floors`), raised by the sensitivity limits."""
    floors = group_floors([g.num_units for g in self.groups],
                          self.spec.channel_groups[1])
    if self.spec.budget_sensitivity:
      # Imported here: the analysis itself runs a Pruning.
      from tf1prune.training import sensitivity
      allowed = sensitivity.limits(
          sensitivity.SensitivityReport.load(self.spec.budget_sensitivity),
          self.spec.budget_max_drop)
      for index, group in enumerate(self.groups):
        fraction = min(allowed.get(m.name, 1.0) for m in group.members)
        floors[index] = max(floors[index], int(math.ceil(
            group.num_units * (1.0 - fraction) - 1e-9)))
    return floors

  def _width(self, tensor):
    shape = _static(tensor)
    return self.units.width(self.trace.channels(tensor),
                            shape[-1] if shape else None)

  def _layers(self):
    """The `Layer`s of the forward graph, each weight's first use."""
    layers, seen = [], set()
    for op in GraphView(self.graph).walk_order():
      if op.type not in _LAYERS:
        continue
      if op.type == 'LRN':
        layers.append(self._lrn(op))
        continue
      source = _source(op.inputs[1])
      if source is None or source.name in seen:
        continue
      if (op.type == 'MatMul' and (op.get_attr('transpose_a') or
                                   op.get_attr('transpose_b'))) or (
          op.type != 'MatMul' and op.get_attr('data_format') not in (
              b'NHWC', 'NHWC', b'NDHWC', 'NDHWC')):
        continue
      seen.add(source.name)
      layers.append(self._layer(op))
    return layers

  def _layer(self, op):
    """The `Layer` of a conv, depthwise conv, transposed conv, Conv3D or
    MatMul `op` (the shrink report's count, `tf1prune.channels.cost`)."""
    shape = _static(op.inputs[1])
    data = op.inputs[_DATA.get(op.type, 0)]
    inputs = self._width(data)
    if op.type != 'DepthwiseConv2dNative' and inputs.units:
      self._consumers.append(Touch(
          op.name, op.inputs[1], _INPUT_AXIS.get(op.type, -2),
          self.units.channel_units(self.trace.channels(data)),
          self._raw.get(op.inputs[1].name)))
    outputs = self._width(op.outputs[0])
    bias = _has_bias(op)
    if op.type == 'MatMul':
      return Layer(op.name, 'dense', inputs, outputs, 1, 1, 1, bias,
                   _geometry(op))
    # A transposed conv's filter meets each position of its input.
    out = _static(data if op.type in _DATA else op.outputs[0])
    positions = (int(np.prod(out[1:-1])) if out and None not in out[1:-1]
                 else None)
    kind = 'depthwise' if op.type == 'DepthwiseConv2dNative' else 'conv'
    multiplier = shape[3] if kind == 'depthwise' else 1
    timed = op.type in ('Conv2D', 'DepthwiseConv2dNative')
    return Layer(op.name, kind, inputs, outputs, int(np.prod(shape[:-2])),
                 multiplier, positions, bias,
                 _geometry(op) if timed else None)

  def _lrn(self, op):
    shape = _static(op.outputs[0])
    positions = (shape[1] * shape[2] if shape and None not in shape[1:3]
                 else None)
    radius = int(op.get_attr('depth_radius'))
    # The shrink keeps an LRN at its full width (the kept channels in their
    # places), so its cost does not depend on the units.
    geometry = Geometry(tuple(shape[1:3]), (1, 1), (1, 1), (
        radius, float(op.get_attr('bias')), float(op.get_attr('alpha')),
        float(op.get_attr('beta'))), (1, 1), None, (shape[-1], shape[-1]))
    return Layer(op.name, 'lrn', Width(shape[-1], ()), Width(shape[-1], ()),
                 2 * radius + 1, 1, positions, False, geometry)

  # ------------------------------------------------------------ the update

  def cost_budget(self, step, schedule):
    """The float64 scalar tensor of the cost allowed at `step`."""
    return tf.cast(cost_ratio_tensor(step, self.ratio, schedule),
                   tf.float64) * self.dense

  def keep_units(self, scores, current, locked, budget):
    """Returns (float32 [U] keep mask, float64 cost) of the budget's units.

    Args:
      scores: float64 [U], all groups' unit importances concatenated.
      current: float [U], the units kept now.
      locked: bool [U] or None, units always kept.
      budget: float64 scalar, the cost allowed.
    """
    cost = (self.latency if self.latency is not None else
            self.model.arrays(self.budget.kind))
    return budget_masks(scores, self.unit_group, cost, budget, current,
                        self.spec.budget_normalization, self.floors,
                        self.multiple, locked, self.spec.budget_cost_exponent,
                        monotone=True)

  def split(self, units):
    """The [U] tensor `units`, one piece per group."""
    return self.units.split(units)

  # ------------------------------------------------------------ importance

  def owners(self):
    """The `channel_params.Owner` of each item (its group's units)."""
    return [channel_params.owner_of_group(item) for item in self.items]

  def current_units(self, item):
    """Float32 [num_units]: 1 for the units kept by the members' masks."""
    return channel_params.owner_of_group(item).kept()

  def importance(self, criterion, params, taylor=None):
    """Float64 [U]: every unit's importance by `criterion` (l1, l2, taylor
    or bn_scale; `tf1prune.channels.importance`). `params`: the
    `channel_params.find` of `owners()`; `taylor`: the `Taylor` averages."""
    if criterion == 'taylor':
      return taylor.scores()
    kind = 'l1' if criterion == 'l1' else 'l2'
    values = importance.magnitude(self.touches, kind, self.model.num_units)
    if criterion != 'bn_scale':
      return values
    scales = [(v, self.offsets[position] + ids)
              for v, position, ids, what in params if what == 'scale']
    covered = importance.covered(scales, self.model.num_units)
    for index, group in enumerate(self.groups):
      if not covered[self.unit_group == index].any():
        coupled_warn(self.graph,
                     'budget_criterion=bn_scale: channel group [%s] has no '
                     'batch norm with a scale after it; it is ranked by l2',
                     group)
    return importance.scales_or(values, scales, self.model.num_units)


def applied_gradients(graph):
  """{variable op name: the gradient its optimizer op applies}, for the
  dense `Apply*` / `ResourceApply*` ops of `graph` (their `grad` or `delta`
  input)."""
  found = {}
  for op in graph.get_operations():
    if not op.inputs or 'Sparse' in op.type or not (
        op.type.startswith('Apply') or op.type.startswith('ResourceApply')):
      continue
    names = [arg.name for arg in op.op_def.input_arg]
    for key in ('grad', 'delta'):
      if key in names:
        found.setdefault(op.inputs[0].op.name, op.inputs[names.index(key)])
        break
  return found


class Taylor(object):
  """Per touching weight, a moving average of `|sum(w * dL/dw)|` over each
  of its channels (`tf1prune.channels.importance`).

  Args:
    plan: the `BudgetPlan`.
    decay: `budget_taylor_decay`, the average's decay per step.
    loss: optional scalar loss tensor, for weights whose optimizer op is not
      in the graph (its gradient is then computed again).

  Raises:
    ValueError: a weight's gradient is not found and `loss` is None.
  """

  def __init__(self, plan, decay, loss=None):
    self._plan = plan
    gradients = applied_gradients(plan.graph)
    self.averages = {}     # touch name -> float32 variable [channels]
    self._units = []       # (variable, units)
    updates = []
    missing = []
    for touch in plan.touches:
      if touch.name in self.averages:
        continue
      variable = touch.variable if touch.variable is not None else \
          touch.weight
      source = _source(variable)
      grad = gradients.get(source.name) if source is not None else None
      if grad is None and loss is not None:
        grad = tf.gradients(loss, variable)[0]
      if grad is None:
        missing.append(touch.name)
        continue
      shape = _static(touch.weight)
      axis = touch.axis % len(shape)
      with plan.graph.name_scope(None):   # beside the weight
        average = tf.Variable(tf.zeros([shape[axis]]), trainable=False,
                              name=touch.name + '_taylor')
      product = tf.cast(touch.weight, tf.float32) * tf.cast(grad, tf.float32)
      value = tf.abs(importance.per_channel(product, axis, tf.reduce_sum))
      updates.append(tf.assign(average, decay * average +
                               (1.0 - decay) * tf.cast(value, tf.float32)))
      self.averages[touch.name] = average
      self._units.append((average, touch.units))
    if missing:
      raise ValueError(
          'budget_criterion=taylor needs the gradient of each pruned weight: '
          'no optimizer op in the graph updates %s; build the training op '
          '(optimizer.minimize) before the Pruning, or pass Pruning(..., '
          'loss=loss)' % ', '.join(missing[:3]))
    self.update_op = tf.group(*updates, name='taylor_importance_update')

  def scores(self):
    """Float64 [U]: the averages summed per unit."""
    return importance.summed([(v.read_value(), u) for v, u in self._units],
                             self._plan.model.num_units)
