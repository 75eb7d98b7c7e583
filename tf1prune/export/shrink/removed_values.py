"""What an emptied channel is at each tensor of a region: a known constant.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.frozen_graph import FrozenGraph
    >>> from tf1prune.export.shrink.regions import explore, find_layers
    >>> from tf1prune.export.shrink.removed_values import propagate
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 3, 3, 1], name='x')
    ...   a = tf.nn.conv2d(x, tf.zeros([1, 1, 1, 1]), [1] * 4, 'SAME', name='a')
    ...   h = tf.pad(tf.nn.relu(a + 2.0), [[0, 0], [1, 0], [0, 0], [0, 0]])
    ...   y = tf.nn.conv2d(h, tf.ones([2, 1, 1, 1]), [1] * 4, 'VALID', name='y')
    >>> view = FrozenGraph(g.as_graph_def(), ['y'])
    >>> region = explore(view, find_layers(view)[0], 'a')
    >>> values, _ = propagate(view, region)
    >>> values[h.op.name][:, :, 0].tolist()   # 2 inside, the padded row 0
    [[0.0, 0.0, 0.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]

The output of a layer whose filter is all zero is 0 everywhere; the ops of a
region turn it into a value per channel (`[1, 1, C]`) or, after a border map,
an explicit Pad or a padded depthwise conv, a map over the positions
(`[H, W, C]`, which a slice of the positions cuts), computed here in float64
NumPy. A value that cannot be known
is NaN: the output of a filter that is not all zero (it varies per example;
a product with 0 is 0 all the same), a map whose height or width is unknown,
what a map broadcast over the channels makes of a channel (the reason is
returned, with the op that made it unknown).
"""

import numpy as np

from tf1prune.channels.table import constant_through
from tf1prune.export.shrink.editable import outputs_of
from tf1prune.export.shrink.split import split_values
from tf1prune.export.shrink.border_maps import map_value
from tf1prune.export.shrink.padding import (conv_map, conv_pads,
                                            depthwise_map, pool_map)
from tf1prune.export.shrink.frozen_graph import attr_ints, attr_str, split_input


def spatial_size(g, tensor):
  """[H, W] of a rank-4 tensor (a name, maybe with a port) if both are
  known, else None."""
  shape = g.shapes.get(g.key(tensor))
  if not shape or len(shape) != 4 or None in shape[1:3]:
    return None
  return shape[1:3]


def full(value, size):
  """A `[1, 1, C]` or `[H, W, C]` value as `[H, W, C]`."""
  return np.broadcast_to(value, (size[0], size[1], value.shape[-1]))


def layer_pads(g, node, kernel):
  """Zero padding of a Conv2D or depthwise `node`, [(top, bottom), (left,
  right)]; None if it pads (or may pad) an input of unknown size (SAME
  padding of a kernel that spans one position pads nothing, whatever the
  size)."""
  padding = attr_str(node, 'padding', 'VALID')
  size = spatial_size(g, node.input[0])
  dilations = attr_ints(node, 'dilations', [1] * 4)[1:3]
  if padding == 'SAME' and size is None:
    if any((k - 1) * d for k, d in zip(kernel, dilations)):
      return None
    return [(0, 0), (0, 0)]
  pads = conv_pads(size, kernel, attr_ints(node, 'strides', [1] * 4)[1:3],
                   dilations, padding,
                   attr_ints(node, 'explicit_paddings', [0] * 8))
  return pads if size is not None or not np.any(pads) else None


def extra_count(g, layer):
  """How many of `layer`'s last input channels are extra channels."""
  return sum(rows for rows, _ in g.extra.get(layer.node.name, ()))


def empty_filters(g, layer):
  """bool [O]: the outputs of `layer` whose weights on its data inputs (the
  extra channels left out) are all zero."""
  weight = g.value(layer.weight)
  count = extra_count(g, layer)
  if count:   # a conv's
    weight = weight[:, :, :weight.shape[2] - count]
  weight = np.moveaxis(weight, layer.out_axis, -1)
  return ~weight.reshape(-1, weight.shape[-1]).any(axis=0)


