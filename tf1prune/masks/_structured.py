"""Structured granularities: kernels, filters, input channels, blocks, N:M.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks._structured import Filter
    >>> from tf1prune.masks._select import magnitude_mask
    >>> w = np.arange(1., 33.).reshape(2, 2, 2, 4)    # [kh, kw, in, out]
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   mask, _ = Filter('l1').compute_mask(tf.constant(w), 0.5, magnitude_mask)
    ...   sess.run(mask)[0, 0, 0].tolist()             # 2 of 4 filters kept
    [0.0, 0.0, 1.0, 1.0]

Each class groups the entries of a weight and implements the one method of
`tf1prune.granularity.Granularity`, `compute_mask(weight, sparsity, select)`:
the groups are scored by an importance of `abs(w)` ('l1': sum, 'l2': square
root of the sum of squares, 'max': largest), `select(scores, sparsity)` (by
default `tf1prune.thresholds.magnitude_mask`, exact counts) keeps the best
groups, and the group mask is spread back over the weight. `sparsity` is the
fraction of groups pruned. Weights are laid out as tf1prune layers create them:
conv kernels `[kh, kw, in, out]`, dense weights `[in, out]`.

| class | one group is | on `[kh, kw, in, out]` | on `[in, out]` |
|---|---|---|---|
| `Kernel` | the `[kh, kw]` taps of one (in, out) pair | `w[:, :, i, o]` | one entry |
| `Filter` | everything feeding one output | `w[:, :, :, o]` | `w[:, o]` |
| `InputChannel` | everything reading one input | `w[:, :, i, :]` | `w[i, :]` |
| `ChannelBlock(h, w)` | `h` inputs x `w` outputs, all taps | `w[:, :, i:i+h, o:o+w]` | `w[i:i+h, o:o+w]` |
| `NM(n, m)` | keeps the n largest of m consecutive inputs | along `in` | along `in` |

`NM` ignores the scheduled value (its sparsity is `1 - n/m`): it prunes once the
scheduled sparsity is above 0, so the schedule decides when, not how much.
The `granularity_map` hparam's values name these classes; `tf1prune.plan.spec`
parses them.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.masks._granularity import Element, Granularity, max_magnitude

__all__ = ['IMPORTANCES', 'Kernel', 'Filter', 'InputChannel', 'ChannelBlock',
           'NM']

IMPORTANCES = ('l1', 'l2', 'max')


def _check_importance(importance):
  if importance not in IMPORTANCES:
    raise ValueError('group importance must be one of %s, got %r; set the '
                     'group_importance hparam to one of them' %
                     (', '.join(IMPORTANCES), importance))


def _name_of(weight):
  """`weight`'s name in messages: its op's name in a graph. An eager tensor
  has none; the Keras `Pruner` checks its weights by name first
  (`check_shape`)."""
  try:
    return weight.op.name
  except AttributeError:   # eager: Tensor.op is undefined
    return 'the weight'


def _check_rank(shape, granularity, min_rank, name):
  """Returns `shape` (a TensorShape or list) as a list of ints; raises
  ValueError unless it is fully known with rank >= `min_rank`."""
  shape = tf.TensorShape(shape)
  if not shape.is_fully_defined() or shape.ndims < min_rank:
    raise ValueError(
        '%s granularity needs a weight of known shape with rank >= %d; %s has '
        'shape %s. Use element granularity for it (leave it out of '
        'granularity_map).' % (granularity, min_rank, name, shape))
  return shape.as_list()


def _score_dtype(dtype):
  """Scores are computed in float32 for half types, else in the weight's type."""
  return tf.float64 if dtype.base_dtype == tf.float64 else tf.float32


