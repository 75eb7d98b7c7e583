"""Removes the emptied channels of one region and folds what they gave.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.frozen_graph import FrozenGraph
    >>> from tf1prune.export.shrink.regions import explore, find_layers
    >>> from tf1prune.export.shrink.rewrite import shrink_region
    >>> w = np.ones([2, 3], np.float32); w[:, 1] = 0.0
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 2], name='x')
    ...   h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w, name='a'), [1., 2., 3.]))
    ...   y = tf.matmul(h, np.ones([3, 1], np.float32), name='y')
    >>> view = FrozenGraph(g.as_graph_def(), ['y'])
    >>> region = explore(view, find_layers(view)[0], 'a')
    >>> shrink_region(view, region, True)
    (1, [])
    >>> sink, _ = region.sinks[0]
    >>> view.value(sink.weight).shape, view.nodes['y'].op   # y: an Add now
    ((2, 1), 'Add')

A class of the region is removed when its value is a known constant
wherever it is used (at the sinks' inputs, and at an LRN): every source
filter of it is all zero, or a product with 0 after the filters that are
not makes it 0 (a batch norm scale of 0, a zero channel times a gate);
no use of the region pins it, and every sink can take it. One class of each
tensor stays, so that no tensor is empty. Removing a class deletes it from the
sources' weights (output axis), the per-channel constants of the region
ops, the depthwise weights (input axis), reshape targets, the explicit
channel end (or size) of a slice of the positions, and the sinks' weights
(input axis). What the removed inputs gave a sink, when it is the
same at every output position, is added to the sink's bias (or by a new Add
of a `[C]` constant when it has none); where a zero-padded conv (or a value
that varies over the positions) makes it vary, it is a map over the conv's
output: with objective 'flops' it is added with the conv's bias, one
constant (`border_maps`), where the conv's output height and width are
static and the conv is not a graph output; otherwise the conv reads the
removed values as extra input channels (`extra_channels`), unless, with
objective 'params', their pattern would cost more parameters than the
channels (then they stay); `fold_borders=False`: such channels stay unless
their value is 0.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink import lrn, split
from tf1prune.export.shrink.editable import output_sizes, outputs_of
from tf1prune.export.shrink.border_maps import (drop_map_outputs, own_bias,
                                                record_map, takes_map)
from tf1prune.export.shrink.frozen_graph import attr_ints, split_input
from tf1prune.export.shrink.report import ShrinkStop
from tf1prune.export.shrink.padding import conv_map
from tf1prune.export.shrink.extra_channels import append_channels, extra_channels
from tf1prune.export.shrink.removed_values import (empty_filters, full, layer_pads,
                                                   propagate, spatial_size)


def _insert_add(g, after, value):
  """Adds constant `value` to node `after`'s output with a new Add node.

  The Add takes over every consumer of `after`; if `after` is a graph output,
  the Add takes its name and `after` becomes `<after>/shrink_unfolded`.
  Returns the new const's name.
  """
  base = after + ('/shrink_unfolded' if after in g.outputs else '/shrink_fold')
  name, i = base, 1
  while name in g.nodes or name + '/value' in g.nodes:
    name, i = '%s_%d' % (base, i), i + 1
  dtype = tf.as_dtype(value.dtype).as_datatype_enum
  const = g.graph_def.node.add(name=name + '/value', op='Const')
  const.attr['dtype'].type = dtype
  add = g.graph_def.node.add(name=name, op='Add', input=[after, const.name])
  add.attr['T'].type = dtype
  if after in g.outputs:        # swap names: the output keeps its name
    original = g.nodes[after]
    original.name, add.name = name, after
    add.input[0] = name
    g.nodes[name], g.nodes[after] = original, add
    g.users[name] = [(add, 0, 0)]
    g.shapes[name] = g.shapes.get(after)
  else:
    for node, index, _ in g.users.get(after, []):
      node.input[index] = name
    g.users[name] = g.users.pop(after, [])
    g.users[after] = [(add, 0, 0)]
    g.nodes[name] = add
    g.shapes[name] = g.shapes.get(after)
  g.nodes[const.name] = const
  g.users[const.name] = [(add, 1, 0)]
  g.set_value(const.name, value)
  return const.name


def _contribution(g, layer, x, rows):
  """What inputs `rows` of `layer`, of value `x` [h, w, r], add to its
  output: float64 [O] or [H', W', O]."""
  weight = g.value(layer.weight).astype(np.float64)
  if layer.kind == 'dense':
    return x.reshape(-1).dot(weight[rows])
  kernel = weight[:, :, rows, :]
  pads = layer_pads(g, layer.node, weight.shape[:2])
  if x.shape[:2] == (1, 1) and not np.any(pads):
    return x.reshape(-1).dot(kernel.sum(axis=(0, 1)))
  size = spatial_size(g, layer.node.input[0])
  return conv_map(full(x, size), kernel, pads,
                  attr_ints(layer.node, 'strides', [1] * 4)[1:3],
                  attr_ints(layer.node, 'dilations', [1] * 4)[1:3])


def _uniform(value):
  """`value` ([O] or [H', W', O]) as [O] if it is the same everywhere."""
  if value.ndim == 3:
    center = value[value.shape[0] // 2, value.shape[1] // 2]
    if np.abs(value - center).max() <= 1e-12 * np.abs(value).max():
      return center
    return None
  return value


def _fold(g, layer, value, keep):
  """Adds `value` [O], the same at every position, to `layer`'s output:
  to its own bias, or with a new Add node (of the `keep` outputs when the
  layer loses outputs in the same region)."""
  dtype = g.value(layer.weight).dtype
  outputs = g.value(layer.weight).shape[-1]
  bias = own_bias(g, layer, outputs)
  if bias is not None:
    old = g.value(bias)
    g.set_value(bias, (old.astype(np.float64) + value).astype(old.dtype))
  elif np.any(value):
    value = value[keep] if keep is not None else value
    const = _insert_add(g, layer.node.name, value.astype(dtype))
    g.folded.setdefault(layer.node.name, []).append(const)


def _sink_update(g, layer, x, rows, keep, objective):
  """What removing input `rows` (value `x`) of sink `layer` needs: None
  (folded into its bias, or, for objective 'flops', a map added with it:
  `border_maps`), or the extra channels (pattern, weights) that carry it to
  a padded conv."""
  if not np.any(x):
    return None
  if layer.kind == 'conv' and layer_pads(
      g, layer.node, g.value(layer.weight).shape[:2]) is None:
    # SAME padding of an unknown size, for values the same everywhere
    # (`_decide`): one ones channel per distinct vector, padded by the
    # conv as the data is.
    kernel = g.value(layer.weight)[:, :, rows, :]
    pattern, weights, _ = extra_channels(x, kernel)
    return pattern, weights, None
  value = _contribution(g, layer, x, rows)
  uniform = _uniform(value)
  if uniform is not None:
    _fold(g, layer, uniform, keep)
    return None
  if objective == 'flops' and takes_map(g, layer, value):
    record_map(g, layer, value)
    return None
  kernel = g.value(layer.weight)[:, :, rows, :]
  pattern, weights, base = _cheapest_channels(g, layer, x, kernel)
  if base is not None:
    _fold(g, layer, _contribution(g, layer, base[None, None], rows), keep)
  return pattern, weights, _padded_ones(g, layer, pattern)


def _cheapest_channels(g, layer, x, kernel):
  """`extra_channels` of `x` for `layer`: ones padded like the data where
  that is the pattern, else with the interior value in the bias where the
  conv reads no padding and that saves a channel."""
  pattern, weights, base = extra_channels(x, kernel)
  if _padded_ones(g, layer, pattern) is not None or not _unpadded(g, layer):
    return pattern, weights, base
  folded = extra_channels(x, kernel, fold=True)
  return folded if folded[1].shape[2] < weights.shape[2] else (
      pattern, weights, base)


def _unpadded(g, layer):
  """True if conv `layer` reads no padding (a constant input gives the same
  output everywhere)."""
  pads = layer_pads(g, layer.node, g.value(layer.weight).shape[:2])
  return pads is not None and not np.any(pads)


def _padded_ones(g, layer, pattern):
  """(tensor, paddings) if `pattern` is ones that the Pad before `layer`
  pads with zeros, else None."""
  if pattern is None or pattern.shape[-1] != 1:
    return None
  node = g.nodes.get(split_input(layer.node.input[0])[0])
  if node is None or node.op not in ('Pad', 'PadV2') or \
      split_input(layer.node.input[0])[1] != 0:
    return None
  pads = g.const_behind(node.input[1])
  fill = g.const_behind(node.input[2]) if node.op == 'PadV2' else np.zeros(1)
  size = spatial_size(g, node.input[0])
  if pads is None or fill is None or size is None or pads.shape != (4, 2) \
      or np.any(pads[[0, 3]]) or np.any(fill):
    return None
  ones = np.pad(np.ones(size), [tuple(p) for p in pads[1:3].tolist()],
                'constant')
  if ones.shape != pattern.shape[:2] or np.any(ones != pattern[..., 0]):
    return None
  return node.input[0], pads


def _meeting(g, region, position, classes, cls, kept):
  """The first op of `region` where class `cls` from filters that are all
  empty meets `cls` from a kept filter (a residual add, a sub, a product):
  kept is {layer output: whether its filter of `cls` is kept}. A product of
  two tensors of the same filters (swish's x * sigmoid(x)) is no meeting."""
  keeps = dict(kept)
  for op in sorted(region.ops, key=lambda o: position.get(o.node.name, 0)):
    seen = [keeps[t] for t in (g.key(op.node.input[i]) for i in op.inputs)
            if t in keeps and cls in classes[t]]
    if not seen:
      continue
    if len(set(seen)) > 1:
      return op.node
    for tensor in outputs_of(g, op):
      keeps[tensor] = seen[0]
  return None


def _exits(region):
  """The tensors of `region` where its channels' values are used: the
  sinks' inputs and the LRNs' outputs (an LRN sums its channels' squares:
  a removed channel must be 0 there, which its value there says)."""
  tensors = set(tensor for _, tensor in region.sinks)
  tensors.update(op.output for op in region.ops if op.kind == 'lrn')
  return tensors


def _first_unknown(g, values, classes, c, caused):
  """(node, op, reason) where class `c` first stops being a known value:
  the reason its op gave, else that it is not a known constant there."""
  for tensor, value in values.items():
    bad = ~np.isfinite(value).all(axis=(0, 1))
    if bad[classes[tensor] == c].any():
      if tensor in caused:
        return caused[tensor]
      op = g.nodes[split_input(tensor)[0]].op
      return (tensor, op, 'the removed channel is not a known constant '
              'after this %s' % op)
  raise ValueError('internal error: channel class %d is not known at a use '
                   'of its region, yet known everywhere' % c)


def _decide(g, region, fold_borders, position, classes, values, reasons,
            objective):
  """({class: (node, op, reason)} of emptied channels that stay, the
  classes that go).

  A class goes when its value at every exit of the region (`_exits`) is
  known (every source filter of it empty, or a product with 0 after the
  ones that are not), nothing pins it, and every sink can take it; the
  filters of its sources go with it, empty or not.
  """
  block, dead, live = {}, set(), set()
  for tensor, why in region.pins:
    for c in classes[tensor]:
      block.setdefault(c, why)
  kept = {}
  for layer in region.sources:
    empty = empty_filters(g, layer)
    for c, is_empty in zip(classes[layer.node.name], empty):
      (dead if is_empty else live).add(c)
      kept[layer.node.name, c] = not is_empty
  unknown = set()
  for tensor in _exits(region):
    bad = ~np.isfinite(values[tensor]).all(axis=(0, 1))
    unknown.update(classes[tensor][bad].tolist())
  for c in dead & live & unknown:
    node = _meeting(g, region, position, classes, c, dict(
        (name, keeps) for (name, cls), keeps in kept.items() if cls == c))
    where = (node.name, node.op) if node is not None else ('', '')
    block.setdefault(c, where + ('not every member of this add drops the '
                                 'channel: another layer keeps it',))
  caused = dict((r[0], r) for r in reasons)   # the op whose output it is
  for c in sorted(dead & unknown):
    if c not in block:
      block[c] = _first_unknown(g, values, classes, c, caused)
  for c in unknown:
    block.setdefault(c, ('', '', 'its value varies per example'))
  for layer, tensor in region.sinks:
    if layer.kind in ('conv_transpose', 'conv3d'):
      _zero_only(layer, classes[tensor], values[tensor], block)
    if layer.kind != 'conv':
      continue
    value = values[tensor]
    pads = layer_pads(g, layer.node, g.value(layer.weight).shape[:2])
    nonzero = np.any(value, axis=(0, 1))
    node = (layer.node.name, layer.node.op)
    if pads is None and (not fold_borders or value.shape[:2] != (1, 1)):
      # The same value everywhere reaches it as a ones channel that the conv
      # pads itself, whatever the size; a map needs the size.
      limit = 'the input size of %s is unknown' % layer.node.name
    elif pads is None:
      continue
    elif not fold_borders and (np.any(pads) or value.shape[:2] != (1, 1)):
      limit = '%s zero-pads its input (fold_borders=False)' % layer.node.name
    else:
      continue
    for c in classes[tensor][nonzero]:
      block.setdefault(c, node + (limit + ': only channels whose constant '
                                  'is 0 are removed',))
  goes = set(c for t in region.ids for c in classes[t].tolist()
             if c not in block)
  while True:   # each keeps channels, which may change what the other says
    count = len(block)
    _block_costly_maps(g, region, classes, values, goes, block, position,
                       objective)
    for tensor in region.ids:
      _keep_some(g, tensor, classes[tensor], goes, block)
    if len(block) == count:
      return block, set(c for c in goes if c not in block)


def _zero_only(layer, classes, value, block):
  """Keeps the channels that a transposed conv or a Conv3D reads whose
  constant is not 0: what they give its outputs is not followed."""
  for c in classes[np.any(value, axis=(0, 1))]:
    block.setdefault(c, (layer.node.name, layer.node.op, (
        '%s is a %s: only channels whose constant is 0 are removed before '
        'it' % (layer.node.name, layer.node.op))))


def _write_output_channels(g, layer, kept):
  """Writes `kept` as the channel count of transposed conv `layer`'s
  output shape (`editable.output_sizes`)."""
  const = output_sizes(g, layer.node)
  value = g.value(const).copy()
  if value.ndim:
    value[-1] = kept
  else:
    value = np.asarray(kept, value.dtype)
  g.set_value(const, value)


def _keep_some(g, tensor, classes, goes, block):
  """Keeps the first classes of `tensor` that would go, so that one channel
  stays (two in `g.keep_two`, where it has two: a conv with one input and
  one output channel is what TF 2.x's oneDNN kernels get wrong)."""
  need = min(2 if tensor in g.keep_two else 1, classes.size)
  staying = sum(1 for c in classes if c not in goes or c in block)
  for c in classes:
    if staying >= need:
      return
    if c in goes and c not in block:
      block[c] = (tensor, g.nodes[split_input(tensor)[0]].op, (
          'every output channel is empty; one is kept' if need == 1 else
          'a conv that reads or writes it would have one input and one '
          'output channel, which TF 2.x\'s oneDNN kernels compute wrongly '
          'or not at all: two are kept'))
      staying += int((classes == c).sum())


def _padded_before(g, region, position, classes, c, sink):
  """(name, op) of the last padded depthwise conv, Pad or pool before `sink`
  that holds class `c`: where a constant channel became a map."""
  limit = position.get(sink.node.name, len(position))
  found = (sink.node.name, sink.node.op)
  for op in sorted(region.ops, key=lambda o: position.get(o.node.name, 0)):
    if position.get(op.node.name, 0) >= limit:
      break
    if op.kind in ('depthwise', 'pad', 'pool') and c in classes[op.output]:
      found = (op.node.name, op.node.op)
  return found


def _block_costly_maps(g, region, classes, values, goes, block, position,
                       objective):
  """Keeps the channels whose values vary over the positions at a conv that
  would need a `[1, H, W, k]` pattern for them costing more parameters than
  its weights on them (`objective='params'`; for 'flops' the extra channels
  never outnumber the rows they replace, so nothing is kept)."""
  if objective == 'flops':
    return
  for layer, tensor in region.sinks:
    if layer.kind != 'conv':
      continue
    rows = np.array([i for i, c in enumerate(classes[tensor])
                     if c in goes and c not in block], np.int64)
    x = values[tensor][..., rows] if rows.size else None
    if x is None or x.shape[:2] == (1, 1) or not np.isfinite(x).all() or \
        layer_pads(g, layer.node, g.value(layer.weight).shape[:2]) is None:
      continue
    if _uniform(_contribution(g, layer, x, rows)) is not None:
      continue
    kernel = g.value(layer.weight)[:, :, rows, :]
    pattern, weights, _ = _cheapest_channels(g, layer, x, kernel)
    if pattern is None or _padded_ones(g, layer, pattern) is not None or \
        pattern.size + weights.size < kernel.size:
      continue
    flat = x.reshape(-1, rows.size)
    varying = flat.max(axis=0) != flat.min(axis=0)
    for c in classes[tensor][rows[varying]]:
      name, op = _padded_before(g, region, position, classes, c, layer)
      block.setdefault(c, (name, op,
                           'the removed channels vary over the positions '
                           'after this zero-padded op (at %s): an exact '
                           '[1, H, W, k] pattern of them would cost more '
                           'parameters than keeping them (shrink objective '
                           'params)' % layer.node.name))


def may_shrink(g, region):
  """True if `region` may lose a channel: a source has an empty filter, or
  an op multiplies a channel by 0 (a per-channel constant with a 0, a
  depthwise filter of zeros)."""
  if any(empty_filters(g, layer).any() for layer in region.sources):
    return True
  for op in region.ops:
    if op.kind == 'elementwise' and op.rule.product and op.const is not None \
        and not np.all(g.value(op.const)):
      return True
    if op.kind == 'depthwise' and not np.all(g.value(op.const).reshape(
        -1, np.prod(g.value(op.const).shape[2:])).any(axis=0)):
      return True
  return False


def _delete(g, const, mask, axis=-1):
  value = g.value(const)
  if value.ndim and value.shape[axis] == mask.size and mask.any():
    g.set_value(const, np.delete(value, np.flatnonzero(mask), axis=axis))


def shrink_region(g, region, fold_borders, position=None, objective='flops'):
  """Removes the removable classes of `region` from `g`.

  `objective` is what the cost rule for position-dependent removed channels
  minimizes: 'flops' (they always go: a map added with the next conv's bias,
  else at most as many extra channels) or 'params' (extra channels; they
  stay where their pattern costs more parameters).

  Returns:
    (number of channel classes removed, [ShrinkStop] for the empty source
    channels that stay).
  """
  if position is None or any(op.node.name not in position
                             for op in region.ops):
    position = {name: i for i, name in enumerate(g.order())}
  if region.broken is not None:
    stops = []
    for layer in region.sources:
      count = int(empty_filters(g, layer).sum())
      if count:
        stops.append(ShrinkStop(layer.node.name, region.broken[0],
                                region.broken[1], region.broken[2], count))
    return 0, stops
  classes = {t: region.classes(t) for t in region.ids}
  values, reasons = propagate(g, region, position)
  block, goes = _decide(g, region, fold_borders, position, classes, values,
                        reasons, objective)
  removed = np.array(sorted(goes), np.int64)
  stops = []
  for layer in region.sources:
    kept = {}
    empty = empty_filters(g, layer)
    for c, is_empty in zip(classes[layer.node.name], empty):
      if is_empty and c in block:
        kept[block[c]] = kept.get(block[c], 0) + 1
    stops.extend(ShrinkStop(layer.node.name, node, op, reason, count)
                 for (node, op, reason), count in kept.items())
  if not removed.size:
    return 0, stops
  mask = {t: np.isin(c, removed) for t, c in classes.items()}
  sources = set(layer.node.name for layer in region.sources)
  for layer, tensor in region.sinks:
    rows = np.flatnonzero(mask[tensor])
    if not rows.size:
      continue
    keep = ~mask[layer.node.name] if layer.node.name in sources else None
    extra = _sink_update(g, layer, values[tensor][..., rows], rows, keep,
                         objective)
    _delete(g, layer.weight, mask[tensor], axis=layer.in_axis)
    if extra is not None:
      g.folded.setdefault(layer.node.name, []).extend(
          append_channels(g, layer, *extra))
  for layer in region.sources:
    _delete(g, layer.weight, mask[layer.node.name], axis=layer.out_axis)
    drop_map_outputs(g, layer, mask[layer.node.name])
    if layer.kind == 'conv_transpose':
      _write_output_channels(g, layer, int((~mask[layer.node.name]).sum()))
  for op in region.ops:
    if op.kind == 'elementwise' and op.const is not None:
      _delete(g, op.const, mask[op.output])
    elif op.kind == 'depthwise':
      _delete(g, op.const, mask[split_input(op.node.input[0])[0]], axis=2)
    elif op.kind == 'lrn' and mask[op.output].any():
      channels = mask[op.output].size
      g.lrn[op.node.name] = (lrn.rewrite(g, op.node,
                                         np.flatnonzero(~mask[op.output]),
                                         channels), channels)
    elif op.kind == 'slice' and op.const is not None:
      bound = g.value(op.const).copy()   # the end (size) on the channels
      bound[-1] = int((~mask[op.output]).sum())
      g.set_value(op.const, bound)
    elif op.kind == 'split':
      split.resize(g, op, [int((~mask[t]).sum()) for t in outputs_of(g, op)])
    elif op.kind == 'reshape' and op.const is not None and \
        g.value(op.const)[-1] != -1:
      target = g.value(op.const).copy()
      target[-1] = int((~mask[op.output]).sum())
      g.set_value(op.const, target)
  return int(removed.size), stops
