"""Which channels of a Keras model can go: classes, constants, stops.

    >>> import numpy as np, keras
    >>> from tf1prune.keras.shrink.plan import plan
    >>> x = keras.Input((5,))
    >>> h = keras.layers.Dense(4, activation='relu', name='h')(x)
    >>> y = keras.layers.Dense(2, name='y')(h)
    >>> model = keras.Model(x, y)
    >>> _ = model.get_layer('h').kernel.assign(np.ones([5, 4]) * [1, 0, 1, 0])
    >>> p = plan(model)
    >>> p.keep[id(h)].tolist()          # units 1 and 3 output relu(bias): constants
    [True, False, True, False]

Every channel element `(tensor, c)` of the traced model (`layers`)
goes into the union-find of `tf1prune.channels` (its `tie`): a layer that passes channels ties its output channel
`c` to its input channel `c`, a merge ties all its inputs, a concat ties at
offsets, a depthwise conv spreads a channel over its multiplier, a flatten
ties row `r` to channel `r % C`. A class is one channel that can only go
everywhere at once.

Beside the classes, a forward pass computes, per element, the value it has
for every example if it is a constant (NaN otherwise): a Dense or conv
filter that reads only constants (or nothing: all-zero weights) outputs
`activation(bias + sum of constant * weights)`; activations, batch norm,
pools and merges map constants to constants; zero padding (a `ZeroPadding2D`,
or a padded depthwise conv) makes a nonzero constant vary with the position.
With `fold_borders`, what a padded depthwise conv makes of a constant is a
border pattern (`Plan.maps`, `borders`) that element-wise layers
keep and a linear 1x1 Conv2D takes as an added map (`Plan.border`); a
padded Conv2D reads constants through a channel of ones (`Plan.ones`).
Where those extra layers would cost more FLOPs than removing the channels
saves (the weights of every Dense and conv layer on them), the channels stay.
A class goes when every element is a constant (or such a pattern) and
nothing pins it (a model input or output, a layer the shrink does not know)
and every layer reading it can take it exactly. Otherwise its channel stays,
and when it had empty filters, `Plan.stops` says why; the empty filters of a
layer the shrink does not go through (a Conv1D, a grouped Conv2D) are stops
with its reason.
"""

import collections

import numpy as np

from tf1prune.channels import ChannelOp, UnionFind, tie
from tf1prune.keras.shrink import borders
from tf1prune.keras.shrink.values import (activate, elementwise,
                                          layer_weights, pads_matter, spread)
from tf1prune.keras.shrink.layers import (activation_name, activation_stops,
                                          is_conv, op_name, run_call, trace)

__all__ = ['Plan', 'Stop', 'plan']

_SOURCES = ('dense', 'conv', 'separable')


def _runner(call):
  """`call` run again on one new input tensor (`run_call`)."""
  return lambda tensor: run_call(call, {call.inputs[0]: tensor})


def _empty_filters(layer):
  """How many filters of a layer the shrink does not go through (a Conv1D,
  a grouped Conv2D, ...) are all zero (0 for a layer without a kernel)."""
  if not hasattr(layer, 'weights') or getattr(layer, 'lora_enabled', False):
    return 0    # an operation; LoRA: its kernel is not the layer's weights
  if not is_conv(layer):
    return 0    # an RNN's unit also reads its recurrent kernel and bias
  w = layer_weights(layer)
  kernel = w.get('pointwise_kernel', w.get('kernel'))
  if kernel is None and 'depthwise_kernel' in w:     # [.., in, multiplier]
    kernel = w['depthwise_kernel']
    kernel = kernel.reshape(kernel.shape[:-2] + (-1,))
  if kernel is None or kernel.ndim < 2:
    return 0
  # A transposed conv's kernel is [..., filters, inputs].
  axis = -2 if type(layer).__name__.endswith('Transpose') else -1
  kernel = np.moveaxis(kernel, axis, 0).reshape(kernel.shape[axis], -1)
  return int((~(kernel != 0).any(axis=1)).sum())