def group_scores(weight, block, importance):
  """Returns the importance of each block of `weight`.

  Args:
    weight: float tensor of static shape `S` (rank r).
    block: r ints, the block shape (each 1 <= b_i <= S_i).
    importance: 'l1', 'l2' or 'max' of `abs(weight)` over a block.

  Returns:
    float32 (float64 for float64 weights) tensor of shape `ceil(S_i / b_i)`.
    Blocks at the far edges may be partial; they are scored on their real
    entries.
  """
  shape = weight.get_shape().as_list()
  counts = [-(-s // b) for s, b in zip(shape, block)]
  magnitudes = tf.abs(tf.cast(weight, _score_dtype(weight.dtype)))
  pads = [[0, n * b - s] for s, b, n in zip(shape, block, counts)]
  if any(p[1] for p in pads):
    magnitudes = tf.pad(magnitudes, pads)
  interleaved = [d for n, b in zip(counts, block) for d in (n, b)]
  blocks = tf.reshape(magnitudes, interleaved)
  axes = list(range(1, 2 * len(shape), 2))
  if importance == 'max':
    return max_magnitude(blocks, axes)
  if importance == 'l2':
    return tf.sqrt(tf.reduce_sum(tf.square(blocks), axis=axes))
  return tf.reduce_sum(blocks, axis=axes)


def spread_blocks(group_mask, block, shape):
  """Repeats each entry of `group_mask` over its block; crops to `shape`."""
  counts = group_mask.get_shape().as_list()
  expanded = tf.reshape(group_mask, [d for n in counts for d in (n, 1)])
  tiled = tf.tile(expanded, [d for b in block for d in (1, b)])
  full = tf.reshape(tiled, [n * b for n, b in zip(counts, block)])
  if [n * b for n, b in zip(counts, block)] != list(shape):
    full = tf.slice(full, [0] * len(shape), shape)
  return full


class _Groups(Granularity):
  """Prunes whole blocks of a weight; subclasses say what a block is.

  Args:
    importance: 'l1', 'l2' or 'max' of `abs(w)` over a group.
  """

  name = 'group'
  min_rank = 1

  def __init__(self, importance='l1'):
    _check_importance(importance)
    self.importance = importance

  def block_shape(self, shape):
    """Returns the block shape (a list of len(shape) ints) for `shape`."""
    raise NotImplementedError

  def removes_outputs(self, shape):
    """True if a group spans every entry feeding its outputs (all but the
    last axis): filters, and blocks over every input."""
    if len(shape) < self.min_rank:
      return False
    return list(self.block_shape(list(shape))[:-1]) == list(shape[:-1])

  def check_shape(self, shape, name):
    """Raises ValueError if weight `name` of `shape` cannot be grouped."""
    _check_rank(shape, self.name, self.min_rank, name)

  def compute_mask(self, weight, sparsity, select):
    """Returns (float32 mask shaped like `weight`, float32 threshold).

    Args:
      weight: float tensor of static shape, rank >= `min_rank`.
      sparsity: float scalar in [0, 1], the fraction of groups to prune.
      select: `(scores, sparsity) -> (float32 group mask, threshold)`.

    Raises:
      ValueError: the weight's shape is unknown or its rank too small.
    """
    shape = weight.get_shape()
    self.check_shape(shape, _name_of(weight))
    shape = shape.as_list()
    block = self.block_shape(shape)
    if all(b == 1 for b in block):
      return Element().compute_mask(weight, sparsity, select)
    group_mask, threshold = select(
        group_scores(weight, block, self.importance), sparsity)
    return spread_blocks(group_mask, block, shape), threshold

  def __repr__(self):
    return '%s(%r)' % (type(self).__name__, self.importance)


class Kernel(_Groups):
  """One group per (input, output) pair: the `[kh, kw]` slice `w[:, :, i, o]`.

  For a weight of rank r >= 2 a group spans the r - 2 leading axes; on a
  rank-2 weight that is a single entry (element granularity).
  """

  name = 'kernel'
  min_rank = 2

  def block_shape(self, shape):
    return shape[:-2] + [1, 1]


class Filter(_Groups):
  """One group per output (last axis): `w[..., o]`, a conv filter or a neuron."""

  name = 'filter'
  min_rank = 1

  def block_shape(self, shape):
    return shape[:-1] + [1]


class InputChannel(_Groups):
  """One group per input (axis -2): `w[:, :, i, :]` or a dense row `w[i, :]`."""

  name = 'input_channel'
  min_rank = 2

  def block_shape(self, shape):
    return shape[:-2] + [1, shape[-1]]


class ChannelBlock(_Groups):
  """Blocks of `height` inputs x `width` outputs, over all leading axes.

  On a conv kernel `[kh, kw, in, out]` one block is `w[:, :, i:i+h, o:o+w]`
  (every tap), on a dense `[in, out]` weight `w[i:i+h, o:o+w]`. `ChannelBlock(1,
  1)` is `Kernel`. Alternatively `dims` may give one block size per axis of the
  weight (then it must have that rank), e.g. `(1, 1, 4, 4)`.

  Args:
    dims: 2 ints (inputs, outputs), or one int per weight axis; -1 means the
      whole axis; sizes larger than the axis are capped to it.
    importance: 'l1', 'l2' or 'max'.

  Raises:
    ValueError: a size is 0 or below -1, or `dims` is empty.
  """

  name = 'block'
  min_rank = 2

  def __init__(self, dims, importance='l1'):
    super(ChannelBlock, self).__init__(importance)
    dims = [int(d) for d in dims]
    if len(dims) < 2 or any(d != -1 and d < 1 for d in dims):
      raise ValueError('block dims must be at least 2 sizes, each >= 1 or -1 '
                       '(the whole axis), got %r' % (dims,))
    self.dims = dims

  def block_shape(self, shape):
    if len(self.dims) == 2:
      dims = [-1] * (len(shape) - 2) + self.dims
    elif len(self.dims) == len(shape):
      dims = self.dims
    else:
      raise ValueError('block dims %s have %d sizes but the weight has shape %s; '
                       'give 2 sizes (inputs x outputs) or one per axis' %
                       ('x'.join(map(str, self.dims)), len(self.dims), shape))
    return [s if d == -1 else min(d, s) for d, s in zip(dims, shape)]

  def __repr__(self):
    return 'ChannelBlock(%r, %r)' % (self.dims, self.importance)


def _to_groups(x, m):
  """[..., in, out] -> [G, m]: consecutive inputs of one output, one row each."""
  rank = x.get_shape().ndims
  perm = list(range(rank - 2)) + [rank - 1, rank - 2]
  return tf.reshape(tf.transpose(x, perm), [-1, m]), perm


def _from_groups(groups, perm, shape):
  """Inverse of `_to_groups`, back to `shape`."""
  transposed = [shape[p] for p in perm]
  inverse = list(np.argsort(perm))
  return tf.transpose(tf.reshape(groups, transposed), inverse)


class NM(Granularity):
  """N:M sparsity along the inputs: the `n` largest `abs(w)` of every `m`.

  Groups are `m` consecutive entries of axis -2 (the inputs: `in` of a conv
  kernel `[kh, kw, in, out]` or of a dense `[in, out]` weight) for one index of
  every other axis. Ties keep the earlier input. The scheduled `sparsity` only
  switches the pattern on: at 0 the mask is all ones, above 0 it is the N:M
  mask (sparsity `1 - n/m`). `select` is not used.

  Args:
    n, m: keep `n` of every `m`; `1 <= n < m`.
    previous_mask: optional, the weight's current mask (e.g. its mask
      variable). When given the mask is frozen: once every group of the
      previous mask keeps at most `n` entries, it is returned unchanged.

  Raises:
    ValueError: bad `n`, `m`; at `compute_mask`, a weight whose axis -2 is not
      a multiple of `m`.
  """

  ranks_scores = False

  def __init__(self, n, m, previous_mask=None):
    if not (isinstance(n, int) and isinstance(m, int) and 1 <= n < m):
      raise ValueError('N:M sparsity needs integers 1 <= n < m, got n=%r, m=%r' %
                       (n, m))
    self.n, self.m = n, m
    self.previous_mask = previous_mask

  def check_shape(self, shape, name):
    """Raises ValueError unless weight `name` of `shape` has rank >= 2 and
    axis -2 a multiple of `m`."""
    shape = _check_rank(shape, '%d:%d' % (self.n, self.m), 2, name)
    if shape[-2] % self.m:
      raise ValueError(
          '%d:%d sparsity groups axis -2 of %s (shape %s) by %d, but %d is not '
          'a multiple of %d; use another granularity for this weight' %
          (self.n, self.m, name, shape, self.m, shape[-2], self.m))

  def compute_mask(self, weight, sparsity, select=None):
    """Returns (float32 mask shaped like `weight`, float32 threshold).

    The threshold is the smallest kept `abs(w)` that is not NaN (+inf if
    there is none). NaN ranks above +inf, as in `magnitude_mask`.
    """
    shape = weight.get_shape()
    self.check_shape(shape, _name_of(weight))
    shape = shape.as_list()
    magnitudes = tf.abs(tf.cast(weight, _score_dtype(weight.dtype)))
    # Compared as bit patterns, which order like the magnitudes with NaN
    # above +inf (`tf1prune.masks._select`); a float compare of NaN is false.
    keys = tf.bitcast(magnitudes, tf.int64 if magnitudes.dtype == tf.float64
                      else tf.int32)
    groups, perm = _to_groups(keys, self.m)
    row, col = groups[:, :, None], groups[:, None, :]   # entry i vs entry j
    earlier = np.tril(np.ones([self.m, self.m], bool), -1)   # j < i
    beaten_by = tf.logical_or(col > row, tf.logical_and(tf.equal(col, row),
                                                        earlier))
    rank = tf.reduce_sum(tf.cast(beaten_by, tf.int32), axis=2)
    nm = tf.cast(rank < self.n, tf.float32)
    active = tf.cast(tf.cast(sparsity, tf.float32) > 0.0, tf.float32)
    new = active * nm + (1.0 - active)
    if self.previous_mask is not None:
      previous = tf.cast(_to_groups(tf.convert_to_tensor(self.previous_mask),
                                    self.m)[0], tf.float32)
      kept = tf.reduce_sum(tf.cast(previous > 0, tf.int32), axis=1)
      frozen = tf.cast(tf.reduce_all(kept <= self.n), tf.float32)
      new = frozen * previous + (1.0 - frozen) * new
    mask = _from_groups(new, perm, shape)
    # NaN left out: TF 2.x's reduce_min returns NaN if it meets one.
    magnitudes = tf.cast(magnitudes, tf.float32)
    kept_magnitudes = tf.where_v2(
        tf.logical_and(mask > 0, tf.logical_not(tf.is_nan(magnitudes))),
        magnitudes, tf.ones_like(mask) * np.inf)
    return mask, tf.reduce_min(kept_magnitudes)

  def __repr__(self):
    return 'NM(%d, %d, frozen=%s)' % (self.n, self.m,
                                       self.previous_mask is not None)
