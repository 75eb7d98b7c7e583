"""Large tensors worked on in blocks of at most `BLOCK` entries.

    >>> from tf1prune.masks import _blocks
    >>> _blocks.row_ranges([5, 3], block=6)
    [(0, 2), (2, 4), (4, 5)]

TF's CPU allocator takes its memory from glibc's malloc, which serves every
allocation above 32 MB with a fresh mmap; each of its 4 kB pages then faults
on its first write. At 1e7 entries (40 MB of float32), a shift or an abs of
the whole took 2-3 times as long as the same op on blocks of 2**21 entries,
and the float mask took longer to write than to compute (TF 2.21 and TF 1.15,
one thread). Blocks of 8 MB are reused by the allocator from op to op. So the
mask update passes over the keys by blocks (`split`) and writes the mask by
blocks of rows (`row_ranges`).
"""

__all__ = ['BLOCK', 'row_ranges', 'split']

# Entries per block: 8 MB of float32 or int32. A multiple of the row widths
# of `_radix` (16 and 128), so only the last block has a partial row.
BLOCK = 1 << 21


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