class Stop(collections.namedtuple('Stop', ['layer', 'channels', 'reason'])):
  """`channels` empty filters of `layer` that stay, and why."""


class Plan(object):
  """The result of `plan(model)`.

  Attributes:
    calls: the `layers.Call`s in topological order.
    shapes: {tensor id: static shape}.
    consts: {tensor id: float64 [C]}, the constant of each channel or NaN.
    keep: {tensor id: bool [C]}, the channels that stay.
    stops: list of `Stop`.
    ones: the output ids of the padded Conv2D calls that read removed
      nonzero constants: they get an extra input channel of ones.
  """

  def __init__(self, calls, fold_borders=True):
    self.calls = calls
    self.fold_borders = fold_borders
    self.ones = set()  # outputs of padded convs that get a channel of ones
    self.maps = {}     # tensor -> {channel: [H, W] border pattern}
    self.map_origin = {}  # tensor -> [ZeroPadding2D call, depthwise call]
    self.border = {}   # 1x1 conv output -> (depthwise call, [kh, kw, 1, out])
    self.shapes = {c.output: c.shape for c in calls}
    self.consts = {}
    self.keep = {}
    self.stops = []
    self._uf = UnionFind()
    self._base = {}
    self._pins = {}    # element -> reason
    self._why = {}     # element -> why it is not constant though its inputs are
    self._empty = {}   # element -> source layer name (an empty filter)
    self._stop_filters = []   # `Stop`s of the empty filters of stop layers

  def element(self, tensor, channel):
    return self._base[tensor] + channel

  def _ids(self, tensor):
    base = self._base[tensor]
    return list(range(base, base + self.shapes[tensor][-1]))

  def _tie(self, call, kind='elementwise', extra=None):
    """Ties the output's channels to its inputs' as `tf1prune.channels`
    ties them for a `ChannelOp` of `kind`."""
    inputs = list(range(len(call.inputs)))
    op = ChannelOp(kind, call.layer, inputs, [], [], extra, None)
    ids = {i: self._ids(t) for i, t in enumerate(call.inputs)}
    if not tie(self._uf, op, ids, self._ids(call.output)):
      raise ValueError('internal error: the channels of %r do not line up '
                       'with its inputs' % call.layer.name)

  def _pin(self, tensor, reason):
    for c in range(self.shapes[tensor][-1]):
      self._pins.setdefault(self.element(tensor, c), reason)

  def build(self, model):
    for call in self.calls:
      self._base[call.output] = int(self._uf.add(call.shape[-1])[0])
      self._forward(call)
    for tensor in model.outputs:
      self._pin(id(tensor), 'it is a model output')
    classes = collections.defaultdict(list)
    for tensor, base in self._base.items():
      for c in range(self.shapes[tensor][-1]):
        classes[self._uf.find(base + c)].append((tensor, c))
    reasons = {root: self._reason(members) for root, members in classes.items()}
    for call in self.calls:
      if call.kind in _SOURCES:
        self._check_fold(call, reasons)
        self._map_reader(call, reasons)
    self._set_keep(reasons)
    while self._give_up_costly(reasons):
      self._set_keep(reasons)
    self._collect_stops(classes, reasons)
    return self

  def _set_keep(self, reasons):
    """`keep`, `ones` and `border` of the classes that `reasons` keep."""
    self._keep_one(reasons)
    for tensor, base in self._base.items():
      roots = [self._uf.find(base + c) for c in range(self.shapes[tensor][-1])]
      self.keep[tensor] = np.array([reasons[r] is not None for r in roots])
    self.ones, self.border = set(), {}
    for call in self.calls:
      if (call.kind == 'conv' and self.fold_borders and
          np.any(self._padded_constants(call) & ~self.keep[call.inputs[0]])):
        self.ones.add(call.output)
    self._border_maps()

  def _give_up_costly(self, reasons):
    """Keeps the removed channels that a conv would read through extra
    layers (a ones channel, a border map) costing more FLOPs than its share
    of what removing them saves (parameters where the size is not static),
    as the graph shrink does, conv by conv. Returns whether it kept any."""
    changed, readers = False, []
    for call in self.calls:
      if call.output in self.ones:
        removed = np.flatnonzero(self._padded_constants(call) &
                                 ~self.keep[call.inputs[0]])
        source = call.inputs[0]
      elif call.output in self.border:
        x = call.inputs[0]
        removed = [c for c in self.maps[x] if not self.keep[x][c]]
        source = self.border[call.output][0][0].inputs[0]
      else:
        continue
      roots = set(self._uf.find(self.element(call.inputs[0], c))
                  for c in removed)
      readers.append((call, source, roots))
    for call, source, roots in readers:
      extra = self._helper_cost(call, source)
      # Each conv that needs extra layers for these channels pays its own:
      # it gets its share of what removing them saves, so that all of them
      # together cost no more than the saving.
      share = sum(1 for _, _, other in readers if other & roots)
      saved = self._savings(roots, self._sized(call)) // max(share, 1)
      if extra <= saved:
        continue
      unit = 'FLOPs' if self._sized(call) else 'parameters'
      if call.output in self.ones:
        why = ('%s pads with zeros: the ones channel that would give it what '
               'the removed constants gave costs more %s (%d) than removing '
               'them saves (%d)' % (call.layer.name, unit, extra, saved))
      else:
        why = ('%s pads with zeros: the border map that would give %s what '
               'the removed constants gave costs more %s (%d) than removing '
               'them saves (%d)' % (
                   self.border[call.output][0][-1].layer.name,
                   call.layer.name, unit, extra, saved))
      for root in roots:
        if reasons[root] is None:
          reasons[root] = why
          changed = True
    return changed

  def _sized(self, call):
    return None not in tuple(self.shapes[call.inputs[0]][1:]) + tuple(
        call.shape[1:])

  def _helper_cost(self, call, source):
    """FLOPs (parameters if not `_sized`) of the extra layers for `call`: a
    1x1 conv of ones on `source`, then a ones channel of the conv or a
    border conv of the depthwise conv's kernel size."""
    out = int(self.keep[call.output].sum())
    if call.output in self.border:
      kernel = self.border[call.output][0][-1].layer.get_config()[
          'kernel_size']
    else:
      kernel = layer_weights(call.layer)['kernel'].shape[:2]
    taps, channels = int(np.prod(kernel)), int(self.keep[source].sum())
    if not self._sized(call):
      return channels + 1 + taps * out
    return 2 * (channels * int(np.prod(self.shapes[source][1:-1])) +
                taps * out * int(np.prod(call.shape[1:-1])))

  def _savings(self, roots, flops):
    """FLOPs (parameters if not `flops`) of the weights of every Dense /
    conv layer on the channels of the classes `roots`."""
    total = 0
    for call in self.calls:
      if call.kind not in _SOURCES + ('depthwise',):
        continue
      ins, outs = [sum(self._uf.find(self.element(t, c)) in roots
                       for c in range(self.shapes[t][-1]))
                   for t in (call.inputs[0], call.output)]
      if not (ins or outs):
        continue
      w = layer_weights(call.layer)
      kept_in = int(self.keep[call.inputs[0]].sum())
      kept_out = int(self.keep[call.output].sum())
      if call.kind == 'separable':
        dw = w['depthwise_kernel']
        m, taps = dw.shape[-1], int(np.prod(dw.shape[:2]))
        cost = ins * (taps * m + m * kept_out) + outs * kept_in * m
      else:
        kernel = w['kernel']
        taps = int(np.prod(kernel.shape[:-2]))
        cost = (ins * taps * kernel.shape[-1] if call.kind == 'depthwise' else
                ins * taps * kept_out + outs * taps * kept_in)
      spatial = call.shape[1:-1]
      if flops and None not in spatial:
        cost *= 2 * int(np.prod(spatial))
      total += cost
    return total

  def _forward(self, call):
    kind, out, shape = call.kind, call.output, call.shape
    ins = [self.consts[t] for t in call.inputs]
    channels = shape[-1]
    nan = np.full(channels, np.nan)
    layer = call.layer
    if kind == 'input':
      self.consts[out] = nan
      self._pin(out, 'it is a model input')
    elif kind == 'stop':
      self.consts[out] = nan
      empty = _empty_filters(layer)
      if empty:
        self._stop_filters.append(Stop(layer.name, empty, call.reason))
      for t in call.inputs:
        self._pin(t, 'read by %s: %s' % (layer.name, call.reason))
      self._pin(out, 'made by %s: %s' % (layer.name, call.reason))
    elif kind in _SOURCES:
      self.consts[out] = self._source(call, ins[0])
      for c in np.flatnonzero(~np.isnan(self.consts[out])):
        self._empty[self.element(out, c)] = layer.name
      why = activation_stops(layer)
      if why:
        self._pin(out, 'the activation of %s: %s' % (layer.name, why))
    elif kind == 'depthwise':
      self.consts[out] = self._depthwise(call, ins[0])
      self._tie(call, 'depthwise', channels // len(ins[0]))
      why = activation_stops(layer)
      if why:
        self._pin(out, 'the activation of %s: %s' % (layer.name, why))
    elif kind in ('elementwise', 'pool', 'pad', 'reshape'):
      if kind == 'elementwise':
        values = elementwise(_runner(call), ins[0], len(shape))
        self._elementwise_maps(call)
      elif kind == 'pad':
        values = np.where(ins[0] == 0, 0.0, np.nan)
        self._mark_why(out, ins[0], values, '%s pads with zeros: a removed '
                       'channel that is a nonzero constant varies near the '
                       'borders after it' % layer.name)
        self._patterns(call, ins[0], values, [])
      else:
        values = ins[0]
      self.consts[out] = values
      self._tie(call)
    elif kind == 'merge':
      op = {'Add': np.add, 'Subtract': np.subtract, 'Multiply': np.multiply,
            'Maximum': np.maximum, 'Minimum': np.minimum}.get(
                op_name(layer))
      if op is None:      # Average
        values = np.mean(ins, axis=0)
      else:
        values = ins[0]
        for other in ins[1:]:
          values = op(values, other)
      self.consts[out] = values
      self._tie(call)
    elif kind == 'concat':
      self.consts[out] = np.concatenate(ins)
      self._tie(call, 'concat', [len(values) for values in ins])
    elif kind == 'flatten':
      self.consts[out] = ins[0][np.arange(channels) % len(ins[0])]
      self._tie(call, 'reshape', channels // len(ins[0]))
    else:
      raise ValueError('unknown kind %r of layer %r' % (kind, layer.name))

  def _elementwise_maps(self, call):
    maps = self.maps.get(call.inputs[0])
    if not maps:
      return
    shape = self.shapes[call.inputs[0]]
    x = np.zeros(tuple(shape[1:]))
    for c, pattern in maps.items():
      x[..., c] = pattern
    y = borders.pattern_of(_runner(call), x, shape)
    self.maps[call.output] = {c: y[..., c] for c in maps}
    self.map_origin[call.output] = self.map_origin[call.inputs[0]]

  def _map_reader(self, call, reasons):
    """Keeps the border patterns a layer cannot take; records the maps
    a linear 1x1 Conv2D adds instead."""
    maps = self.maps.get(call.inputs[0], {})
    if not maps:
      return
    chain = self.map_origin[call.inputs[0]]
    config = call.layer.get_config()
    why = None
    if call.kind != 'conv' or tuple(config['kernel_size']) != (1, 1) or tuple(
        config['strides']) != (1, 1) or activation_name(call.layer) != 'linear':
      why = ('%s reads the border pattern that %s makes of a removed '
             'constant; only a linear 1x1 Conv2D takes it' % (
                 call.layer.name, chain[-1].layer.name))
    elif chain[-1].kind != 'depthwise' or not borders.rebuildable(
        self._taps(chain)):
      why = ('the border pattern of %s cannot be rebuilt by a conv on ones'
             % chain[-1].layer.name)
    for c in maps:
      root = self._uf.find(self.element(call.inputs[0], c))
      if why and reasons[root] is None:
        reasons[root] = why

  def _border_maps(self):
    for call in self.calls:
      maps = self.maps.get(call.inputs[0] if call.inputs else None, {})
      removed = [c for c in maps if not self.keep[call.inputs[0]][c]]
      if call.kind not in _SOURCES or not removed:
        continue
      kernel = layer_weights(call.layer)['kernel'][0, 0]     # [in, out]
      m = sum(maps[c][..., None] * kernel[c] for c in removed)
      chain = self.map_origin[call.inputs[0]]
      self.border[call.output] = (chain, borders.solve(
          self._taps(chain), m, chain[-1].layer.get_config()['kernel_size']))

  def _taps(self, chain):
    return borders.chain_taps([c.layer for c in chain],
                              self.shapes[chain[0].inputs[0]])

  def _mark_why(self, out, before, after, why):
    for c in np.flatnonzero(~np.isnan(before) & np.isnan(after)):
      self._why[self.element(out, c)] = why

  def _source(self, call, values):
    """Constants of a Dense / Conv2D / SeparableConv2D output."""
    layer = call.layer
    w = layer_weights(layer)
    in_shape = self.shapes[call.inputs[0]]
    channels = call.shape[-1]
    bias = w.get('bias', np.zeros(channels))
    all_known = not np.isnan(values).any()
    padded = False
    if call.kind == 'separable':
      values = spread(w['depthwise_kernel'], values,
                       pads_matter(layer, in_shape))
      kernel = w['pointwise_kernel'].reshape(len(values), channels)
      used = kernel != 0
    else:
      taps = w['kernel'].reshape(-1, len(values), channels)
      kernel = taps.sum(axis=0)
      used = (taps != 0).any(axis=0)            # [in, out]
      padded = call.kind == 'conv' and pads_matter(layer, in_shape)
    unknown = np.isnan(values)
    blocked = (used & unknown[:, None]).any(axis=0)
    if padded:
      blocked |= (used & (values != 0)[:, None] & ~unknown[:, None]).any(
          axis=0)
    pre = bias + np.where(unknown, 0.0, values) @ kernel
    out = np.where(blocked, np.nan, activate(layer, pre))
    if all_known or padded:
      reads_known = ~(used & unknown[:, None]).any(axis=0) | (
          call.kind == 'separable' and all_known)
      for c in np.flatnonzero(blocked & reads_known):
        self._why[self.element(call.output, c)] = (
            '%s pads with zeros: the constants it reads vary near the '
            'borders' % layer.name)
    return out

  def _depthwise(self, call, values):
    layer = call.layer
    w = layer_weights(layer)
    padded = pads_matter(layer, self.shapes[call.inputs[0]])
    mid = spread(w['kernel'], values, padded)
    zero = ~(w['kernel'] != 0).reshape(-1, len(mid)).any(axis=0)
    pre = np.where(zero, 0.0, mid) + w.get('bias', np.zeros(len(mid)))
    known = zero | ~np.isnan(mid)
    out = np.where(known, activate(layer, np.where(known, pre, 0.0)), np.nan)
    multiplier = len(mid) // len(values)
    before = np.repeat(values, multiplier)
    self._mark_why(call.output, before, out, '%s (depthwise) pads with zeros: '
                   'a removed channel that is a nonzero constant varies near '
                   'the borders after it' % layer.name)
    chain = self.map_origin.get(call.inputs[0], [])
    if [c for c in chain if c.kind == 'depthwise']:
      return out                       # one conv per pattern chain
    extra = [c * multiplier + k for c in self.maps.get(call.inputs[0], {})
             for k in range(multiplier)]
    self._patterns(call, before, out, chain, extra)
    return out

  def _patterns(self, call, before, after, chain, extra=()):
    """Border patterns of the output channels that a ZeroPadding2D or a
    padded depthwise conv makes vary (with `fold_borders`)."""
    varying = set(np.flatnonzero(~np.isnan(before) & np.isnan(after)))
    varying.update(extra)
    shape = self.shapes[call.inputs[0]]
    if not self.fold_borders or not varying or None in shape[1:]:
      return     # the channels vary: they stay (`_mark_why` says why)
    x = np.broadcast_to(np.where(np.isnan(self.consts[call.inputs[0]]), 0.0,
                                 self.consts[call.inputs[0]]),
                        tuple(shape[1:])).copy()
    for c, pattern in self.maps.get(call.inputs[0], {}).items():
      x[..., c] = pattern
    pattern = borders.pattern_of(_runner(call), x, shape)
    self.maps[call.output] = {int(c): pattern[..., c] for c in varying}
    self.map_origin[call.output] = list(chain) + [call]

  def _padded_constants(self, call):
    """Input channels that a padded layer reads and that are nonzero
    constants (all False if the layer reads no padding)."""
    values = self.consts[call.inputs[0]]
    if call.kind == 'dense' or not pads_matter(
        call.layer, self.shapes[call.inputs[0]]):
      return np.zeros(len(values), bool)
    w = layer_weights(call.layer)
    kernel = w['depthwise_kernel' if call.kind == 'separable' else 'kernel']
    used = (kernel != 0).reshape(-1, len(values), kernel.shape[-1]).any(
        axis=(0, 2))
    return used & (values != 0) & ~np.isnan(values)

  def _check_fold(self, call, reasons):
    """Keeps the classes a padded conv cannot fold into its bias (with
    `fold_borders`, a Conv2D gets a channel of ones instead)."""
    if call.kind == 'conv' and self.fold_borders:
      return
    layer = call.layer
    for c in np.flatnonzero(self._padded_constants(call)):
      root = self._uf.find(self.element(call.inputs[0], c))
      if reasons[root] is None:
        reasons[root] = (
            '%s pads with zeros: a removed channel that is a nonzero '
            'constant (its bias, batch norm shift, activation) reaches it '
            'with a different sum near the borders, so it cannot go into '
            'the bias%s' % (layer.name, '' if call.kind == 'separable' else
                            ' (fold_borders=False)'))

  def _reason(self, members):
    """None if the class can go, else why it stays."""
    elements = [self.element(t, c) for t, c in members]
    for e in elements:
      if e in self._pins:
        return self._pins[e]
    unknown = [(e, t) for e, (t, c) in zip(elements, members)
               if np.isnan(self.consts[t][c]) and c not in self.maps.get(t, {})]
    if not unknown:
      return None
    for e, _ in unknown:
      if e in self._why:
        return self._why[e]
    producers = {c.output: c for c in self.calls}
    names = sorted(set(producers[t].layer.name for _, t in unknown
                       if producers[t].kind in _SOURCES))
    if names:
      return ('coupled with filters of %s that are not empty' %
              ', '.join(names))
    names = sorted(set(producers[t].layer.name for _, t in unknown))
    return 'coupled with channels of %s that are not constant' % ', '.join(
        names)

  def _keep_one(self, reasons):
    for tensor, base in self._base.items():
      roots = [self._uf.find(base + c) for c in range(self.shapes[tensor][-1])]
      if roots and all(reasons[r] is None for r in roots):
        reasons[roots[0]] = 'one channel of every tensor is always kept'

  def _collect_stops(self, classes, reasons):
    counts = collections.OrderedDict()
    for root, members in classes.items():
      if reasons[root] is None:
        continue
      for t, c in members:
        source = self._empty.get(self.element(t, c))
        if source is not None:
          key = (source, reasons[root])
          counts[key] = counts.get(key, 0) + 1
    self.stops = [Stop(layer, n, reason)
                  for (layer, reason), n in counts.items()]
    self.stops.extend(self._stop_filters)


def plan(model, fold_borders=True):
  """The `Plan` of a functional or Sequential Keras model (see module doc).

  Args:
    model: the model.
    fold_borders: let a padded Conv2D read removed nonzero constants through
      an extra channel of ones (else those channels stay, as stops).
  """
  calls = trace(model)
  return Plan(calls, fold_borders).build(model)
