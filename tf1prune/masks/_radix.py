"""The exact k-th largest of ordered integer keys, and where its ties lie.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks._radix import select_keys
    >>> keys = np.array([5, 9, 9, 1, 9, 7], np.int32)
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   t, need, last = sess.run(select_keys(tf.constant(keys), 3))
    >>> int(t), int(need), int(last)
    (9, 3, 4)

Keys are the bit patterns of non-negative floats (`tf.bitcast`), which order
like the floats. `select_keys` returns the k-th largest key t, how many of
the keys equal to it a top-k takes (`need`), and the flat position of the
`need`-th of them (`last`): the top k are the keys above t and the ties at
positions <= last.

int32 keys (float32 scores), for a static size n:

1. One histogram of the high 16 bits of every key: the boundary bin, the
   rank inside it, its size c.
2. A small boundary bin (c * 16 <= max(n / 10, 2**16)): the rows of 16 flat
   positions holding a member are found by a row minimum of the keys XOR the
   bin's first key (at most 2**15 - 1 exactly for members); only they are
   gathered, and a 2**15-bin histogram of their members' low bits gives t;
   the ties are all among the gathered rows.
3. A large bin: a strided sample (~4096 keys) proposes a member's value v,
   and one pass counts, per row of 128, the keys equal to v. If they are all
   c members, t = v and those counts place the ties. Otherwise (a large bin
   of distinct keys) a full 2**15-bin histogram of the bin's keys gives t, and
   a second counting pass places the ties.

So the work is a fixed number of passes whatever the distribution: no sort,
no cumulative sum or gather of size n. The first histogram also counts the
NaN and infinite scores (`count_non_finite`), for `Pruning`'s warning. The
histograms of all keys are `HistogramFixedWidth`s (`_histogram` says why);
so is the one of the gathered members, with one extra bin for the gathered
keys outside the boundary bin: side by side on the CIFAR-10 example net's
update, a `Bincount` there (which keeps per-thread partial counts of all
2**15 bins and sums them) makes the whole update 1.07x (one thread) to 1.16x
(default threads) slower on TF 2.21, 1.03x on TF 1.15.
int64 keys (float64 scores), or a size unknown when the graph is built, take
a plain four-level radix select with `Bincount`s (the raw op:
`tf.math.bincount` adds a `reduce_max` pass).

Every pass runs block by block, over slices of at most `_blocks.BLOCK` keys
(4 MB), and only the bool mask is written at full size (`_blocks` says why).
"""

import tensorflow.compat.v1 as tf

from tf1prune.masks import _blocks

__all__ = ['count_non_finite', 'key_histogram', 'select_keys', 'top_k_mask']

_HIGH = 16            # bits of the first histogram (of 31 used)
_LOW = 15             # bits of the second
_FIND_ROW = 16        # flat positions per row when locating the boundary bin
_ALIGN = 16           # slices start at multiples of 16 keys (64 bytes)
_SAMPLE = 4096
_SCAN = 512           # counts scanned by one cumsum (`_locate`)


def _size(block):
  """The static number of entries of a 1-D block."""
  return block.get_shape().num_elements()


def _bincount(keys, size):
  """int32 counts of the int32 `keys` in [0, size); keys >= size are ignored.

  Keys must be >= 0.
  """
  return tf.raw_ops.Bincount(arr=keys, size=size,
                             weights=tf.zeros([0], tf.int32))


def _histogram(blocks, low, bins, width):
  """int32 counts of the int32 keys of `blocks` in `bins` bins of 2**width
  keys from `low`, summed over the blocks. A key below `low` counts in the
  first bin, a key past the last bin in the last.

  `low + bins * 2**width - 1` must fit in int32. One `HistogramFixedWidth`
  per block over [low, low + bins * 2**width - 1]: its bin width is then
  2**width - 1 / bins, and its double division puts every int32 key in
  bin (key - low) >> width exactly. It reads each key once; a `Bincount` of
  `key >> width` writes the shifted copy and checks every sign first: 1.3x
  the time, side by side on a block of 2**21 keys, on TF 2.21 and TF 1.15.
  """
  value_range = tf.stack([low, low + ((bins << width) - 1)])
  counts = [tf.histogram_fixed_width(block, value_range, bins)
            for block in blocks]
  return counts[0] if len(counts) == 1 else tf.add_n(counts)


