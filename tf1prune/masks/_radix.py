"""The exact k-th largest of ordered integer keys, and where its ties lie.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks._radix import select_keys
    >>> keys = np.array([5, 9, 9, 1, 9, 7], np.int32)
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   t, n_equal, need, last = sess.run(select_keys(tf.constant(keys), 3))
    >>> int(t), int(n_equal), int(need), int(last)
    (9, 3, 3, 4)

Keys are the bit patterns of non-negative floats (`tf.bitcast`), which order
like the floats. `select_keys` returns the k-th largest key t, how many keys
equal it, how many of those a top-k takes (`need`), and the flat position of
the `need`-th of them (`last`): the top k are the keys above t and the ties
at positions <= last.

int32 keys (float32 scores), for a static size n:

1. One `Bincount` of the high 16 bits of every key: the boundary bin, the
   rank inside it, its size c.
2. A small boundary bin (c * 16 <= max(n / 10, 2**16)): the rows of 16 flat
   positions holding a member are found with one compare and a row
   `reduce_any`; only they are gathered, and a 2**15-bin histogram of their
   members' low bits gives t; the ties are all among the gathered rows.
3. A large bin: a strided sample (~4096 keys) proposes a member's value v,
   and one pass counts, per row of 128, the keys equal to v. If they are all
   c members, t = v and those counts place the ties. Otherwise (a large bin
   of distinct keys) a full 2**15-bin histogram of `key XOR bin` (keys outside
   the bin fall outside the histogram) gives t, and a second counting pass
   places the ties.

So the work is a fixed number of passes whatever the distribution: no sort,
no cumulative sum or gather of size n. `Bincount` is the raw op:
`tf.math.bincount` adds a `reduce_max` pass. int64 keys (float64 scores), or
a size unknown when the graph is built, take a plain four-level radix select.
"""

import tensorflow.compat.v1 as tf

__all__ = ['select_keys']

_HIGH = 16            # bits of the first histogram (of 31 used)
_LOW = 15             # bits of the second
_FIND_ROW = 16        # flat positions per row when locating the boundary bin
_COUNT_ROW = 128      # ... when counting ties (uint8 sums: at most 255)
_ALIGN = 16           # slices start at multiples of 16 keys (64 bytes)
_SAMPLE = 4096


def _bincount(keys, size):
  """int32 counts of the int32 `keys` in [0, size); keys >= size are ignored.

  Keys must be >= 0.
  """
  return tf.raw_ops.Bincount(arr=keys, size=size,
                             weights=tf.zeros([0], tf.int32))


def _pick(counts, rank):
  """The bin holding the `rank`-th largest, counting from the top bin.

  Returns (bin, rank inside the bin, count of the bin).
  """
  at_least = tf.cumsum(counts, reverse=True)
  chosen = tf.reduce_sum(tf.cast(at_least >= rank, tf.int32)) - 1
  count = counts[chosen]
  return chosen, rank - (at_least[chosen] - count), count


class _Rows(object):
  """A flat tensor of static size n seen as rows of `width` positions.

  `main` is the first `n // width * width` entries as a matrix (a reshape of a
  slice at 0, no copy), `tail` the rest padded with `fill` to one row.
  """

  def __init__(self, flat, width, fill):
    n = flat.get_shape().num_elements()
    self.width, self.full = width, n // width
    self.main = (tf.reshape(flat[:self.full * width], [self.full, width])
                 if self.full else None)
    self.tail = None
    if n % width:
      rest = flat[self.full * width:]
      self.tail = tf.concat(
          [rest, tf.fill([width - n % width], tf.cast(fill, flat.dtype))],
          0)[None]

  def per_row(self, fn):
    """Concatenates fn(matrix) -> [rows] over main and tail."""
    parts = [fn(m) for m in (self.main, self.tail) if m is not None]
    return parts[0] if len(parts) == 1 else tf.concat(parts, 0)

  def gather(self, rows):
    """The rows (int32 indices into main, then tail) as a [len, width] matrix."""
    if self.main is None:
      return tf.gather(self.tail, tf.zeros_like(rows))
    if self.tail is None:
      return tf.gather(self.main, rows)
    got = tf.gather(self.main, tf.minimum(rows, self.full - 1))
    return tf.where_v2((rows >= self.full)[:, None], self.tail, got)


def _nth_true_in_rows(rows, hits, counts, need):
  """Flat position of the need-th hit (need >= 1), row by row.

  rows: _Rows of the keys; hits(matrix) -> bool matrix; counts: int32 hits
  per row (all rows). Only one row is examined entry by entry.
  """
  before = tf.cumsum(counts, exclusive=True)
  row = tf.reduce_sum(tf.cast(before < need, tf.int32)) - 1
  one = tf.cast(hits(rows.gather(row[None]))[0], tf.int32)
  col = tf.reduce_sum(tf.cast(tf.cumsum(one) < need - before[row], tf.int32))
  return row * rows.width + col


