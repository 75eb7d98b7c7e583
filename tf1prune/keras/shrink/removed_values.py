"""What a channel that no example changes is at each tensor: a known value.

    >>> import numpy as np, keras
    >>> from tf1prune.keras.shrink.channel_walk import ChannelWalk
    >>> from tf1prune.keras.shrink.layer_view import LayerView
    >>> from tf1prune.keras.shrink.removed_values import RemovedValues
    >>> x = keras.Input((3, 3, 1))
    >>> h = keras.layers.Conv2D(2, 1, activation='relu', name='c')(x)
    >>> h = keras.layers.ZeroPadding2D(((1, 0), (0, 0)), name='pad')(h)
    >>> model = keras.Model(x, keras.layers.Conv2D(1, 2, name='y')(h))
    >>> model.get_layer('c').set_weights([np.array([[[[0., 1.]]]]),
    ...                                   np.array([2., 0.])])
    >>> view = LayerView(model)
    >>> values = RemovedValues(view, ChannelWalk(view))
    >>> values.values['c'][0, 0].tolist()   # filter 0 is empty: relu(2)
    [2.0, nan]
    >>> values.values['pad'][:, 0, 0].tolist()    # 2 inside, the padded row 0
    [0.0, 2.0, 2.0, 2.0]

Every tensor the walk (`ChannelWalk`) follows gets a float64 value, `[1,
1, C]` (the same at every position) or `[H, W, C]` (a map over the
positions, the same for every example), NaN where a channel depends on the
example. Where channels start, a filter that reads only known channels (an
empty filter reads none) gives `sum of value x weight`, exactly where the
conv pads with zeros too (`tf1prune.export.shrink.padding`); the other
nodes give what the channel table says (`table.RULES[op].value`: bias adds,
batch norm as `Mul` and `AddV2`, activations, the merges, reductions) and,
for the ops whose value depends on the position (pads, pools, depthwise
convs, crops, upsampling), the maps the graph shrink computes the same way.
A map that is the same everywhere is a constant again (a max pool of a
ReLU's constant after zero padding gives the constant back).

`chains[tensor][c]` names the nodes that made channel `c` a map (the
`Pad`s, then the depthwise conv, of a MobileNet block): the shrink can give
a 1x1 conv such a map back through a conv on ones of that geometry
(`tf1prune.keras.shrink.borders`). `why[tensor][c]` says why a channel
whose inputs were known is not.
"""

import numpy as np

from tf1prune.export.shrink.padding import (conv_map, conv_pads,
                                            depthwise_map, pool_map)
from tf1prune.keras.shrink.layer_view import STARTS

__all__ = ['RemovedValues', 'full', 'is_map']


def full(value, size):
  """A `[1, 1, C]` or `[H, W, C]` value as `[H, W, C]`."""
  return np.broadcast_to(value, (size[0], size[1], value.shape[-1]))


def is_map(value, channel):
  """Whether channel `channel` of a known value varies over the positions."""
  v = value[..., channel]
  return v.size > 1 and not np.all(v == v.flat[0])


def _uniform(value):
  """A `[H, W, C]` value whose every channel is the same everywhere as
  `[1, 1, C]`."""
  if value.shape[:2] == (1, 1):
    return value
  flat = value.reshape(-1, value.shape[-1])
  if np.all((flat == flat[0]) | (np.isnan(flat) & np.isnan(flat[0]))):
    return flat[:1].reshape(1, 1, -1)
  return value


def _param(value):
  """A parameter of an element-wise op (scalar, `[C]`, `[1, .., 1, C]`) as
  something that broadcasts with `[H, W, C]`."""
  value = np.asarray(value, np.float64)
  if value.ndim == 0 or value.size == 1:
    return value.reshape(())
  if value.ndim == 4:
    return value[0]
  return value.reshape((1, 1, -1))


