"""One union-find of channels, and how one op ties them.

    >>> import numpy as np
    >>> from tf1prune.channels.propagate import UnionFind
    >>> sets = UnionFind()
    >>> a, b = sets.add(3), sets.add(3)
    >>> sets.union(a, b[::-1])
    >>> [sets.find(i) for i in b]
    [2, 1, 0]

A channel element is an int. `combine(sets, op, ids)` takes the element ids
of the inputs of a `ChannelOp` that carry channels (`{input index: ids}`),
unions the ones the op ties (both inputs of an add, an SE gate, ...) and
returns the ids of the output's channels in order (None where a concat
input carries no channels; a split's input ids, which `split_parts` deals
to its outputs). `Forward` gives them to the output, in the
training walk (`find_channel_groups`) and in the shrink's (`RegionWalk`);
the Keras shrink's view, whose tensors already have ids, unions them with
these (`tie`).
"""

import numpy as np


def _flat(ids):
  if isinstance(ids, np.ndarray):
    return ids.ravel().tolist()
  return list(ids)


class UnionFind(object):
  """Channel elements as ints; `union` joins, `find` names a set."""

  def __init__(self):
    self.parent = []

  def add(self, count=1):
    """`count` new elements, as an int64 array of their ids."""
    start = len(self.parent)
    self.parent.extend(range(start, start + count))
    return np.arange(start, start + count, dtype=np.int64)

  def find(self, i):
    i = int(i)
    root = i
    while self.parent[root] != root:
      root = self.parent[root]
    while self.parent[i] != root:
      self.parent[i], i = root, self.parent[i]
    return root

  def union(self, a, b):
    """Joins `a[k]` with `b[k]` for every k (ids, or None to skip)."""
    for i, j in zip(_flat(a), _flat(b)):
      if i is None or j is None:
        continue
      i, j = self.find(i), self.find(j)
      if i != j:
        self.parent[max(i, j)] = min(i, j)


def combine(sets, op, ids):
  """The output channel ids of `op` from its inputs' ids; unions the tied.

  Args:
    sets: the `UnionFind`.
    op: a `ChannelOp`.
    ids: {input index: list of ids (None allowed)} for `op.inputs`.

  Returns:
    A list of ids (or None) per output channel, or None if the inputs' widths
    do not fit the op.
  """
  carried = [list(ids[i]) for i in op.inputs]
  if op.kind == 'concat':
    out = []
    for index, width in enumerate(op.extra):
      part = list(ids[index]) if index in ids else [None] * width
      if len(part) != width:
        return None
      out.extend(part)
    return out
  first = carried[0]
  if op.kind == 'elementwise':
    if any(len(c) != len(first) for c in carried):
      return None
    for other in carried[1:]:
      sets.union(first, other)
    return first
  if op.kind == 'depthwise':
    return [c for c in first for _ in range(op.extra)]
  if op.kind == 'reshape':
    return first * op.extra
  return first


def split_parts(op, ids):
  """The ids of each output of a `split` op whose input has `ids`: the
  channels at its offset, or all of them (a split of another axis)."""
  axis, rank, sizes = op.extra
  if axis != rank - 1:
    return [list(ids) for _ in sizes]
  parts, start = [], 0
  for size in sizes:
    parts.append(list(ids[start:start + size]))
    start += size
  return parts


def tie(sets, op, ids, out):
  """Unions the output ids `out` with what `combine` gives; False if the
  widths do not fit."""
  expected = combine(sets, op, ids)
  if expected is None or len(expected) != len(out):
    return False
  sets.union(out, expected)
  return True