def source_value(g, layer):
  """float64 [1, 1, O] or [H', W', O]: what `layer` outputs where its data
  weights are zero (0, or what its extra channels and its border map give);
  NaN for the outputs whose data weights are not all zero (they vary per
  example) and where the extra channels give a map of unknown size."""
  value = _extra_value(g, layer)
  added = map_value(g, layer)
  value = value if added is None else value + added
  return np.where(empty_filters(g, layer), value, np.nan)


def _extra_value(g, layer):
  """What `layer`'s extra channels give its outputs."""
  weight = g.value(layer.weight)
  count = extra_count(g, layer)
  if not count:
    return np.zeros((1, 1, weight.shape[layer.out_axis]))
  size = spatial_size(g, layer.node.input[0])
  pads = layer_pads(g, layer.node, weight.shape[:2])
  if size is None and pads is not None and not np.any(pads) and all(
      pattern is None for _, pattern in g.extra[layer.node.name]):
    # Channels of ones that nothing pads: the same at every position.
    rows = weight[:, :, weight.shape[2] - count:].astype(np.float64)
    return rows.sum(axis=(0, 1, 2)).reshape(1, 1, -1)
  if size is None or pads is None:
    # A map of unknown size, but 0 where the extra weights are.
    rows = weight[:, :, weight.shape[2] - count:]
    return np.where(rows.reshape(-1, rows.shape[-1]).any(axis=0), np.nan,
                    0.0).reshape(1, 1, -1)
  patterns = [np.ones(list(size) + [rows]) if pattern is None else pattern
              for rows, pattern in g.extra[layer.node.name]]
  return conv_map(np.concatenate(patterns, axis=-1),
                  weight[:, :, weight.shape[2] - count:], pads,
                  attr_ints(layer.node, 'strides', [1] * 4)[1:3],
                  attr_ints(layer.node, 'dilations', [1] * 4)[1:3])


def _unknown(x, per, reasons, node, why):
  """NaN where `x` is not 0 everywhere (each input channel gives `per`)."""
  zero = ~np.any(x, axis=(0, 1))
  reasons.append((node.name, node.op, why))
  return np.where(np.repeat(zero, per), 0.0, np.nan)[None, None]


def _const4(g, const):
  value = g.value(const).astype(np.float64)
  if value.ndim == 4:
    return value[0]
  return value.reshape((1, 1, -1)) if value.size > 1 else value.reshape(())


def _depthwise(g, op, x, reasons):
  """The depthwise conv's output; an output whose filter is all zero is 0,
  whatever its input."""
  node, weight = op.node, g.value(op.const).astype(np.float64)
  zero = ~weight.reshape(-1, weight.shape[2] * weight.shape[3]).any(axis=0)
  return np.where(zero, 0.0, _depthwise_value(g, node, weight, x, reasons))


def _depthwise_value(g, node, weight, x, reasons):
  pads = layer_pads(g, node, weight.shape[:2])
  strides = attr_ints(node, 'strides', [1] * 4)[1:3]
  dilations = attr_ints(node, 'dilations', [1] * 4)[1:3]
  if x.shape[:2] == (1, 1) and pads is not None and not np.any(pads):
    return (x[0, 0, :, None] * weight.sum(axis=(0, 1))).reshape(1, 1, -1)
  size = spatial_size(g, node.input[0])
  if pads is None or size is None:
    return _unknown(x, weight.shape[-1], reasons, node,
                    'the input size of this depthwise conv is unknown: it '
                    'zero-pads a removed channel that is not 0 into a map '
                    'over the positions')
  return depthwise_map(full(x, size), weight, pads, strides, dilations)