class RemovedValues(object):
  """The values of the tensors a `ChannelWalk` follows (module doc).

  Args:
    view: the `LayerView`.
    walk: its `ChannelWalk`.

  Attributes:
    values: {tensor key: float64 [1, 1, C] or [H, W, C]}.
    chains: {tensor key: {channel: tuple of node names}}.
    why: {tensor key: {channel: why it is not known}}.
  """

  def __init__(self, view, walk):
    self.view, self.walk = view, walk
    self.values, self.chains, self.why = {}, {}, {}
    with np.errstate(all='ignore'):
      for node in view.walk_order():
        if walk.carries(node.output):
          self._node(node)

  def value(self, tensor):
    """The value of `tensor` (NaN if the walk gave it no value)."""
    if tensor in self.values:
      return self.values[tensor]
    shape = self.view.shape(tensor)
    return np.full((1, 1, shape[-1]), np.nan)

  def _size(self, tensor):
    shape = self.view.shape(tensor)
    if not shape or len(shape) != 4 or None in shape[1:3]:
      return None
    return shape[1:3]

  def _set(self, node, value, chains=None, before=None, why=None):
    """Records `node`'s output value; channels known in `before` and not in
    `value` are unknown because of `why`."""
    value = _uniform(np.asarray(value, np.float64))
    out = node.output
    self.values[out] = value
    if chains:
      known = ~np.isnan(value).any(axis=(0, 1))
      self.chains[out] = dict((c, chain) for c, chain in chains.items()
                              if known[c] and is_map(value, c))
    if before is not None and why:
      lost = (~np.isnan(before).any(axis=(0, 1)) &
              np.isnan(value).any(axis=(0, 1)))
      if lost.any():
        entry = self.why.setdefault(out, {})
        for c in np.flatnonzero(lost):
          entry.setdefault(int(c), '%s %s' % (node.call.name, why))

  def _node(self, node):
    view, walk = self.view, self.walk
    op = walk.ops.get(node.name)
    if node.op in STARTS:
      return self._start(node)
    if op is None:       # an input or a stop's output: its own channels
      shape = view.shape(node.output)
      self.values[node.output] = np.full((1, 1, shape[-1]), np.nan)
      return None
    inputs = [self.value(t) if walk.carries(t) else None
              for t in node.inputs]
    kind = op.kind
    if kind == 'elementwise':
      return self._elementwise(node, op, inputs)
    x = inputs[0]
    chains = dict(self.chains.get(node.inputs[0], {}))
    if kind == 'concat':
      return self._concat(node, op, inputs)
    if kind == 'reshape':
      return self._reshape(node, op, x)
    if kind == 'reduce':
      size = self._size(node.inputs[0])
      return self._set(node, op.rule.value(x, None if size is None else
                                           size[0] * size[1]))
    if kind == 'depthwise':
      return self._depthwise(node, op, x, chains)
    if kind == 'pool':
      return self._pool(node, x, chains)
    if kind == 'pad':
      return self._pad(node, op, x, chains)
    return self._set(node, np.full((1, 1, x.shape[-1]), np.nan))

  # -------------------------------------------------------------- layers

  def _start(self, node):
    """A layer's kernel: `sum of value x weight` where the filter reads
    known channels only."""
    view = self.view
    x = self.value(node.inputs[0])
    kernel = np.asarray(view.constant(node.inputs[1]), np.float64)
    transposed = node.attrs.get('transposed', False)
    if transposed:
      kernel = np.swapaxes(kernel, -1, -2)
    taps = kernel.reshape(-1, kernel.shape[-2], kernel.shape[-1])
    used = (taps != 0).any(axis=0)                        # [in, out]
    unknown = np.isnan(x).any(axis=(0, 1))
    bad = (used & unknown[:, None]).any(axis=0)
    known = np.where(np.isnan(x), 0.0, x)
    why = None
    if node.op == 'MatMul':
      out = known @ kernel
    elif transposed:
      nonzero = (used & (known != 0).any(axis=(0, 1))[:, None]).any(axis=0)
      out = np.zeros((1, 1, kernel.shape[-1]))
      out[..., nonzero] = np.nan
      why = ('(a transposed conv) spreads a removed constant over its '
             'outputs unevenly')
    else:
      out, why = self._conv(node, known, kernel)
    out = np.array(np.broadcast_to(out, out.shape), np.float64)
    out[..., bad] = np.nan
    before = np.where(bad, np.nan, 0.0)[None, None]
    chains = {}
    if out.shape[:2] != (1, 1):
      chains = dict((c, (node.name,)) for c in range(out.shape[-1]))
    self._set(node, out, chains, before, why)

  def _pads(self, node, size, kernel):
    attrs = node.attrs
    if size is None:
      return None if attrs.get('padding') == 'SAME' else [(0, 0), (0, 0)]
    return conv_pads(size, kernel, attrs['strides'], attrs['dilations'],
                     attrs.get('padding', 'VALID'))

  def _conv(self, node, x, kernel):
    """(output value, why it is unknown) of a Conv2D of the known `x`."""
    size = self._size(node.inputs[0])
    pads = self._pads(node, size, kernel.shape[:2])
    attrs = node.attrs
    if x.shape[:2] == (1, 1) and (pads is not None and not np.any(pads) or
                                  not x.any()):
      return x @ kernel.reshape(-1, kernel.shape[-2], kernel.shape[-1]).sum(
          axis=0), None
    if pads is None or size is None:
      reads = ((kernel != 0).any(axis=(0, 1)) & x.any(axis=(0, 1))[:, None])
      out = np.zeros((1, 1, kernel.shape[-1]))
      out[..., reads.any(axis=0)] = np.nan
      return out, 'pads with zeros an input whose size is not known'
    return conv_map(full(x, size), kernel, pads, attrs['strides'],
                    attrs['dilations']), None

  def _depthwise(self, node, op, x, chains):
    kernel = np.asarray(self.view.constant(node.inputs[1]), np.float64)
    size = self._size(node.inputs[0])
    pads = self._pads(node, size, kernel.shape[:2])
    m = op.extra
    zero = ~(kernel != 0).reshape(-1, kernel.shape[2] * m).any(axis=0)
    unknown = np.repeat(np.isnan(x).any(axis=(0, 1)), m)
    known = np.where(np.isnan(x), 0.0, x)
    attrs = node.attrs
    why = None
    if x.shape[:2] == (1, 1) and pads is not None and not np.any(pads):
      out = (known[0, 0, :, None] * kernel.sum(axis=(0, 1))).reshape(
          1, 1, -1)
    elif pads is not None and size is not None:
      out = depthwise_map(full(known, size), kernel, pads, attrs['strides'],
                          attrs['dilations'])
    else:
      out = np.zeros((1, 1, kernel.shape[2] * m))
      out[..., np.repeat(known.any(axis=(0, 1)), m)] = np.nan
      why = '(depthwise) pads with zeros an input whose size is not known'
    out = np.array(out)
    out[..., unknown & ~zero] = np.nan
    spread = dict((c * m + k, chain + (node.name,))
                  for c, chain in chains.items() for k in range(m))
    for c in range(out.shape[-1]):
      if c not in spread:
        spread[c] = (node.name,)
    self._set(node, out, spread, np.repeat(x, m, axis=-1), why)

  # -------------------------------------------------------------- ops

  def _elementwise(self, node, op, inputs):
    args, chains = [], {}
    for index, tensor in enumerate(node.inputs):
      if index in op.inputs:
        args.append(inputs[index])
        for c, chain in self.chains.get(tensor, {}).items():
          if chains.get(c, chain) != chain:
            chain = ('mixed',)
          chains[c] = chain
      elif index in op.params:
        args.append(_param(self.view.constant(tensor)))
      else:                                   # depends on the example
        args.append(np.full((1, 1, 1), np.nan))
    out = op.rule.value(lambda key, default: node.attrs.get(key, default),
                        *args)
    out = np.asarray(out, np.float64)
    if out.ndim < 3:
      out = np.broadcast_to(out, (1, 1, inputs[op.inputs[0]].shape[-1]))
    crop, upsample = node.attrs.get('crop'), node.attrs.get('upsample')
    if crop or upsample:
      return self._resize(node, out, chains, crop, upsample)
    self._set(node, out, chains)

  def _resize(self, node, x, chains, crop, upsample):
    """A `Cropping2D` or an `UpSampling2D`: a constant stays that constant;
    a map is cropped, or repeated (nearest; bilinear: unknown)."""
    if x.shape[:2] == (1, 1):
      return self._set(node, x)
    if crop:
      (top, bottom), (left, right) = crop
      out = x[top:x.shape[0] - bottom, left:x.shape[1] - right]
      chains = dict((c, chain + (node.name,)) for c, chain in chains.items())
      return self._set(node, out, chains)
    if node.attrs.get('interpolation', 'nearest') == 'nearest':
      out = np.repeat(np.repeat(x, upsample[0], axis=0), upsample[1], axis=1)
      chains = dict((c, chain + (node.name,)) for c, chain in chains.items())
      return self._set(node, out, chains)
    varies = np.array([is_map(x, c) for c in range(x.shape[-1])])
    out = np.where(varies, np.nan, x[:1, :1])
    self._set(node, out, None, x[:1, :1], 'resizes a map other than by '
              'repeating it (%s)' % node.attrs.get('interpolation'))

  def _concat(self, node, op, inputs):
    inputs = [inputs[i] if inputs[i] is not None else
              np.full((1, 1, width), np.nan)
              for i, width in enumerate(op.extra)]
    sizes = [v.shape[:2] for v in inputs if v.shape[:2] != (1, 1)]
    if sizes:
      inputs = [full(v, sizes[0]) for v in inputs]
    chains, offset = {}, 0
    for tensor, width in zip(node.inputs, op.extra):
      for c, chain in self.chains.get(tensor, {}).items():
        chains[offset + c] = chain
      offset += width
    self._set(node, np.concatenate(inputs, axis=-1), chains)

  def _reshape(self, node, op, x):
    rows = op.extra
    if x.shape[:2] == (1, 1):
      return self._set(node, np.tile(x[0, 0], rows)[None, None],
                       dict(self.chains.get(node.inputs[0], {})))
    if x.shape[0] * x.shape[1] == rows:
      return self._set(node, x.reshape(1, 1, -1))
    varies = np.tile([is_map(x, c) for c in range(x.shape[-1])], rows)
    self._set(node, np.where(varies, np.nan, np.tile(x[0, 0], rows))[
        None, None], None, np.tile(x[0, 0], rows)[None, None],
              'puts the positions of a map into the batch')

  def _pool(self, node, x, chains):
    if x.shape[:2] == (1, 1):    # max ignores padding, avg counts valid only
      return self._set(node, x)
    attrs = node.attrs
    size = self._size(node.inputs[0])
    pads = conv_pads(size, attrs['ksize'], attrs['strides'], [1, 1],
                     attrs.get('padding', 'VALID'))
    out = pool_map(x, node.op, attrs['ksize'], pads, attrs['strides'])
    chains = dict((c, chain + (node.name,)) for c, chain in chains.items())
    self._set(node, out, chains)

  def _pad(self, node, op, x, chains):
    pads, fill, mode = op.extra
    size = self._size(node.inputs[0])
    if not np.any(pads) or (mode != 'CONSTANT' and x.shape[:2] == (1, 1)):
      return self._set(node, x, chains)
    if size is None:
      varies = np.isnan(x).any(axis=(0, 1)) | (x != fill).any(axis=(0, 1))
      out = np.where(varies, np.nan, x)
      return self._set(node, out, None, x, 'pads an input whose size is not '
                       'known')
    out = np.pad(full(x, size), [tuple(p) for p in pads] + [(0, 0)],
                 'constant' if mode == 'CONSTANT' else mode.lower(),
                 **({'constant_values': fill} if mode == 'CONSTANT' else {}))
    chains = dict(chains)
    for c in range(out.shape[-1]):
      chains[c] = chains.get(c, ()) + (node.name,)
    self._set(node, out, chains)
