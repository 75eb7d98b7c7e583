"""Which channels of a Keras model can go: classes, values, readers, stops.

    >>> import numpy as np, keras
    >>> from tf1prune.keras.shrink.plan import plan
    >>> x = keras.Input((5,))
    >>> h = keras.layers.Dense(4, activation='relu', name='h')(x)
    >>> y = keras.layers.Dense(2, name='y')(h)
    >>> model = keras.Model(x, y)
    >>> _ = model.get_layer('h').kernel.assign(np.ones([5, 4]) * [1, 0, 1, 0])
    >>> p = plan(model)
    >>> p.keep['h'].tolist()      # units 1 and 3 output relu(bias): constants
    [True, False, True, False]

The channel classes come from the one walk of `tf1prune.channels` over the
model's `LayerView` (`ChannelWalk`: residual adds, concats, depthwise convs,
SE gates and flattens tie channels as the op table says), and what each
channel is when no example changes it from `RemovedValues` (the table's
value functions, and the graph shrink's maps for zero padding and pools). A
class goes when nothing pins it (a model input or output, a layer or op
whose channels end there), every element of it is known (a constant, or a
map over the positions that is the same for every example), and every layer
that reads it can take what it carries:

- a `Dense` or conv layer folds a constant into its bias (`constant x sum
  of the kernel taps`);
- a conv that pads with zeros reads a nonzero constant through an extra
  input channel of ones (`fold_borders`, `Plan.ones`);
- a linear 1x1 `Conv2D` adds the map that a padded depthwise conv (after
  `ZeroPadding2D`s, element-wise layers) makes of a constant, through a
  conv on ones of that geometry (`fold_borders`, `Plan.border`,
  `tf1prune.keras.shrink.borders`);
- anything else keeps it, and says why.

Where those extra layers would cost more FLOPs than removing the channels
saves (the weights of every Dense and conv layer on them), the channels
stay. One channel of every tensor is always kept. Where a class with empty
filters stays, `Plan.stops` says why; the empty filters of a layer the
shrink does not go through (a Conv3D, a grouped Conv2D) are stops with its
reason.
"""

import collections

import numpy as np

from tf1prune.export.shrink.padding import conv_pads
from tf1prune.keras.shrink import borders
from tf1prune.keras.shrink.channel_walk import ChannelWalk
from tf1prune.keras.shrink.layer_calls import activation_name, is_conv
from tf1prune.keras.shrink.layer_view import STARTS, LayerView
from tf1prune.keras.shrink.removed_values import RemovedValues, is_map

__all__ = ['Plan', 'Stop', 'layer_weights', 'plan']


def layer_weights(layer):
  """{short weight name: float64 ndarray}; `kernel` also for a depthwise."""
  out = {}
  for variable in getattr(layer, 'weights', []):
    name = variable.name.split('/')[-1].split(':')[0]
    out[name] = np.asarray(variable.numpy(), np.float64)
  if type(layer).__name__ == 'DepthwiseConv2D' and 'depthwise_kernel' in out:
    out['kernel'] = out.pop('depthwise_kernel')   # Keras 2 names it so
  return out


