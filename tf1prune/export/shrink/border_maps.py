"""What removed channels give a conv's output where padding makes it vary:
one constant map, added with the conv's bias.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.rounds import shrink_graph_def
    >>> w1 = np.ones([1, 1, 2, 2], np.float32); w1[..., 1] = 0.0   # empty
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4, 4, 2], name='x')
    ...   h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w1, [1] * 4, 'SAME'),
    ...                                 [0.0, 2.0]))
    ...   c = tf.nn.conv2d(h, np.ones([3, 3, 2, 2], np.float32), [1] * 4,
    ...                    'SAME')
    ...   y = tf.nn.bias_add(c, [0.5, 0.5], name='y')
    >>> small, _ = shrink_graph_def(g.as_graph_def(), ['y'])
    >>> ops = {n.name: n.op for n in small.node}
    >>> ops['y'], ops['y/shrink_map/flat'], ops['y/shrink_map/add']
    ('Reshape', 'Reshape', 'Add')
    >>> [[d.size for d in n.attr['value'].tensor.tensor_shape.dim]
    ...  for n in small.node if n.name == 'y/shrink_map/value']
    [[1, 1, 16, 2]]

The removed channel is relu(2) = 2 everywhere, and the 3x3 conv's zero
padding gives its corners 4 taps of it, its edges 6 and its interior 9: a
map `M[H', W', C]` over the conv's output, the same for every example. The
shrink adds it with the bias, as one `[1, 1, H' x W', C]` constant
(bias + M):

    y = Reshape(Add(Reshape(conv, [-1, H' x W', C]), bias + M), [-1, H', W', C])

in place of `BiasAdd(conv, bias)`: the same number of additions as the bias
add, no multiply-add (the report's FLOPs count none; its parameters count
the map's entries instead of the bias's), and no op that depends on the
input, so it runs for any batch size N (the Add's output is
`[1, N, H' x W', C]`). The Reshapes, free in TensorFlow, keep TF 1.15's
TFLite converter (TOCO) correct: it folds an `Add` of a constant straight
after a conv into the conv's `[C]` bias, from the map's first pixel only,
and fuses nothing across a Reshape. The constant's extra leading dimension
keeps TOCO from moving the `Add` in front of the Reshape, which it does
when the constant's shape is the tail of the Reshape's output (and then
fails to add it to the conv's `[1, H', W', C]` output). TensorFlow 1.15 and
2.x, both TFLite converters, tf2onnx + onnxruntime and OpenVINO compute
this form exactly, at batch size 1 too (docs/deployment.md).

A map of `COMPACT_FROM` entries and more is stored as the table of its
distinct rows and columns (`compact`: a few, the borders and the interior)
and rebuilt by two constant `GatherV2`s, which TensorFlow and the
converters fold once: the `.pb` does not grow with the image size.

During the rounds of `shrink_graph_def` the maps are kept beside the graph
(`FrozenGraph.maps`, by conv name) and added up; `add_border_maps` writes
them into the graph once, at the end.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.names import split_input
from tf1prune.export.shrink.regions import channel_const

SUFFIX = '/shrink_map'
COMPACT_FROM = 1 << 12   # map entries: smaller maps stay one const


def own_bias(g, layer, channels):
  """The const bias right after `layer` (BiasAdd/Add), or None."""
  if layer.node.name in g.outputs:
    return None
  users = g.consumers(layer.node.name)
  if not users or len(users) != 1:
    return None
  node, index = users[0]
  if node.op not in ('BiasAdd', 'BiasAddV1', 'Add', 'AddV2'):
    return None
  const = channel_const(g, node, 1 - index, channels)
  if const is None or g.value(const).shape != (channels,):
    return None
  return const


def takes_map(g, layer, value):
  """True if map `value` (float64 `[H', W', O]`) can be added at conv
  `layer`'s output: its static height and width are the map's, and the conv
  is not a graph output (its name then belongs to the conv itself)."""
  shape = g.shapes.get(layer.node.name)
  return (layer.kind == 'conv' and value.ndim == 3 and
          layer.node.name not in g.outputs and bool(shape) and
          len(shape) == 4 and list(shape[1:3]) == list(value.shape[:2]))


def record_map(g, layer, value):
  """Adds map `value` `[H', W', O]` to what `layer`'s output gets."""
  old = g.maps.get(layer.node.name)
  g.maps[layer.node.name] = (layer, value if old is None else old[1] + value)


def drop_map_outputs(g, layer, removed):
  """Removes output channels `removed` (bool `[O]`) from `layer`'s map."""
  if layer.node.name in g.maps and removed.any():
    _, value = g.maps[layer.node.name]
    g.maps[layer.node.name] = (layer, value[..., ~removed])


def map_value(g, layer):
  """float64 `[H', W', O]` map `layer`'s output gets, or None."""
  entry = g.maps.get(layer.node.name)
  return None if entry is None else entry[1]


def _node(g, name, op, inputs, **attrs):
  node = tf.NodeDef(name=name, op=op, input=inputs)
  for key, value in attrs.items():
    if isinstance(value, np.ndarray):
      node.attr[key].tensor.CopyFrom(tf.make_tensor_proto(value))
    else:
      node.attr[key].type = tf.as_dtype(value).as_datatype_enum
  return g.add(node)


def _const(g, name, value):
  node = _node(g, name, 'Const', [], value=value, dtype=value.dtype)
  g.values[node.name] = value
  return node.name


def _unique(g, base):
  name, i = base, 1
  while any(n == name or n.startswith(name + '/') for n in g.nodes):
    name, i = '%s_%d' % (base, i), i + 1
  return name