def _locate(counts, rank, from_top=False):
  """Where the rank-th unit of the 1-D int32 `counts` lies, counting from the
  first entry, or from the last when `from_top`.

  Returns (index, rank inside that entry). Needs 1 <= rank <= sum(counts).
  A vector longer than `_SCAN` is seen as rows of a power of two entries
  (zeros pad the last, which moves no unit): the row by its sum, then the
  entry inside it. Eigen's cumsum takes about 10 ns an entry on one thread:
  0.7-1.3 ms over the 2**16 bins of `key_histogram`, more than the
  histogram's own pass over a weight of 10**5 entries.
  """
  n = counts.shape.num_elements()
  if n is None or n <= _SCAN:
    if from_top:
      at_least = tf.cumsum(counts, reverse=True)
      index = tf.reduce_sum(tf.cast(at_least >= rank, tf.int32)) - 1
      return index, rank - (at_least[index] - counts[index])
    before = tf.cumsum(counts, exclusive=True)
    index = tf.reduce_sum(tf.cast(before < rank, tf.int32)) - 1
    return index, rank - before[index]
  width = 1 << ((n - 1).bit_length() + 1) // 2    # width**2 >= n
  rows = -(-n // width)
  if rows * width > n:
    counts = tf.concat([counts, tf.zeros([rows * width - n], counts.dtype)], 0)
  matrix = tf.reshape(counts, [rows, width])
  row, rank = _locate(tf.reduce_sum(matrix, 1), rank, from_top)
  col, rank = _locate(matrix[row], rank, from_top)
  return row * width + col, rank


def _pick(counts, rank):
  """The bin holding the `rank`-th largest, counting from the top bin.

  Returns (bin, rank inside the bin, count of the bin).
  """
  chosen, inside = _locate(counts, rank, from_top=True)
  return chosen, inside, counts[chosen]


def _nth_true(counts, row_hits, need):
  """(row, column) of the need-th true entry (need >= 1), row by row.

  counts: int32 true entries per row (all rows); row_hits(row) -> the bool
  vector of that row. Only one row is examined entry by entry.
  """
  row, need = _locate(counts, need)
  return row, _locate(tf.cast(row_hits(row), tf.int32), need)[0]


def _nth_true_in_rows(rows, hits, counts, need):
  """Flat position of the need-th hit (need >= 1) in `rows`, a
  `_blocks.Rows` of the keys; hits(matrix) -> bool matrix; counts: int32
  hits per row."""
  row, col = _nth_true(counts, lambda i: hits(rows.row(i)[None])[0], need)
  return row * rows.width + col


def _count_equal(rows, value):
  """int32 count per row of `rows` of the keys equal to `value`."""
  return _blocks.count_per_row(rows, lambda m: tf.equal(m, value))


def key_histogram(blocks):
  """The first histogram of the int32 select: int32 counts of the high 16
  bits (of 31) of the keys of `blocks`, a list of 1-D int32 blocks."""
  return _histogram(blocks, 0, 1 << _HIGH, _LOW)


def count_non_finite(high):
  """How many keys of the `key_histogram` `high` are bit patterns of NaN or
  infinite floats (>= 0x7F800000): the counts of its top 256 bins."""
  return tf.reduce_sum(high[0x7F800000 >> _LOW:])


def _select_int32(blocks, k, high):
  n = sum(_size(block) for block in blocks)
  high = key_histogram(blocks) if high is None else high
  bin_, rank, count = _pick(high, k)
  inside = tf.bitwise.left_shift(bin_, _LOW)   # the bin's first key
  low_mask = (1 << _LOW) - 1
  counting = _blocks.Rows(blocks, _blocks.COUNT_ROW, -2)

  def offset(keys):
    # The low bits of a key in the bin, more than low_mask for any other key
    # (the low bits of `inside` are 0, and keys are >= 0): one op, where a
    # test of the bin's range takes two compares and a logical_and.
    return tf.bitwise.bitwise_xor(keys, inside)

  def small_bin():
    rows, keys = [], []
    # The last block's partial row is padded with a key of another bin.
    other = tf.bitwise.bitwise_xor(inside, 1 << 30)
    for first, key in _blocks.Rows(blocks, _FIND_ROW, other).parts:
      holds = tf.reduce_min(offset(key), 1) <= low_mask
      found = tf.cast(tf.where(holds)[:, 0], tf.int32)
      rows.append(first + found)
      keys.append(tf.gather(key, found))
    rows, keys = (rows[0], keys[0]) if len(rows) == 1 else (
        tf.concat(rows, 0), tf.concat(keys, 0))
    # Keys outside the bin go to an extra last bin, left out.
    low = tf.minimum(offset(keys), 1 << _LOW)
    low_bin, need, _ = _pick(
        _histogram([low], 0, (1 << _LOW) + 1, 0)[:-1], rank)
    t = tf.bitwise.bitwise_or(inside, low_bin)
    ties = tf.equal(keys, t)
    at, col = _nth_true(_blocks.count_true(ties), lambda i: ties[i], need)
    return t, need, rows[at] * _FIND_ROW + col

  def large_bin():
    stride = max(1, n // _SAMPLE)
    sample = [block[::stride] for block in blocks]
    sample = sample[0] if len(sample) == 1 else tf.concat(sample, 0)
    guess = tf.reduce_max(tf.where_v2(offset(sample) <= low_mask, sample, -1))
    per_row = _count_equal(counting, guess)

    def one_value():
      last = _nth_true_in_rows(counting, lambda m: tf.equal(m, guess),
                               per_row, rank)
      return guess, rank, last

    def distinct_values():
      # The keys above the bin land in its last sub-bin: take them out
      # (those below it land in the first, which changes no rank).
      low_counts = _histogram(blocks, inside, 1 << _LOW, 0)
      low_counts = tf.concat([low_counts[:-1], low_counts[-1:] - tf.reduce_sum(
          high[bin_ + 1:])], 0)
      low_bin, need, _ = _pick(low_counts, rank)
      t = tf.bitwise.bitwise_or(inside, low_bin)
      last = _nth_true_in_rows(counting, lambda m: tf.equal(m, t),
                               _count_equal(counting, t), need)
      return t, need, last

    return tf.cond(tf.equal(tf.reduce_sum(per_row), count), one_value,
                   distinct_values)

  # The small-bin path works on count * _FIND_ROW gathered keys with about
  # ten ops, the large-bin path costs about one pass: the cheaper one.
  cap = max(n // 10, 1 << 16)
  if n * _FIND_ROW <= cap:
    return small_bin()
  return tf.cond(count * _FIND_ROW <= cap, small_bin, large_bin)


def _select_any(key, k):
  """Four-level radix select of int64 keys (or int32 keys of unknown size),
  gathering the boundary bin at each level; ties placed by a cumulative sum."""
  dtype = key.dtype
  widths = (15, 16, 16, 16) if dtype == tf.int64 else (15, 16)
  prefix = tf.zeros([], dtype)
  candidates, rank = key, k
  shift = sum(widths)
  for level, width in enumerate(widths):
    shift -= width
    digit = tf.bitwise.right_shift(candidates, tf.constant(shift, dtype))
    if level > 0:
      digit = tf.bitwise.bitwise_and(digit, tf.constant((1 << width) - 1, dtype))
    chosen, rank, count = _pick(_bincount(tf.cast(digit, tf.int32), 1 << width),
                                rank)
    prefix = tf.bitwise.bitwise_or(
        prefix, tf.bitwise.left_shift(tf.cast(chosen, dtype),
                                      tf.constant(shift, dtype)))
    if level + 1 < len(widths):
      candidates = tf.boolean_mask(candidates,
                                   tf.equal(digit, tf.cast(chosen, dtype)))
  n = key.get_shape().num_elements()
  if n is None:
    ties = tf.cast(tf.equal(key, prefix), tf.int32)
    last = tf.reduce_sum(tf.cast(tf.cumsum(ties) < rank, tf.int32))
  else:
    counting = _blocks.Rows([key], _blocks.COUNT_ROW, -2)
    last = _nth_true_in_rows(counting, lambda m: tf.equal(m, prefix),
                             _count_equal(counting, prefix), rank)
  return prefix, rank, last


def select_keys(keys, k, high=None):
  """The k-th largest of the flat non-negative int keys and where its ties are.

  Args:
    keys: 1-D int32 or int64 tensor, entries >= 0 (bit patterns of floats);
      or the int32 keys of a static size as a list of 1-D blocks in order
      (`_blocks.split`).
    k: int32 scalar tensor, 1 <= k <= number of keys.
    high: for a list of blocks, their `key_histogram` if the caller made it
      (for `count_non_finite`); else None.

  Returns:
    (t, need, last): the k-th largest key (the keys' dtype); int32 count of
    the keys equal to t among the top k (>= 1); int32 flat position of the
    need-th key equal to t.
  """
  if isinstance(keys, (list, tuple)):
    return _select_int32(list(keys), k, high)
  if keys.dtype == tf.int32 and keys.get_shape().num_elements() is not None:
    return _select_int32(_blocks.split(keys), k, high)
  return _select_any(keys, k)


def top_k_mask(keys, t, need, last):
  """Flat bool mask of the keys above t and the ties at positions <= last.

  `keys` as for `select_keys`. The keys before the aligned position of `last`
  are compared with `>= t`, those after with `> t`, the 16 around it entry by
  entry; block by block, with slices at multiples of 16 keys that share the
  keys' buffers.
  """
  if not isinstance(keys, (list, tuple)):
    if keys.get_shape().num_elements() is None:
      ties = tf.cast(tf.equal(keys, t), tf.int32)
      return tf.logical_or(keys > t, tf.logical_and(
          tf.equal(keys, t), tf.cumsum(ties) <= need))
    keys = _blocks.split(keys)
  n = sum(_size(block) for block in keys)
  start = tf.minimum((last + 1) // _ALIGN * _ALIGN, n)
  stop = tf.minimum(start + _ALIGN, n)
  parts, offset = [], 0
  for block in keys:
    size = _size(block)
    low = tf.clip_by_value(start - offset, 0, size)
    high = tf.clip_by_value(stop - offset, 0, size)
    middle = tf.slice(block, low[None], (high - low)[None])
    position = offset + low + tf.range(high - low)
    parts += [
        tf.slice(block, [0], low[None]) >= t,
        tf.logical_or(middle > t, tf.logical_and(tf.equal(middle, t),
                                                 position <= last)),
        tf.slice(block, high[None], [-1]) > t]
    offset += size
  return tf.concat(parts, 0)