def _elementwise(g, op, inputs, reasons):
  """The op's output (`tf1prune.channels.constant_through`): a map it
  broadcasts over the channels (`op.loose`) is not known."""
  args, values = [], iter(inputs)
  for index in range(len(g.inputs(op.node))):
    if index in op.inputs:
      args.append(next(values))
    elif index in op.loose:
      args.append(np.full((1, 1, 1), np.nan))
    else:
      args.append(_const4(g, op.const))
  out = constant_through(op.rule, lambda key, default: g.attr(
      op.node, key, default), *args)
  if op.loose and _new_nan(inputs, out):
    map_name = split_input(g.inputs(op.node)[op.loose[0]])[0]
    reasons.append((op.node.name, op.node.op, (
        'it broadcasts %s, a map that varies per example, over the '
        'channels: a removed channel that is not 0 is no constant after '
        'it' if op.rule.product else 'it broadcasts %s, a map that varies '
        'per example, over the channels: a removed channel is no constant '
        'after it') % map_name))
  return out


def _pad(g, op, x, size, reasons):
  pads, fill, mode = op.extra
  node = op.node
  if not np.any(pads):
    return x
  if mode != 'CONSTANT':
    if x.shape[:2] == (1, 1):    # mirroring a constant gives the constant
      return x
    if size is None:
      return _unknown(x, 1, reasons, node, 'the input size of this '
                      'MirrorPad is unknown')
    return np.pad(full(x, size), [tuple(p) for p in pads] + [(0, 0)],
                  mode.lower())
  if size is None:
    if fill:
      return _unknown(np.ones_like(x), 1, reasons, node,
                      'the input size of this Pad is unknown')
    return _unknown(x, 1, reasons, node, 'the input size of this Pad is '
                    'unknown')
  return np.pad(full(x, size), [tuple(p) for p in pads] + [(0, 0)],
                'constant', constant_values=fill)


def _reshape(g, op, x, reasons):
  rows = op.extra
  if x.shape[:2] == (1, 1):
    return np.tile(x[0, 0], rows)[None, None]
  if x.shape[0] * x.shape[1] == rows:
    return x.reshape(1, 1, -1)
  # Positions become rows of the batch: a channel the same everywhere
  # stays a constant, a map does not.
  uniform = np.all(x == x[:1, :1], axis=(0, 1))
  if (~uniform & np.isfinite(x).all(axis=(0, 1))).any():
    reasons.append((op.node.name, op.node.op, 'the reshape puts the '
                    'positions of a map into the batch: a removed channel '
                    'that varies over the positions is no constant after '
                    'it'))
  return np.tile(np.where(uniform, x[0, 0], np.nan), rows)[None, None]


def _spatial(g, op, x, reasons):
  """What SpaceToBatchND, BatchToSpaceND or a resize makes of a removed
  channel: a constant stays that constant, except that SpaceToBatchND's
  zero padding makes one that is not 0 depend on the position and the
  block (as a Pad would, per block: not followed); a map over the
  positions is not followed."""
  node = op.node
  kind, _, pads = op.extra
  if x.shape[:2] != (1, 1):
    return _unknown(x, 1, reasons, node, 'this %s moves the positions of a '
                    'map: a removed channel that varies over the positions '
                    'is no constant after it' % node.op)
  if kind == 'SpaceToBatchND' and np.any(pads):
    return _unknown(x, 1, reasons, node, 'this SpaceToBatchND zero-pads a '
                    'removed channel that is not 0: its value then depends '
                    'on the position')
  return x


def _collapse(value):
  """`value` as `[1, 1, C]` where it is the same at every position (a map
  that a product with 0 made constant), else as it is."""
  if value.ndim != 3 or value.shape[:2] == (1, 1):
    return value
  first = value[:1, :1]
  same = (value == first) | (np.isnan(value) & np.isnan(first))
  return first if same.all() else value


def _finite(value):
  """bool per channel: finite at every position."""
  value = np.asarray(value)
  return np.isfinite(value).reshape(-1, value.shape[-1] if value.ndim else 1
                                    ).all(axis=0)


