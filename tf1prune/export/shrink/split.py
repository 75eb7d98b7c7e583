"""A Split or SplitV in a region: what its outputs hold, and its sizes.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.frozen_graph import FrozenGraph
    >>> from tf1prune.export.shrink.editable import classify
    >>> from tf1prune.export.shrink.split import split_values
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4, 4, 6], name='x')
    ...   a, b = tf.split(x, [2, 4], axis=3, name='s')
    >>> op, _ = classify(FrozenGraph(g.as_graph_def(), ['s']),
    ...                  g.as_graph_def().node[-1])
    >>> op.kind, op.extra
    ('split', (3, 4, [2, 4]))
    >>> [v.tolist() for v in split_values(op, np.arange(6.0)[None, None])]
    [[[[0.0, 1.0]]], [[[2.0, 3.0, 4.0, 5.0]]]]

Split on the channel axis, output k holds the channels of the input at its
offset (the inverse of a concat): a removed channel is removed from the
input and from the one output that holds it, and `resize` gives the split
the kept counts: a SplitV's `size_splits` (a constant of its own) become
them; a Split into equal parts stays a Split while the kept counts are
equal, else it becomes a SplitV of the kept counts (a new `size_splits`
constant, `<split>/size_splits`), which computes the same outputs. Split
on another axis (the positions, the batch), every output takes every
channel: a constant channel stays that constant, and a map over the
positions is cut as the positions are.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink.frozen_graph import split_input


def split_values(op, x):
  """The values of the outputs of split `op` whose input has value `x`
  (float64 `[1, 1, C]` or `[H, W, C]`), one per output."""
  axis, rank, sizes = op.extra
  if axis == rank - 1:
    parts, start = [], 0
    for size in sizes:
      parts.append(x[..., start:start + size])
      start += size
    return parts
  if x.shape[:2] == (1, 1) or rank != 4 or axis == 0:
    return [x] * len(sizes)   # the batch, or a value the same everywhere
  if None in sizes:
    return [np.full((1, 1, x.shape[-1]), np.nan)] * len(sizes)
  parts, start = [], 0
  for size in sizes:   # the map's rows (axis 1) or columns (axis 2)
    cut = [slice(None)] * 3
    cut[axis - 1] = slice(start, start + size)
    parts.append(x[tuple(cut)])
    start += size
  return parts


def resize(g, op, kept):
  """Gives split `op` the channel counts `kept` of its outputs (a split of
  the channel axis that lost channels; see the module docstring)."""
  axis, rank, sizes = op.extra
  if axis != rank - 1 or list(kept) == list(sizes):
    return
  if op.const is not None:
    g.set_value(op.const, np.asarray(kept, g.value(op.const).dtype))
  elif len(set(kept)) > 1:
    _to_split_v(g, op.node, kept)


def _to_split_v(g, node, sizes):
  """Makes Split `node` (split_dim, value) a SplitV (value, size_splits,
  split_dim) with a new `size_splits` constant of `sizes`."""
  dim, data = node.input[0], node.input[1]
  controls = list(node.input[2:])
  name, i = node.name + '/size_splits', 1
  while name in g.nodes:
    name, i = '%s/size_splits_%d' % (node.name, i), i + 1
  const = tf.NodeDef(name=name, op='Const')
  const.attr['dtype'].type = tf.int32.as_datatype_enum
  g.add(const)
  g.set_value(name, np.asarray(sizes, np.int32))
  node.op = 'SplitV'
  del node.input[:]
  node.input.extend([data, name, dim] + controls)
  node.attr['Tlen'].type = tf.int32.as_datatype_enum
  g.users[name] = [(node, 1, 0)]
  moved = {1: 0, 0: 2}   # the old input index -> the new
  for ref in (data, dim):
    source = split_input(ref)[0]
    g.users[source] = [(user, moved[index] if user is node else index, port)
                       for user, index, port in g.users[source]]