def _count_equal(rows, value):
  """int32 count per row of `rows` of the keys equal to `value`."""
  return rows.per_row(lambda m: tf.cast(tf.reduce_sum(
      tf.cast(tf.equal(m, value), tf.uint8), 1), tf.int32))


def _select_int32(key, k):
  n = key.get_shape().num_elements()
  digit = tf.bitwise.right_shift(key, _LOW)
  bin_, rank, count = _pick(_bincount(digit, 1 << _HIGH), k)
  low_mask = (1 << _LOW) - 1
  counting = _Rows(key, _COUNT_ROW, -2)

  def small_bin():
    found = _Rows(digit, _FIND_ROW, -2)
    flags = found.per_row(lambda m: tf.reduce_any(tf.equal(m, bin_), 1))
    rows = tf.cast(tf.where(flags)[:, 0], tf.int32)
    keys = _Rows(key, _FIND_ROW, -2).gather(rows)
    member = tf.equal(tf.bitwise.right_shift(keys, _LOW), bin_)
    low = tf.where_v2(member, tf.bitwise.bitwise_and(keys, low_mask),
                      1 << _LOW)
    low_bin, need, n_equal = _pick(_bincount(low, 1 << _LOW), rank)
    t = tf.bitwise.bitwise_or(tf.bitwise.left_shift(bin_, _LOW), low_bin)
    ties = tf.equal(keys, t)
    per_row = tf.cast(tf.reduce_sum(tf.cast(ties, tf.uint8), 1), tf.int32)
    before = tf.cumsum(per_row, exclusive=True)
    at = tf.reduce_sum(tf.cast(before < need, tf.int32)) - 1
    col = tf.reduce_sum(tf.cast(
        tf.cumsum(tf.cast(ties[at], tf.int32)) < need - before[at], tf.int32))
    return t, n_equal, need, rows[at] * _FIND_ROW + col

  def large_bin():
    sample = key[::max(1, n // _SAMPLE)]
    members = tf.equal(tf.bitwise.right_shift(sample, _LOW), bin_)
    guess = tf.reduce_max(tf.where_v2(members, sample, -1))
    per_row = _count_equal(counting, guess)

    def one_value():
      last = _nth_true_in_rows(counting, lambda m: tf.equal(m, guess),
                               per_row, rank)
      return guess, count, rank, last

    def distinct_values():
      low = tf.bitwise.bitwise_xor(key, tf.bitwise.left_shift(bin_, _LOW))
      low_bin, need, n_equal = _pick(_bincount(low, 1 << _LOW), rank)
      t = tf.bitwise.bitwise_or(tf.bitwise.left_shift(bin_, _LOW), low_bin)
      last = _nth_true_in_rows(counting, lambda m: tf.equal(m, t),
                               _count_equal(counting, t), need)
      return t, n_equal, need, last

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
    counting = _Rows(key, _COUNT_ROW, -2)
    last = _nth_true_in_rows(counting, lambda m: tf.equal(m, prefix),
                             _count_equal(counting, prefix), rank)
  return prefix, count, rank, last


def select_keys(key, k):
  """The k-th largest of the flat non-negative int keys and where its ties are.

  Args:
    key: 1-D int32 or int64 tensor, entries >= 0 (bit patterns of floats).
    k: int32 scalar tensor, 1 <= k <= size of key.

  Returns:
    (t, n_equal, need, last): the k-th largest key (key's dtype); int32 count
    of keys equal to t; int32 count of those among the top k (>= 1); int32
    flat position of the need-th key equal to t.
  """
  if key.dtype == tf.int32 and key.get_shape().num_elements() is not None:
    return _select_int32(key, k)
  return _select_any(key, k)


def top_k_mask(key, t, need, last, n_equal):
  """bool mask of the keys above t and the ties at positions <= last.

  The keys before the aligned position of `last` are compared with `>= t`,
  those after with `> t` (slices at multiples of 16 keys share the keys'
  buffer), the 16 around it entry by entry. When every tie is kept
  (`need == n_equal`) it is one `>= t`.
  """
  n = key.get_shape().num_elements()
  if n is None:
    ties = tf.cast(tf.equal(key, t), tf.int32)
    return tf.logical_or(key > t, tf.logical_and(
        tf.equal(key, t), tf.cumsum(ties) <= need))

  def in_order():
    start = tf.minimum((last + 1) // _ALIGN * _ALIGN, n)
    stop = tf.minimum(start + _ALIGN, n)
    middle = tf.slice(key, start[None], (stop - start)[None])
    position = start + tf.range(stop - start)
    return tf.concat([
        tf.slice(key, [0], start[None]) >= t,
        tf.logical_or(middle > t, tf.logical_and(tf.equal(middle, t),
                                                 position <= last)),
        tf.slice(key, stop[None], [-1]) > t], 0)

  return tf.cond(tf.equal(need, n_equal), lambda: key >= t, in_order)