def _new_nan(inputs, out):
  """True if a channel of `out` is not finite somewhere though every input
  is finite in the channels it reads (a depthwise multiplier repeats them;
  otherwise the widths must match, or every input must be finite)."""
  known = _finite(out)
  kept = np.ones(known.size, bool)
  for value in inputs:
    finite = _finite(value)
    if finite.size in (1, kept.size):
      kept = kept & finite
    elif kept.size % finite.size == 0:
      kept = kept & np.repeat(finite, kept.size // finite.size)
    else:
      kept = kept & finite.all()
  return bool((kept & ~known).any())


def _apply(g, op, inputs, reasons):
  """The value of `op`'s output from its inputs' values (`tf1prune.channels`
  gives the NumPy function of each element-wise op and reduction)."""
  node, kind, x = op.node, op.kind, inputs[0]
  if kind == 'elementwise':
    return _elementwise(g, op, inputs, reasons)
  if kind == 'concat':
    shapes = [v.shape[:2] for v in inputs if v.shape[:2] != (1, 1)]
    if shapes:
      inputs = [full(v, shapes[0]) for v in inputs]
    return np.concatenate(inputs, axis=-1)
  if kind == 'depthwise':
    return _depthwise(g, op, x, reasons)
  if kind == 'reshape':
    return _reshape(g, op, x, reasons)
  if kind == 'slice':   # the positions it takes; a constant stays
    return x if x.shape[:2] == (1, 1) else x[op.extra[0], op.extra[1]]
  if kind == 'spatial':
    return _spatial(g, op, x, reasons)
  if kind == 'split':
    return split_values(op, x)
  if kind == 'lrn':
    value = op.rule.value(None, x)
    if np.isnan(value).any():
      reasons.append((node.name, node.op, op.rule.why))
    return value
  size = spatial_size(g, node.input[0])
  if kind == 'reduce':
    value = op.rule.value(x, None if size is None else size[0] * size[1])
    if _new_nan([x], value):   # only a Sum counts the positions
      reasons.append((node.name, node.op, 'the input size of this Sum is '
                      'unknown: it sums a removed channel that is not 0 '
                      'over an unknown number of positions'))
    return value
  if kind == 'pool':
    if x.shape[:2] == (1, 1):   # max ignores padding, avg counts valid only
      return x
    kernel = attr_ints(node, 'ksize', [1] * 4)[1:3]
    strides = attr_ints(node, 'strides', [1] * 4)[1:3]
    pads = conv_pads(size, kernel, strides, [1, 1],
                     attr_str(node, 'padding', 'VALID'),
                     attr_ints(node, 'explicit_paddings', [0] * 8))
    return pool_map(x, node.op, kernel, pads, strides)
  if kind == 'pad':
    return _pad(g, op, x, size, reasons)
  raise ValueError('unknown region op kind %r' % kind)


def propagate(g, region, position=None):
  """Values of every region tensor when its sources output 0.

  Args:
    g: the `FrozenGraph`.
    region: a `Region`.
    position: {node name: topological index}; computed when None.

  Returns:
    ({tensor: float64 [1, 1, C] or [H, W, C]}, [(node, op, reason)] where
    values could not be known: the node is the op whose output they are).
  """
  if position is None:
    position = {name: i for i, name in enumerate(g.order())}
  values, reasons = {}, []
  for layer in region.sources:
    values[layer.node.name] = source_value(g, layer)
    if np.isnan(values[layer.node.name][..., empty_filters(g, layer)]).any():
      reasons.append((layer.node.name, layer.node.op, (
          'its input size is unknown, and it reads removed channels as '
          'extra input channels that it zero-pads: what they give its '
          'outputs varies over the positions')))
  with np.errstate(all='ignore'):
    for op in sorted(region.ops, key=lambda o: position[o.node.name]):
      inputs = []
      for index in op.inputs:
        name = g.key(op.node.input[index])
        inputs.append(values.get(name, np.full(
            (1, 1, region.ids[name].size), np.nan)))
      count = len(reasons)
      outs = _apply(g, op, inputs, reasons)
      for name, out in zip(outputs_of(g, op), outs if op.kind == 'split'
                           else [outs]):
        values[name] = _collapse(np.asarray(out, np.float64))
        if op.kind != 'split' and len(reasons) == count and _new_nan(
            inputs, values[name]):
          reasons.append((op.node.name, op.node.op, 'the constant a '
                          'removed channel has is not finite after this %s'
                          % op.node.op))
  for name, ids in region.ids.items():
    if name not in values:
      values[name] = np.full((1, 1, ids.size), np.nan)
  return values, reasons
