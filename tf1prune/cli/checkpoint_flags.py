"""Parsers of `prune_checkpoint`'s flags: text -> the library's arguments.

    >>> from tf1prune.cli.checkpoint_flags import parse_sparsity_map, parse_zero
    >>> parse_sparsity_map('conv.*/weights:0.8, fc1/weights:0.5')
    {'conv.*/weights': 0.8, 'fc1/weights': 0.5}
    >>> parse_zero('conv2/weights[:, 1:3, ...]')
    ('conv2/weights', (slice(None, None, None), slice(1, 3, None), Ellipsis))

Each raises `CheckpointPruneError` with one line that names the flag, the
value and the form it takes.
"""

import re

from tf1prune.export.checkpoint_prune import (CheckpointPruneError,
                                              compile_regex)

__all__ = ['parse_index', 'parse_sparsity_map', 'parse_zero']


def parse_sparsity_map(text):
  """Parses 'regex:0.8,regex2:0.5' into a dict regex -> float in [0, 1).

  Raises:
    CheckpointPruneError: an entry has no ':', a bad regex or sparsity, or a
      regex given twice.
  """
  result = {}
  for entry in (text or '').split(','):
    entry = entry.strip()
    if not entry:
      continue
    pattern, sep, value = entry.rpartition(':')
    if not sep or not pattern:
      raise CheckpointPruneError(
          "--sparsity entries must look like 'regex:0.8', got %r" % entry)
    compile_regex(pattern, '--sparsity')
    try:
      sparsity = float(value)
    except ValueError:
      sparsity = None
    if sparsity is None or not 0.0 <= sparsity < 1.0:
      raise CheckpointPruneError('--sparsity entry %r: sparsity must be a '
                                 'number in [0, 1), got %r' % (entry, value))
    if pattern in result:
      raise CheckpointPruneError(
          '--sparsity regex %r is given twice (%r and %r); give each regex '
          'once' % (pattern, result[pattern], sparsity))
    result[pattern] = sparsity
  return result


def _index_part(text, whole):
  text = text.strip()
  if text == '...':
    return Ellipsis
  try:
    if ':' in text:
      bounds = [int(b) if b.strip() else None for b in text.split(':')]
      if len(bounds) > 3:
        raise ValueError(text)
      return slice(*bounds)
    return int(text)
  except ValueError:
    raise CheckpointPruneError('index %r: each part must be an int, a slice '
                               'like 1:3 or ::2, or ..., got %r'
                               % (whole, text))


def parse_index(text):
  """Parses a NumPy index such as ':, :, 29, 13' (no brackets) into a tuple.

  Raises:
    CheckpointPruneError: a part is not an int, a slice or '...'.
  """
  return tuple(_index_part(part, text) for part in text.split(','))


def parse_zero(text):
  """Parses 'regex[index]' into (regex, index tuple).

  Raises:
    CheckpointPruneError: no trailing '[...]', a bad regex or a bad index.
  """
  match = re.match(r'^(?P<name>.+)\[(?P<index>[^\[\]]*)\]\s*$', text or '')
  if not match:
    raise CheckpointPruneError("--zero must look like 'conv2/weights[:, :, "
                               "29, 13]', got %r" % text)
  compile_regex(match.group('name'), '--zero')
  return match.group('name'), parse_index(match.group('index'))
