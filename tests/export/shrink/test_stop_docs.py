"""docs/structured.md lists the shrink's stop reasons: each one it lists is
one the code gives (and the random nets check that each one they meet is
listed: tests/export/shrink/test_random_nets.py)."""

import glob
import os
import re

import tf1prune
from tests.support.shrunk_graphs import documented_stops, is_documented

_PACKAGE = os.path.dirname(os.path.abspath(tf1prune.__file__))


def _source_text():
  """The string literals of the channel table and the shrink, adjacent
  literals joined (as Python joins them) and escapes undone."""
  text = ''
  for pattern in ('channels/*.py', 'export/shrink/*.py'):
    for path in sorted(glob.glob(os.path.join(_PACKAGE, pattern))):
      with open(path) as f:
        text += f.read()
  text = re.sub(r"'\s*\n\s*'", '', text)
  text = re.sub(r"'\s*\n\s*\(?'", '', text)
  return text.replace("\\'", "'")


def test_every_stop_the_docs_list_is_one_the_code_gives():
  source = _source_text()
  missing = []
  for pattern in documented_stops():
    for piece in re.split(r'<[^>]*>|\.\.\.|: ', pattern):
      piece = piece.strip(' ,:')
      if len(piece.split()) >= 2 and piece not in source:
        missing.append((pattern, piece))
  assert not missing


def test_the_documented_patterns_match_the_stops_they_stand_for():
  patterns = documented_stops()
  for reason in [
      'Cumsum is not among the ops the shrink passes',
      'it broadcasts n4/Sigmoid, a map that varies per example, over the '
      'channels: a removed channel is no constant after it',
      'the input size of conv3 is unknown: only channels whose constant is '
      '0 are removed',
      'its channels come from this Placeholder, which the shrink does not '
      'remove']:
    assert is_documented(reason, patterns), reason
  assert not is_documented('its channels are elsewhere', patterns)