def _empty_filters(layer):
  """How many filters of a layer the shrink does not go through (a Conv3D,
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
    view: the model's `LayerView` (`view.trace.calls`: the calls in order;
      `view.keys`: the key of each call's output tensor).
    walk: its `ChannelWalk`; `values`: its `RemovedValues`.
    keep: {tensor key: bool [C]}, the channels that stay (tensors the walk
      does not follow keep all theirs: `kept(key)`).
    ones: the keys of the padded convs that read removed nonzero
      constants through an extra input channel of ones.
    border: {key of a 1x1 conv's output: (the Keras layers of the chain, the
      `[kh, kw, 1, out]` kernel of its conv on ones)}.
    stops: list of `Stop`.
  """

  def __init__(self, view, fold_borders=True):
    self.view = view
    self.fold_borders = fold_borders
    self.walk = ChannelWalk(view)
    self.values = RemovedValues(view, self.walk)
    self.keep, self.ones, self.border, self.stops = {}, set(), {}, []
    self._tensors = [n.output for n in view.walk_order()
                     if self.walk.carries(n.output)]
    for node in view.walk_order():
      for tensor in node.inputs:
        if self.walk.carries(tensor) and tensor not in self._tensors:
          self._tensors.append(tensor)
    self._roots = dict((t, np.array(self.walk.classes(t), np.int64))
                       for t in self._tensors)
    self._nan = dict((t, np.isnan(self.values.value(t)).any(axis=(0, 1)))
                     for t in self._tensors)

  def kept(self, key):
    """bool [C]: the channels of tensor `key` that stay."""
    if key in self.keep:
      return self.keep[key]
    return np.ones(self.view.shape(key)[-1], bool)

  # -------------------------------------------------------------- reasons

  def build(self):
    reasons = collections.OrderedDict()
    members = collections.OrderedDict()
    for t in self._tensors:
      for c, root in enumerate(self._roots[t]):
        reasons.setdefault(int(root), None)
        members.setdefault(int(root), []).append((t, c))
    for t in self._tensors:
      why = self.walk.pins.get(t)
      if why:
        for root in set(self._roots[t].tolist()):
          if reasons[root] is None:
            reasons[root] = why
    for root, elements in members.items():
      if reasons[root] is None:
        reasons[root] = self._unknown(elements)
    for t in self._tensors:
      for node in self.walk.readers.get(t, []):
        self._reader(node, t, reasons)
    self._set_keep(reasons)
    while self._give_up_costly(reasons):
      self._set_keep(reasons)
    self._collect_stops(members, reasons)
    return self

  def _unknown(self, elements):
    """None if every element is known, else why the class stays."""
    unknown = [(t, c) for t, c in elements if self._nan[t][c]]
    if not unknown:
      return None
    for t, c in unknown:
      why = self.values.why.get(t, {}).get(c)
      if why:
        return why
    producers = [self.view.producer(t) for t, _ in unknown]
    names = sorted(set(p.call.name for p in producers
                       if p is not None and p.op in STARTS))
    if names:
      return ('coupled with filters of %s that are not empty' %
              ', '.join(names))
    names = sorted(set(p.call.name for p in producers if p is not None))
    return 'coupled with channels of %s that are not constant' % ', '.join(
        names)

  def _pads(self, node):
    """Whether the conv `node` reads zero padding anywhere."""
    shape = self.view.shape(node.inputs[0])
    attrs = node.attrs
    if node.op == 'MatMul' or attrs.get('padding', 'VALID') == 'VALID':
      return False
    size = shape[1:3] if shape and len(shape) == 4 else None
    if size is None or None in size:
      return True
    kernel = np.shape(self.view.constant(node.inputs[1]))[:2]
    return bool(np.any(conv_pads(size, kernel, attrs['strides'],
                                 attrs['dilations'], 'SAME')))

  def _used(self, node):
    """bool [in]: the input channels the kernel of `node` reads."""
    kernel = np.asarray(self.view.constant(node.inputs[1]))
    if node.attrs.get('transposed'):
      kernel = np.swapaxes(kernel, -1, -2)
    return (kernel != 0).reshape(-1, kernel.shape[-2], kernel.shape[-1]).any(
        axis=(0, 2))

  def _reader(self, node, tensor, reasons):
    """Keeps the classes of `tensor` that the layer `node` cannot take."""
    value = self.values.value(tensor)
    roots = self._roots[tensor]
    used = self._used(node)
    name = node.call.name
    chains = self.values.chains.get(tensor, {})
    padded = self._pads(node)
    for c in np.flatnonzero(used):
      root = int(roots[c])
      if reasons[root] is not None or self._nan[tensor][c]:
        continue
      why = None
      if is_map(value, c):
        why = self._map_reader(node, tensor, c, chains.get(c, ()))
      elif not value[..., c].any():
        continue
      elif node.attrs.get('transposed'):
        why = ('%s (a transposed conv) spreads a removed constant over its '
               'outputs unevenly' % name)
      elif padded and not self.fold_borders:
        why = ('%s pads with zeros: a removed channel that is a nonzero '
               'constant (its bias, batch norm shift, activation) reaches '
               'it with a different sum near the borders, so it cannot go '
               'into the bias (fold_borders=False)' % name)
      if why:
        reasons[root] = why

  def _map_reader(self, node, tensor, c, chain):
    """Why the layer `node` cannot take channel `c` of `tensor`, a map of
    the positions made by the nodes `chain` (None if it can)."""
    if not chain or 'mixed' in chain:
      return ('the removed constants that %s reads vary over the positions '
              'in more than one way' % node.call.name)
    chain = [self.view.node(n) for n in chain]
    if node.part == 'pointwise':
      return ('%s pads with zeros: a removed channel that is a nonzero '
              'constant (its bias, batch norm shift, activation) reaches it '
              'with a different sum near the borders, so it cannot go into '
              'the bias' % node.call.name)
    if not self.fold_borders or not self._rebuildable(chain):
      return self._map_why(chain)
    config = node.call.layer.get_config()
    if node.op != 'Conv2D' or node.part != 'kernel' or \
        type(node.call.layer).__name__ != 'Conv2D' or \
        tuple(config['kernel_size']) != (1, 1) or \
        tuple(config['strides']) != (1, 1) or \
        activation_name(node.call.layer) != 'linear':
      return ('%s reads the border pattern that %s makes of a removed '
              'constant; only a linear 1x1 Conv2D takes it' % (
                  node.call.name, chain[-1].call.name))
    return None

  def _map_why(self, chain):
    """Why the map that the nodes `chain` make stays."""
    makers = [n for n in chain if n.op != 'Pad']
    node = makers[0] if makers else chain[-1]
    name = node.call.name
    if node.op == 'Pad':
      return ('%s pads with zeros: a removed channel that is a nonzero '
              'constant varies near the borders after it' % name)
    if node.op == 'DepthwiseConv2dNative':
      if not self.fold_borders:
        return ('%s (depthwise) pads with zeros: a removed channel that is a '
                'nonzero constant varies near the borders after it' % name)
      return ('the border pattern of %s cannot be rebuilt by a conv on ones'
              % name)
    if node.op == 'Conv2D':
      return ('%s pads with zeros: the constants it reads vary near the '
              'borders' % name)
    return ('%s (%s) makes a removed constant vary over the positions' %
            (name, node.op))

  def _rebuildable(self, chain):
    """Whether a conv on ones of the chain's geometry gives its maps: Pads,
    then one depthwise conv (a `DepthwiseConv2D` or a `Conv2D` of groups
    = channels), nothing else."""
    pads, last = chain[:-1], chain[-1]
    if last.op != 'DepthwiseConv2dNative' or last.part != 'depthwise' or \
        any(n.op != 'Pad' for n in pads):
      return False
    taps = self._taps(chain)
    return taps is not None and borders.rebuildable(taps)

  def _taps(self, chain):
    shape = self.view.shape(chain[0].inputs[0])
    if shape is None or None in shape[1:3]:
      return None
    return borders.chain_taps([n.call.layer for n in chain], shape)

  # -------------------------------------------------------------- keep

  def _set_keep(self, reasons):
    """`keep`, `ones` and `border` of the classes that `reasons` keep."""
    self._keep_one(reasons)
    for t in self._tensors:
      self.keep[t] = np.array([reasons[int(r)] is not None
                               for r in self._roots[t]], bool)
    self.ones, self.border = set(), {}
    for node in self.view.walk_order():
      if node.op not in STARTS or not self.walk.carries(node.inputs[0]):
        continue
      if self._ones_channels(node).size:
        self.ones.add(node.call.name)
      removed = self._removed_maps(node)
      if removed:
        self._border_map(node, removed)

  def _ones_channels(self, node):
    """The removed input channels a padded conv reads as nonzero constants
    (through a channel of ones)."""
    t = node.inputs[0]
    if not (self.fold_borders and node.part == 'kernel' and node.op ==
            'Conv2D' and not node.attrs.get('transposed') and
            self._pads(node)):
      return np.zeros(0, np.int64)
    value = self.values.value(t)
    constant = np.array([not is_map(value, c) and value[..., c].any()
                         for c in range(value.shape[-1])], bool)
    return np.flatnonzero(constant & self._used(node) & ~self.keep[t])

  def _removed_maps(self, node):
    t = node.inputs[0]
    value = self.values.value(t)
    return [c for c in range(value.shape[-1])
            if not self.keep[t][c] and is_map(value, c)]

  def _border_map(self, node, removed):
    """The kernel of the conv on ones that gives the 1x1 `node` what the
    removed maps `removed` of its input gave."""
    t = node.inputs[0]
    value = self.values.value(t)
    kernel = np.asarray(self.view.constant(node.inputs[1]))[0, 0]  # [in, out]
    m = sum(value[..., c][..., None] * kernel[c] for c in removed)
    chain = [self.view.node(n)
             for n in self.values.chains[t][removed[0]]]
    layers = [n.call.layer for n in chain]
    self.border[node.call.name] = (chain, borders.solve(
        self._taps(chain), m, layers[-1].get_config()['kernel_size']))

  def _keep_one(self, reasons):
    for t in self._tensors:
      roots = [int(r) for r in self._roots[t]]
      if roots and all(reasons[r] is None for r in roots):
        reasons[roots[0]] = 'one channel of every tensor is always kept'

  # -------------------------------------------------------------- costs

  def _give_up_costly(self, reasons):
    """Keeps the removed channels that a conv would read through extra
    layers (a ones channel, a border map) costing more FLOPs than its share
    of what removing them saves (parameters where the size is not static),
    as the graph shrink does, conv by conv. Returns whether it kept any."""
    changed, readers = False, []
    for node in self.view.walk_order():
      if node.op not in STARTS or node.call.name not in self.ones | set(
          self.border):
        continue
      t = node.inputs[0]
      if node.call.name in self.border:
        removed = self._removed_maps(node)
        source = self.border[node.call.name][0][0].inputs[0]
      else:
        removed = self._ones_channels(node)
        source = t
      roots = set(int(self._roots[t][c]) for c in removed)
      readers.append((node, source, roots))
    for node, source, roots in readers:
      extra = self._helper_cost(node, source)
      # Each conv that needs extra layers for these channels pays its own:
      # it gets its share of what removing them saves, so that all of them
      # together cost no more than the saving.
      share = sum(1 for _, _, other in readers if other & roots)
      saved = self._savings(roots, self._sized(node)) // max(share, 1)
      if extra <= saved:
        continue
      unit = 'FLOPs' if self._sized(node) else 'parameters'
      name = node.call.name
      if name in self.border:
        why = ('%s pads with zeros: the border map that would give %s what '
               'the removed constants gave costs more %s (%d) than removing '
               'them saves (%d)' % (self.border[name][0][-1].call.name, name,
                                    unit, extra, saved))
      else:
        why = ('%s pads with zeros: the ones channel that would give it what '
               'the removed constants gave costs more %s (%d) than removing '
               'them saves (%d)' % (name, unit, extra, saved))
      for root in roots:
        if reasons[root] is None:
          reasons[root] = why
          changed = True
    return changed

  def _sized(self, node):
    return None not in tuple(self.view.shape(node.inputs[0])[1:]) + tuple(
        self.view.shape(node.output)[1:])

  def _positions(self, tensor):
    return int(np.prod(self.view.shape(tensor)[1:-1]))

  def _helper_cost(self, node, source):
    """FLOPs (parameters if not `_sized`) of the extra layers for `node`: a
    1x1 conv of ones on `source`, then a ones channel of the conv or a
    border conv of the depthwise conv's kernel size."""
    out = int(self.keep[node.output].sum())
    if node.call.name in self.border:
      kernel = self.border[node.call.name][0][-1].call.layer.get_config()[
          'kernel_size']
    else:
      kernel = np.shape(self.view.constant(node.inputs[1]))[:2]
    taps, channels = int(np.prod(kernel)), int(self.kept(source).sum())
    if not self._sized(node):
      return channels + 1 + taps * out
    return 2 * (channels * self._positions(source) +
                taps * out * self._positions(node.output))

  def _savings(self, roots, flops):
    """FLOPs (parameters if not `flops`) of the weights of every Dense /
    conv layer on the channels of the classes `roots`."""
    total = 0
    for node in self.view.walk_order():
      depthwise = node.op == 'DepthwiseConv2dNative'
      if not (node.op in STARTS or depthwise) or \
          not self.walk.carries(node.output):
        continue
      t = node.inputs[0]
      ins = int(np.isin(self._roots[t], list(roots)).sum()) if \
          self.walk.carries(t) else 0
      outs = int(np.isin(self._roots[node.output], list(roots)).sum())
      if not (ins or outs):
        continue
      kernel = np.shape(self.view.constant(node.inputs[1]))
      taps = int(np.prod(kernel[:-2]))
      if depthwise:
        cost = ins * taps * kernel[-1]
      else:
        cost = (ins * taps * int(self.kept(node.output).sum()) +
                outs * taps * int(self.kept(t).sum()))
      spatial = self.view.shape(node.output)[1:-1]
      if flops and None not in spatial:
        cost *= 2 * int(np.prod(spatial))
      total += cost
    return total

  # -------------------------------------------------------------- stops

  def _collect_stops(self, members, reasons):
    counts = collections.OrderedDict()
    for root, elements in members.items():
      if reasons[root] is None:
        continue
      for t, c in elements:
        producer = self.view.producer(t)
        if producer is None or producer.op not in STARTS:
          continue
        if self._nan[t][c]:
          continue
        key = (producer.call.name, reasons[root])
        counts[key] = counts.get(key, 0) + 1
    self.stops = [Stop(layer, n, reason)
                  for (layer, reason), n in counts.items()]
    for node in self.view.walk_order():
      if node.part == 'stop':
        empty = _empty_filters(node.call.layer)
        if empty:
          self.stops.append(Stop(node.call.name, empty, self.view.why(node)))


def plan(model, fold_borders=True, view=None):
  """The `Plan` of a functional or Sequential Keras model (see module doc).

  Args:
    model: the model.
    fold_borders: let a padded Conv2D read removed nonzero constants through
      an extra channel of ones, and a 1x1 Conv2D the maps of a padded
      depthwise conv through a conv on ones (else those channels stay, as
      stops).
    view: the model's `LayerView` (default: made here).
  """
  return Plan(view or LayerView(model), fold_borders).build()
