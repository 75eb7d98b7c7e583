"""Regex lists of the hparams: `regex:value` maps and plain regex lists.

    >>> from tf1prune.plan.regex_maps import RegexList, RegexMap
    >>> m = RegexMap('weight_sparsity_map', ['conv1:0.8', 'fc.*:0.9'], float)
    >>> m.lookup('conv1/weights'), m.lookup('logits/weights')
    (0.8, None)
    >>> RegexList('do_not_prune', ['logits', '']).matches('logits/weights')
    ['logits']

Every regex is matched with `re.search` against a weight's op name. In a map
the value is everything after the last ':'. A weight matched by two entries of
a map is an error: which one should win would be a guess. `tf1prune.plan.spec`
builds one of these per hparam; nothing else compiles the hparams' regexes.
"""

import re

__all__ = ['RegexList', 'RegexMap']


def _compile(hparam, entry, pattern, problem):
  try:
    return re.compile(pattern)
  except re.error as e:
    raise ValueError(problem % (hparam, entry, e))


class _ByValue(object):
  """Equal, and hashed alike, when of one class with equal `_key()`s."""

  def _key(self):
    raise NotImplementedError

  def __eq__(self, other):
    return type(other) is type(self) and other._key() == self._key()

  def __ne__(self, other):
    return not self == other

  def __hash__(self):
    return hash(self._key())


class RegexList(_ByValue):
  """An ordered list of compiled regexes ('' entries skipped).

  Args:
    hparam: the hparam's name, for error messages.
    entries: list of regex strings.

  Raises:
    ValueError: an entry is not a valid regex.
  """

  def __init__(self, hparam, entries):
    self._hparam = hparam
    self._regexes = tuple(
        _compile(hparam, entry, entry, '%s entry %r is not a valid regex: %s')
        for entry in entries if entry)

  @property
  def patterns(self):
    """The regexes' patterns, in order."""
    return [r.pattern for r in self._regexes]

  def __bool__(self):
    return bool(self._regexes)

  __nonzero__ = __bool__

  def matches(self, *names):
    """Returns the patterns that match any of `names`, in order."""
    return [r.pattern for r in self._regexes
            if any(r.search(n) for n in names if n is not None)]

  def unmatched(self, names):
    """Returns the patterns that match none of `names`."""
    return [r.pattern for r in self._regexes
            if not any(r.search(n) for n in names)]

  def _key(self):
    return self._hparam, tuple(self.patterns)

  def __repr__(self):
    return 'RegexList(%r, %r)' % self._key()


class RegexMap(_ByValue):
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
      regex = _compile(hparam, entry, pattern, '%s entry %r has a bad regex: %s')
      try:
        value = convert(text)
      except ValueError as e:
        raise ValueError('%s entry %r has a bad value: %s' % (hparam, entry, e))
      self._pairs.append((regex, value))
    self._pairs = tuple(self._pairs)

  @property
  def patterns(self):
    """The regexes' patterns, in order."""
    return [r.pattern for r, _ in self._pairs]

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

  def _key(self):
    return self._hparam, tuple((r.pattern, v) for r, v in self._pairs)

  def __repr__(self):
    return 'RegexMap(%r, %r)' % self._key()
