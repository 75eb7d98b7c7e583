"""Line length check of bin/lint: at most 80 characters, as the code is written.

    python bin/_line_length.py tf1prune tests   # status 1: new long lines

Lines with a URL and Markdown table rows (`|` first) may be longer. The long
lines listed in .ci/long_lines.txt (`path<TAB>line`, matched by text so they
may move) pass until wrapped; every other line over the limit fails.
`--update` rewrites that list from the code (to drop lines that were wrapped;
never to admit new ones).
"""

import argparse
import collections
import io
import os
import sys

LIMIT = 80
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, '.ci', 'long_lines.txt')


def _files(paths):
  for path in paths:
    if os.path.isfile(path):
      yield path
      continue
    for folder, dirs, names in os.walk(path):
      dirs[:] = sorted(d for d in dirs if not d.startswith(('.', '__')))
      for name in sorted(names):
        if name.endswith('.py'):
          yield os.path.join(folder, name)


def _exempt(line):
  return '://' in line or line.lstrip().startswith('|')


def long_lines(paths):
  """Returns [(path relative to ROOT, line number, line)] over LIMIT."""
  found = []
  for path in _files(paths):
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    with io.open(path, encoding='utf-8') as f:
      for number, line in enumerate(f, 1):
        line = line.rstrip('\n')
        if len(line) > LIMIT and not _exempt(line):
          found.append((rel, number, line))
  return found


def _read_baseline():
  if not os.path.exists(BASELINE):
    return collections.Counter()
  with io.open(BASELINE, encoding='utf-8') as f:
    return collections.Counter(
        tuple(l.rstrip('\n').split('\t', 1)) for l in f
        if l.strip() and not l.startswith('#'))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('paths', nargs='+')
  parser.add_argument('--update', action='store_true',
                      help='rewrite .ci/long_lines.txt from the code')
  args = parser.parse_args(argv)
  found = long_lines(args.paths)
  if args.update:
    with io.open(BASELINE, 'w', encoding='utf-8') as f:
      f.write('# Lines over %d characters that pass until wrapped '
              '(bin/_line_length.py).\n# Wrap them and run bin/_line_length.py'
              ' --update PATHS...; never add lines.\n' % LIMIT)
      for rel, _, line in found:
        f.write('%s\t%s\n' % (rel, line))
    print('%s: %d lines' % (os.path.relpath(BASELINE, ROOT), len(found)))
    return 0
  allowed = _read_baseline()
  new = []
  for rel, number, line in found:
    if allowed[(rel, line)] > 0:
      allowed[(rel, line)] -= 1
    else:
      new.append('%s:%d: %d > %d characters' % (rel, number, len(line), LIMIT))
  for message in new:
    print(message)
  gone = sum(allowed.values())
  if gone:
    print('note: %d lines of .ci/long_lines.txt are wrapped now: run '
          'bin/_line_length.py --update with the same paths' % gone)
  return 1 if new else 0


if __name__ == '__main__':
  sys.exit(main())
