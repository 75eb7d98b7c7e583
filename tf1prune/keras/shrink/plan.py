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

from tf1prune.export.shrink.padding import conv_map, conv_pads
from tf1prune.keras.shrink import borders
from tf1prune.keras.shrink.channel_walk import ChannelWalk
from tf1prune.keras.shrink.layer_calls import activation_name, is_conv
from tf1prune.keras.shrink.layer_view import STARTS, LayerView
from tf1prune.keras.shrink.removed_values import RemovedValues, full, is_map

__all__ = ['Fold', 'Plan', 'Stop', 'layer_weights', 'plan']


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


class Fold(collections.namedtuple('Fold', ['kind', 'bias', 'map', 'chain',
                                           'kernel'])):
  """How a layer gets what its removed input channels gave its output:

  - 'bias': `bias` (float64 [O]) added to its bias;
  - 'ones': an extra input channel of ones (a padded conv reading nonzero
    constants), its kernel the sum of `constant x kernel` over them;
  - 'border': `bias` added to its bias, and the conv on ones of `chain`'s
    geometry (the depthwise conv's nodes), kernel `kernel`, added at its
    output;
  - 'map': `map` (float64 [H', W', O], everything they gave) added at its
    output by a transposed conv of that size on ones.
  """


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
    self.folds = {}
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

  def _linear(self, node):
    """Whether a map added at the output of `node`'s layer is a map added
    to what its kernel computes: a Dense, Conv1D, Conv2D or separable conv
    without an activation."""
    layer = node.call.layer
    return (not node.attrs.get('transposed') and
            node.part in ('kernel', 'pointwise') and
            type(layer).__name__ in ('Dense', 'Conv1D', 'Conv2D',
                                     'SeparableConv2D') and
            activation_name(layer) == 'linear')

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
        chain = chains.get(c, ())
        if not self.fold_borders:
          why = self._map_why(chain)
        elif not self._linear(node) and not self._border(node, [chain]):
          why = ('%s reads the map that %s makes of a removed constant; '
                 'only a layer without an activation takes it' % (
                     name, self._maker(chain)))
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

  def _maker(self, chain):
    """The name of the layer whose op made a map (first of `chain` that is
    no `Pad`)."""
    nodes = [self.view.node(n) for n in chain if n != 'mixed']
    makers = [n for n in nodes if n.op != 'Pad'] or nodes
    return makers[0].call.name if makers else 'zero padding'

  def _map_why(self, chain):
    """Why the map that the nodes `chain` make stays (`fold_borders` is
    False)."""
    nodes = [self.view.node(n) for n in chain if n != 'mixed']
    makers = [n for n in nodes if n.op != 'Pad']
    node = makers[0] if makers else (nodes[-1] if nodes else None)
    if node is None:
      return 'a removed constant varies over the positions'
    name = node.call.name
    if node.op == 'Pad':
      return ('%s pads with zeros: a removed channel that is a nonzero '
              'constant varies near the borders after it' % name)
    if node.op == 'DepthwiseConv2dNative':
      return ('%s (depthwise) pads with zeros: a removed channel that is a '
              'nonzero constant varies near the borders after it' % name)
    if node.op == 'Conv2D':
      return ('%s pads with zeros: the constants it reads vary near the '
              'borders' % name)
    return ('%s (%s) makes a removed constant vary over the positions' %
            (name, node.op))

  def _border(self, node, chains):
    """The chain (nodes) whose conv on ones gives the 1x1 `node` the maps
    of `chains` (one chain for all of them: `ZeroPadding2D`s, then one
    padded depthwise conv), or None."""
    layer = node.call.layer
    config = layer.get_config()
    if node.op != 'Conv2D' or node.part != 'kernel' or \
        type(layer).__name__ != 'Conv2D' or \
        tuple(config['kernel_size']) != (1, 1) or \
        tuple(config['strides']) != (1, 1) or \
        activation_name(layer) != 'linear' or len(set(chains)) != 1:
      return None
    chain = chains[0]
    if not chain or 'mixed' in chain:
      return None
    chain = [self.view.node(n) for n in chain]
    pads, last = chain[:-1], chain[-1]
    if last.op != 'DepthwiseConv2dNative' or last.part != 'depthwise' or \
        any(n.op != 'Pad' for n in pads):
      return None
    taps = self._taps(chain)
    if taps is None or not borders.rebuildable(taps):
      return None
    return chain

  def _taps(self, chain):
    """`borders.chain_taps` of a chain of `Pad`s and a depthwise conv."""
    shape = self.view.shape(chain[0].inputs[0])
    if shape is None or None in shape[1:3]:
      return None
    last = chain[-1]
    pads = [np.asarray(self.view.constant(n.inputs[1]))[1:3] for n in
            chain[:-1]]
    kernel = np.shape(self.view.constant(last.inputs[1]))[:2]
    return borders.chain_taps(pads, kernel, last.attrs['strides'],
                              last.attrs['dilations'],
                              last.attrs.get('padding', 'VALID'), shape[1:3])

  # -------------------------------------------------------------- keep

  def _set_keep(self, reasons):
    """`keep` and `folds` of the classes that `reasons` keep."""
    self._keep_one(reasons)
    for t in self._tensors:
      self.keep[t] = np.array([reasons[int(r)] is not None
                               for r in self._roots[t]], bool)
    self.folds = {}
    for node in self.view.walk_order():
      if node.op in STARTS and self.walk.carries(node.inputs[0]):
        fold = self._fold(node)
        if fold is not None:
          self.folds[node.call.name] = fold
    self.ones = set(n for n, f in self.folds.items() if f.kind == 'ones')
    self.border = dict((n, (f.chain, f.kernel))
                       for n, f in self.folds.items() if f.kind == 'border')

  def _removed(self, node):
    """bool [in]: the removed input channels `node`'s kernel reads."""
    t = node.inputs[0]
    return ~self.keep[t] & self._used(node)

  def _contribution(self, node, channels):
    """float64 [1, 1, O] or [H', W', O]: what the input channels
    `channels` (bool [in]) give `node`'s output (its kernel only)."""
    t = node.inputs[0]
    x = np.where(channels, self.values.value(t), 0.0)
    kernel = np.asarray(self.view.constant(node.inputs[1]), np.float64)
    if node.op == 'MatMul':
      return x @ kernel
    size = self.values._size(t)   # pylint: disable=protected-access
    if not self._pads(node) and x.shape[:2] == (1, 1):
      return x @ kernel.reshape(-1, kernel.shape[-2], kernel.shape[-1]).sum(
          axis=0)
    attrs = node.attrs
    pads = conv_pads(size, kernel.shape[:2], attrs['strides'],
                     attrs['dilations'], attrs.get('padding', 'VALID'))
    return conv_map(full(x, size), kernel, pads, attrs['strides'],
                    attrs['dilations'])

  def _fold(self, node):
    """How `node`'s layer gets what its removed inputs gave (`Fold`)."""
    removed = self._removed(node)
    if not removed.any() or node.attrs.get('transposed'):
      return None
    t = node.inputs[0]
    value = self.values.value(t)
    maps = np.array([removed[c] and is_map(value, c)
                     for c in range(removed.size)], bool)
    constant = removed & ~maps
    padded = self._pads(node)
    nonzero = constant & value.reshape(-1, removed.size).any(axis=0)
    if not maps.any() and (not padded or not nonzero.any()):
      return Fold('bias', self._contribution(node, constant)[0, 0], None,
                  None, None)
    if not maps.any() and node.op == 'Conv2D' and node.part == 'kernel' and \
        type(node.call.layer).__name__ in ('Conv2D', 'Conv1D'):
      return Fold('ones', np.zeros(0), None, None, None)
    chains = self.values.chains.get(t, {})
    if not padded:
      chain = self._border(node, [chains.get(c, ()) for c in
                                  np.flatnonzero(maps)])
      if chain is not None:
        m = self._contribution(node, maps)
        kernel = chain[-1].call.layer.get_config()['kernel_size']
        return Fold('border', self._contribution(node, constant)[0, 0],
                    None, chain, borders.solve(self._taps(chain), m, kernel))
    return Fold('map', np.zeros(0), self._contribution(node, removed), None,
                None)

  def _keep_one(self, reasons):
    for t in self._tensors:
      roots = [int(r) for r in self._roots[t]]
      if roots and all(reasons[r] is None for r in roots):
        reasons[roots[0]] = 'one channel of every tensor is always kept'

  # -------------------------------------------------------------- costs

  def _give_up_costly(self, reasons):
    """Keeps the removed channels that a layer would read through extra
    layers (a ones channel, a border map, a map) costing more FLOPs than
    its share of what removing them saves (parameters where the size is
    not static), as the graph shrink does, layer by layer. Returns whether
    it kept any."""
    changed, readers = False, []
    for node in self.view.walk_order():
      fold = self.folds.get(node.call.name) if node.op in STARTS else None
      if fold is None or fold.kind == 'bias':
        continue
      t = node.inputs[0]
      removed = self._removed(node)
      if fold.kind == 'border':
        value = self.values.value(t)
        removed = removed & np.array([is_map(value, c) for c in
                                      range(removed.size)], bool)
      roots = set(int(self._roots[t][c]) for c in np.flatnonzero(removed))
      readers.append((node, fold, roots))
    for node, fold, roots in readers:
      extra = self._helper_cost(node, fold)
      # Each layer that needs extra layers for these channels pays its own:
      # it gets its share of what removing them saves, so that all of them
      # together cost no more than the saving.
      share = sum(1 for _, _, other in readers if other & roots)
      saved = self._savings(roots, self._sized(node)) // max(share, 1)
      if extra <= saved:
        continue
      unit = 'FLOPs' if self._sized(node) else 'parameters'
      name = node.call.name
      if fold.kind == 'border':
        why = ('%s pads with zeros: the border map that would give %s what '
               'the removed constants gave costs more %s (%d) than removing '
               'them saves (%d)' % (fold.chain[-1].call.name, name, unit,
                                    extra, saved))
      elif fold.kind == 'ones':
        why = ('%s pads with zeros: the ones channel that would give it what '
               'the removed constants gave costs more %s (%d) than removing '
               'them saves (%d)' % (name, unit, extra, saved))
      else:
        why = ('the map that would give %s what the removed channels gave '
               '(they vary over the positions) costs more %s (%d) than '
               'removing them saves (%d)' % (name, unit, extra, saved))
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

  def _helper_cost(self, node, fold):
    """FLOPs (parameters if not `_sized`) of the extra layers for `node`: a
    1x1 conv of ones on a source tensor, then a ones channel of the conv,
    a border conv of the depthwise conv's kernel size, or a transposed conv
    of the map's size."""
    out = int(self.keep[node.output].sum())
    source = self.view.keys[node.call.inputs[0]]
    if fold.kind == 'border':
      source = fold.chain[0].inputs[0]
      taps = int(np.prod(fold.chain[-1].call.layer.get_config()[
          'kernel_size']))
    elif fold.kind == 'ones':
      taps = int(np.prod(np.shape(self.view.constant(node.inputs[1]))[:-2]))
    else:
      taps = int(np.prod(fold.map.shape[:2]))
    channels = int(self.kept(source).sum())
    if not self._sized(node):
      return channels + 1 + taps * out
    if fold.kind == 'map':
      return 2 * (channels * self._positions(source) + taps * out)
    return 2 * (channels * self._positions(source) +
                taps * out * self._positions(node.output))

  def _savings(self, roots, flops):
    """FLOPs (parameters if not `flops`) of the weights of every Dense /
    conv layer on the channels of the classes `roots`."""
    total = 0
    roots = list(roots)
    for node in self.view.walk_order():
      depthwise = node.op == 'DepthwiseConv2dNative'
      if not (node.op in STARTS or depthwise) or \
          not self.walk.carries(node.output):
        continue
      t = node.inputs[0]
      ins = int(np.isin(self._roots[t], roots).sum()) if \
          self.walk.carries(t) else 0
      outs = int(np.isin(self._roots[node.output], roots).sum())
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
