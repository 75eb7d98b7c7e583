"""Large tensors worked on in blocks of at most `BLOCK` entries.

    >>> from tf1prune.masks import _blocks
    >>> _blocks.row_ranges([5, 3], block=6)
    [(0, 2), (2, 4), (4, 5)]

On TF 1.15 the CPU allocator takes its memory from glibc's malloc, which
serves every allocation above 32 MB with a fresh mmap; each of its 4 kB pages
then faults on its first write (9766 faults for a 40 MB output, on every run).
At 1e7 entries an abs of the whole, summed, takes 5.8x as long as the same on
blocks of 2**20 entries, and the float mask takes longer to write than to
compute. TF 2.21 keeps its large buffers (no faults), and there the blocks
gain by staying in cache: 1.5x for the same abs and sum (one thread).
Blocks of a few MB are reused by the allocator from op to op. So the mask
update passes over the keys by blocks (`split`) and, where the float mask would
fault in (TF 1.15) or be copied anyway (a reference variable), writes it by
blocks of rows (`row_ranges`; `tf1prune.training.pruning._assign_mask`).
Side by side at 1e7, one thread, blocks of 2**20 entries make the whole
update 10-20% faster than 2**21 on TF 2.21 and no slower on TF 1.15 (2**19
about the same as 2**20, 2**17 slower: more ops).
"""

import tensorflow.compat.v1 as tf

__all__ = ['BLOCK', 'COUNT_ROW', 'Rows', 'count_per_row', 'count_true',
           'row_ranges', 'split']

# Entries per block: 4 MB of float32 or int32. A multiple of the row widths
# used with `Rows` (16 and COUNT_ROW), so only the last block has a partial
# row.
BLOCK = 1 << 20
# Entries per row when counting with uint8 sums (at most 255).
COUNT_ROW = 128


def split(flat):
  """Slices of the 1-D tensor `flat` of at most `BLOCK` entries.

  Each slice starts at a multiple of `BLOCK` entries, so it shares the
  buffer of `flat` (no copy). A size unknown when the graph is built: one
  slice, `flat` itself.
  """
  n = flat.get_shape().num_elements()
  if n is None or n <= BLOCK:
    return [flat]
  return [flat[start:start + BLOCK] for start in range(0, n, BLOCK)]


def row_ranges(shape, block=None):
  """(start, stop) ranges over dim 0 of the static `shape`, in order.

  Each range holds at most `block` (default `BLOCK`) entries, and at least
  one row.
  """
  block = BLOCK if block is None else block
  rows = shape[0]
  row_size = 1
  for dim in shape[1:]:
    row_size *= dim
  step = max(1, block // max(row_size, 1))
  return [(start, min(start + step, rows)) for start in range(0, rows, step)]


class Rows(object):
  """Blocks (of keys, flags, ...) seen as rows of `width` flat positions.

  `parts` is a list of (first row, matrix): each block's whole rows as a
  matrix (a reshape of a slice at 0, no copy), and the last block's partial
  row padded with `fill` as a matrix of one row.
  """

  def __init__(self, blocks, width, fill):
    self.width, self.parts = width, []
    row = 0
    for block in blocks:
      n = block.get_shape().num_elements()
      full = n // width
      if full:
        self.parts.append(
            (row, tf.reshape(block[:full * width], [full, width])))
        row += full
      if n % width:
        pad = tf.fill([width - n % width], tf.cast(fill, block.dtype))
        self.parts.append((row, tf.concat([block[full * width:], pad],
                                          0)[None]))
        row += 1

  def per_row(self, fn):
    """Concatenates fn(matrix) -> [rows] over the parts."""
    out = [fn(matrix) for _, matrix in self.parts]
    return out[0] if len(out) == 1 else tf.concat(out, 0)

  def row(self, index):
    """The row at the int32 scalar `index`, as a [width] vector."""
    if len(self.parts) == 1:
      return self.parts[0][1][index]
    picks = [tf.gather(matrix, tf.clip_by_value(index - first, 0,
                                                matrix.shape[0] - 1))
             for first, matrix in self.parts]
    part = tf.reduce_sum(tf.cast(
        tf.stack([first for first, _ in self.parts]) <= index, tf.int32)) - 1
    return tf.gather(tf.stack(picks), part)


def count_per_row(rows, hits):
  """int32 count per row of `rows` (a `Rows`) of the entries where
  `hits(matrix)` is true (`count_true`)."""
  return rows.per_row(lambda m: count_true(hits(m)))


def count_true(flags):
  """int32 count per row of the true entries of the bool matrix `flags`:
  uint8 sums, a quarter of the bytes of an int32 cast, so a row holds at
  most 255 entries (`COUNT_ROW`)."""
  return tf.cast(tf.reduce_sum(tf.cast(flags, tf.uint8), 1), tf.int32)
