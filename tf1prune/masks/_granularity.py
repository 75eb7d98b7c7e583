"""What a mask prunes together: single weights, or blocks of a rank-2 weight.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks._granularity import Block
    >>> from tf1prune.masks._select import magnitude_mask
    >>> w = np.arange(16.).reshape(4, 4)
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   mask, _ = Block(2, 2, 'MAX').compute_mask(
    ...       tf.constant(w), 0.5, lambda s, p: magnitude_mask(s, p))
    ...   sess.run(mask)[:, 0].tolist()
    [0.0, 0.0, 1.0, 1.0]

A granularity has one job, `compute_mask(weight, sparsity, select)`: score the
groups of `abs(weight)`, let `select(scores, sparsity) -> (group_mask,
threshold)` choose the groups to keep, and spread the group mask over the
weight. Masks are float32 and shaped like the weight; nothing here creates
variables.
"""

import numpy as np
import tensorflow.compat.v1 as tf

__all__ = ['Granularity', 'Element', 'Block', 'max_magnitude']

_BITS = {2: tf.int16, 4: tf.int32, 8: tf.int64}


def max_magnitude(magnitudes, axis):
  """`tf.reduce_max` of non-negative `magnitudes` (abs values) over `axis`,
  a NaN ranking above +inf on every stack.

  TF 1.15's Max skips NaN where TF 2.x's returns it, so over the floats a
  block or filter holding a NaN weight would be kept first on one stack and
  scored by its other entries on the other. The max is taken over the bit
  patterns, which order like the magnitudes with NaN above +inf
  (`tf1prune.masks._select`).
  """
  dtype = magnitudes.dtype.base_dtype
  bits = tf.bitcast(magnitudes, _BITS[dtype.size])
  return tf.bitcast(tf.reduce_max(bits, axis=axis), dtype)


class Granularity(object):
  """Base class: one method, `compute_mask`, and what its groups are.

  `ranks_scores`: whether `compute_mask` ranks scores with its `select`
  (False for a fixed pattern, `NM`: a global pruning group does not rank it).
  """

  ranks_scores = True

  def compute_mask(self, weight, sparsity, select):
    """Returns (float32 mask shaped like `weight`, float32 threshold)."""
    raise NotImplementedError

  def check_shape(self, shape, name):
    """Raises ValueError if a weight named `name` of static `shape` (a
    TensorShape or list) cannot be grouped so; `compute_mask` checks it
    too. Any shape is fine here."""

  def removes_outputs(self, shape):
    """True if each group of a weight of `shape` (a list of ints, the last
    axis its outputs) spans whole outputs: pruning one removes output
    channels of the layer (filters, blocks over every input)."""
    return False

  def ranks_entries(self, shape):
    """True if `compute_mask` of a weight of `shape` ranks the magnitudes of
    its entries themselves: one call `select(tf.abs(weight), sparsity)`."""
    return False


class Element(Granularity):
  """Every entry is its own group (the default)."""

  def compute_mask(self, weight, sparsity, select):
    return select(tf.abs(weight), sparsity)

  def ranks_entries(self, shape):
    return True


class Block(Granularity):
  """Blocks of `height x width` entries of a rank-2 weight.

  Singleton dimensions are squeezed first (a `[1, 1, in, out]` kernel is
  rank 2); weights that are not rank 2 then fall back to single entries, as in
  contrib. A block's score is the AVG or MAX of its `abs(w)`; blocks at the
  right and bottom edges may be partial, and AVG divides by their real size.

  Args:
    height, width: block shape; -1 means the whole dimension.
    pooling: 'AVG' or 'MAX'.
  """

  def __init__(self, height, width, pooling='AVG'):
    if pooling not in ('AVG', 'MAX'):
      raise ValueError("block pooling must be 'AVG' or 'MAX', got %r" % pooling)
    for name, value in (('block height', height), ('block width', width)):
      if value != -1 and value < 1:
        raise ValueError('%s must be >= 1 or -1, got %r' % (name, value))
    self.block = (height, width)
    self.pooling = pooling

  def _layout(self, shape):
    """Returns (rows, cols, block_h, block_w) or None if not blockable."""
    dims = [d for d in shape if d != 1]
    if len(dims) != 2:
      return None
    rows, cols = dims
    bh, bw = [d if b == -1 else min(b, d) for b, d in zip(self.block, dims)]
    return rows, cols, bh, bw

  def removes_outputs(self, shape):
    """True if a block spans every row (input) of the squeezed weight."""
    layout = self._layout(shape)
    return layout is not None and layout[2] == layout[0]

  def ranks_entries(self, shape):
    """True if the weight is not blockable or the blocks are single entries:
    then its entries are ranked (`Element`)."""
    layout = self._layout(shape)
    return layout is None or layout[2:] == (1, 1)

  def compute_mask(self, weight, sparsity, select):
    shape = weight.get_shape().as_list()
    if self.ranks_entries(shape):
      return Element().compute_mask(weight, sparsity, select)
    rows, cols, bh, bw = self._layout(shape)
    nh, nw = -(-rows // bh), -(-cols // bw)
    magnitudes = tf.abs(tf.reshape(weight, [rows, cols]))
    padded = tf.pad(magnitudes, [[0, nh * bh - rows], [0, nw * bw - cols]])
    blocks = tf.reshape(padded, [nh, bh, nw, bw])
    if self.pooling == 'MAX':
      scores = max_magnitude(blocks, [1, 3])
    else:
      sizes = np.outer(np.minimum(bh, rows - bh * np.arange(nh)),
                       np.minimum(bw, cols - bw * np.arange(nw)))
      # Multiply by reciprocals made here: TF rewrites a division by a
      # constant into an (on TF 2.x approximate) reciprocal multiply, so 14 / 4
      # gives 3.4999998 there and 3.5 on TF 1.15, and tie orders differ.
      scores = tf.reduce_sum(blocks, axis=[1, 3]) * (1.0 / sizes).astype(
          weight.dtype.base_dtype.as_numpy_dtype)
    group_mask, threshold = select(scores, sparsity)
    spread = tf.tile(group_mask[:, None, :, None], [1, bh, 1, bw])
    mask = tf.reshape(spread, [nh * bh, nw * bw])[:rows, :cols]
    return tf.reshape(mask, shape), threshold