def _drop_unused(g, name):
  """Deletes node `name` and the Identity/Const chain behind it once no
  node reads them."""
  while name in g.nodes and not g.users.get(name):
    node = g.nodes.pop(name)
    g.users.pop(name, None)
    g.values.pop(name, None)
    g.changed.discard(name)
    for consts in g.folded.values():   # e.g. a `shrink_fold` bias, merged
      if name in consts:
        consts.remove(name)
    for i, n in enumerate(g.graph_def.node):
      if n.name == name:
        del g.graph_def.node[i]
        break
    if node.op not in ('Identity', 'Snapshot') or not node.input:
      return
    name, _ = split_input(node.input[0])
    g.users[name] = [u for u in g.users.get(name, []) if u[0] is not node]


def compact(value):
  """(table, rows, cols) with `value == table[rows][:, cols]`.

  A border map has a few distinct rows and columns (the borders and the
  interior), so `table` `[r, c, C]` is small; `rows` `[H']` and `cols`
  `[W']` are int32 indices into it.
  """
  height, width, channels = value.shape
  kinds, rows = np.unique(value.reshape(height, -1), axis=0,
                          return_inverse=True)
  kinds = kinds.reshape(-1, width, channels).transpose(1, 0, 2)
  table, cols = np.unique(kinds.reshape(width, -1), axis=0,
                          return_inverse=True)
  table = table.reshape(-1, kinds.shape[1], channels).transpose(1, 0, 2)
  return (np.ascontiguousarray(table), rows.reshape(-1).astype(np.int32),
          cols.reshape(-1).astype(np.int32))


def _map_const(g, base, value):
  """Nodes giving `value` `[H', W', C]` as `[1, 1, H' x W', C]`: (the const
  the report counts, the tensor to add; one rank more than the Reshape of
  the conv it is added to, see the module doc).

  One const of the map, or, for a large map (COMPACT_FROM entries and up)
  that `compact` at least halves, its table expanded by two constant
  `GatherV2`s and a Reshape: every consumer folds those constant ops once
  (TensorFlow's graph optimizer, the converters), and the `.pb` keeps only
  the table and its indices.
  """
  height, width, channels = value.shape
  table, rows, cols = compact(value)
  if (value.size < COMPACT_FROM or
      2 * (table.size + height + width) > value.size):
    const = _const(g, base + '/value', value.reshape(1, 1, -1, channels))
    return const, const
  const = _const(g, base + '/table', table)
  by_row = _node(g, base + '/rows', 'GatherV2', [
      const, _const(g, base + '/row_index', rows),
      _const(g, base + '/row_axis', np.array(0, np.int32))],
                 Tparams=value.dtype, Tindices=tf.int32, Taxis=tf.int32)
  full = _node(g, base + '/full', 'GatherV2', [
      by_row.name, _const(g, base + '/col_index', cols),
      _const(g, base + '/col_axis', np.array(1, np.int32))],
               Tparams=value.dtype, Tindices=tf.int32, Taxis=tf.int32)
  flat = _node(g, base + '/value', 'Reshape', [full.name, _const(
      g, base + '/value_shape', np.array([1, 1, height * width, channels],
                                         np.int32))],
               T=value.dtype, Tshape=tf.int32)
  return const, flat.name


def _write_map(g, layer, value):
  """Puts `value` `[H', W', O]` after conv `layer`, with its bias if it has
  one; returns the map const's name."""
  conv = layer.node.name
  height, width, channels = value.shape
  dtype = tf.as_dtype(layer.node.attr['T'].type).as_numpy_dtype
  bias = own_bias(g, layer, channels)
  target = g.consumers(conv)[0][0] if bias is not None else None
  if bias is not None:
    value = value + g.value(bias).astype(np.float64)
  base = _unique(g, (target.name if target is not None else conv) + SUFFIX)
  flat = _node(g, base + '/flat', 'Reshape', [conv, _const(
      g, base + '/flat_shape', np.array([-1, height * width, channels],
                                        np.int32))], T=dtype, Tshape=tf.int32)
  const, summand = _map_const(g, base, value.astype(dtype))
  add = _node(g, base + '/add', 'Add', [flat.name, summand], T=dtype)
  shape = _const(g, base + '/shape', np.array([-1, height, width, channels],
                                              np.int32))
  old = [u for u in g.users[conv] if u[0] is not flat]
  g.users[conv] = [(flat, 0, 0)]
  if target is None:
    _node(g, base, 'Reshape', [add.name, shape], T=dtype, Tshape=tf.int32)
    for node, index, _ in old:
      node.input[index] = base
    g.users[base] = old
    return const
  reads = [split_input(i)[0] for i in target.input]
  target.op = 'Reshape'
  target.attr.clear()
  target.attr['T'].type = tf.as_dtype(dtype).as_datatype_enum
  target.attr['Tshape'].type = tf.int32.as_datatype_enum
  del target.input[:]
  target.input.extend([add.name, shape])
  g.users[add.name].append((target, 0, 0))
  g.users[shape].append((target, 1, 0))
  for name in reads:
    g.users[name] = [u for u in g.users.get(name, []) if u[0] is not target]
    if name != conv:
      _drop_unused(g, name)
  return const


def add_border_maps(g):
  """Writes every map of `g.maps` into the graph (see the module doc); the
  map consts join `g.folded` (the report counts them)."""
  for name in sorted(g.maps):
    layer, value = g.maps[name]
    if np.any(value):
      g.folded.setdefault(name, []).append(_write_map(g, layer, value))
  g.maps = {}
