"""`regex:value` hparam lists, such as `weight_sparsity_map=[conv1:0.8]`.

    >>> from tf1prune.regex_maps import RegexMap
    >>> m = RegexMap('weight_sparsity_map', ['conv1:0.8', 'fc.*:0.9'], float)
    >>> m.lookup('conv1/weights'), m.lookup('logits/weights')
    (0.8, None)

The regex is matched with `re.search` against the weight's op name; the value
is everything after the last ':'. A weight matched by two entries is an error:
which one should win would be a guess.
"""

import re

__all__ = ['RegexMap']


class RegexMap(object):
  """An ordered list of (compiled regex, converted value) pairs.

  Args:
    hparam: the hparam's name, for error messages.
    entries: list of 'regex:value' strings; '' entries are skipped.
    convert: callable text -> value; raises ValueError on bad text.

  Raises:
    ValueError: an entry has no ':', a bad regex or a bad value.
  """

  def __init__(self, hparam, entries, convert):
    self._hparam = hparam
    self._pairs = []
    for entry in entries:
      if not entry:
        continue
      pattern, sep, text = entry.rpartition(':')
      if not sep or not pattern:
        raise ValueError("%s entries must look like 'regex:value', got %r" %
                         (hparam, entry))
      try:
        regex = re.compile(pattern)
      except re.error as e:
        raise ValueError('%s entry %r has a bad regex: %s' % (hparam, entry, e))
      try:
        value = convert(text)
      except ValueError as e:
        raise ValueError('%s entry %r has a bad value: %s' % (hparam, entry, e))
      self._pairs.append((regex, value))

  def __bool__(self):
    return bool(self._pairs)

  __nonzero__ = __bool__

  def lookup(self, name, default=None):
    """Returns the value of the one entry matching `name`, else `default`.

    Raises:
      ValueError: two entries match `name`.
    """
    hits = [(r.pattern, v) for r, v in self._pairs if r.search(name)]
    if len(hits) > 1:
      raise ValueError('%s matches weight %s more than once: %s; make the '
                       'regexes exclusive' % (self._hparam, name,
                                              ', '.join(p for p, _ in hits)))
    return hits[0][1] if hits else default

  def unmatched(self, names):
    """Returns the patterns that match none of `names`."""
    return [r.pattern for r, _ in self._pairs
            if not any(r.search(n) for n in names)]
