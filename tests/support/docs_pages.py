"""The Markdown pages of the checkout and their ```python blocks.

    >>> from tests.support.docs_pages import PAGES, runnable
    >>> PAGES[0]
    'README.md'
    >>> sorted(runnable('README.md')[0])
    ['code', 'expect', 'line', 'path']

A ```text block right after a ```python block (blank lines between) is its
output. `run_blocks` runs a page's ```python blocks in order in one fresh
process (docs_worker.py), in a new working directory: tests/package/test_docs.py
runs the graph-mode pages, tests/keras/test_docs.py the pages marked EAGER.
"""

import glob
import json
import os
import re
import subprocess
import sys

from tests.support.checkout import ROOT, SUPPORT

PAGES = ['README.md'] + sorted(
    os.path.relpath(p, ROOT)
    for p in glob.glob(os.path.join(ROOT, 'docs', '*.md')))
RUN, NO_RUN = 'python', 'python no-run'
# A page with this line runs in an eager Keras process instead
# (tests/keras/test_docs.py): its blocks need TF 2.x and Keras.
EAGER = '<!-- eager: run by tests/keras/test_docs.py -->'
_FENCE = re.compile(r'^(```+)(.*)$')


def read(page):
  """The text of `page` (a path relative to the checkout root)."""
  with open(os.path.join(ROOT, page)) as f:
    return f.read()


def parse(text, page):
  """Yields (info, first code line number, code) for each fenced block."""
  lines = text.split('\n')
  i = 0
  while i < len(lines):
    match = _FENCE.match(lines[i])
    if not match:
      i += 1
      continue
    fence, info = match.group(1), match.group(2).strip()
    end = i + 1
    while end < len(lines) and not lines[end].startswith(fence):
      end += 1
    assert end < len(lines), '%s:%d: fence never closed' % (page, i + 1)
    yield info, i + 2, '\n'.join(lines[i + 1:end]) + '\n'
    i = end + 1


def blocks(page):
  """[(info, first code line number, code)] of the fenced blocks of `page`."""
  return list(parse(read(page), page))


def runnable(page):
  """The page's ```python blocks to run, each with `expect`: the text of a
  ```text block right after it (blank lines between), which must be what
  the block prints; else None."""
  found, lines = blocks(page), read(page).split('\n')
  result = []
  for k, (info, line, code) in enumerate(found):
    if info != RUN:
      continue
    expect = None
    if k + 1 < len(found) and found[k + 1][0] == 'text':
      between = lines[line - 1 + code.count('\n') + 1:found[k + 1][1] - 2]
      if not any(l.strip() for l in between):
        expect = found[k + 1][2]
    result.append(dict(path=page, line=line, code=code, expect=expect))
  return result


def run_blocks(page, directory):
  """Runs the `runnable` blocks of `page` in one process of this Python,
  in a new folder of `directory` (a pathlib.Path); the CompletedProcess
  (text stdout and stderr)."""
  spec = directory / 'blocks.json'
  spec.write_text(json.dumps(runnable(page)))
  work = directory / 'cwd'
  work.mkdir()
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
  return subprocess.run(
      [sys.executable, os.path.join(SUPPORT, 'docs_worker.py'), str(spec)],
      cwd=str(work), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      universal_newlines=True, timeout=600)
