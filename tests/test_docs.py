"""The documentation runs: every ```python block of README.md and docs/*.md.

A ```text block right after a ```python block (blank lines between) is its
output: the block must print exactly that.

The blocks of one page run in order in one fresh Python process
(tests/support/docs_worker.py), in a temporary working directory: they share
names (a page imports once, a later block may use a folder an earlier one
trained into), and each block starts on a fresh default graph. A block fenced as
```python no-run is shown but not run (for blocks that need a cluster, data or
minutes; docs/development.md says when to use it). Shell blocks are not run.
"""

import glob
import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.checkout import ROOT, SUPPORT

PAGES = ['README.md'] + sorted(
    os.path.relpath(p, ROOT)
    for p in glob.glob(os.path.join(ROOT, 'docs', '*.md')))
RUN, NO_RUN = 'python', 'python no-run'
# Info strings a fence may carry: a typo such as ```pyhton would otherwise
# hide a block from the run.
KNOWN = {'', RUN, NO_RUN, 'text', 'console', 'sh', 'bash', 'json'}
_FENCE = re.compile(r'^(```+)(.*)$')


def _read(page):
  with open(os.path.join(ROOT, page)) as f:
    return f.read()


def _parse(text, page):
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


def _blocks(page):
  return list(_parse(_read(page), page))


def _runnable(page):
  """The page's ```python blocks to run, each with `expect`: the text of a
  ```text block right after it (blank lines between), which must be what
  the block prints; else None."""
  blocks, lines = _blocks(page), _read(page).split('\n')
  runnable = []
  for k, (info, line, code) in enumerate(blocks):
    if info != RUN:
      continue
    expect = None
    if k + 1 < len(blocks) and blocks[k + 1][0] == 'text':
      between = lines[line - 1 + code.count('\n') + 1:blocks[k + 1][1] - 2]
      if not any(l.strip() for l in between):
        expect = blocks[k + 1][2]
    runnable.append(dict(path=page, line=line, code=code, expect=expect))
  return runnable


# A page with this line runs in an eager Keras process instead
# (tests/keras/test_docs.py): its blocks need TF 2.x and Keras.
EAGER = '<!-- eager: run by tests/keras/test_docs.py -->'


@pytest.mark.parametrize('page', [p for p in PAGES
                                  if _runnable(p) and EAGER not in _read(p)])
def test_python_blocks_of_page_run(page, tmp_path):
  spec = tmp_path / 'blocks.json'
  spec.write_text(json.dumps(_runnable(page)))
  work = tmp_path / 'cwd'
  work.mkdir()
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
  run = subprocess.run(
      [sys.executable, os.path.join(SUPPORT, 'docs_worker.py'),
       str(spec)], cwd=str(work), env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
  assert run.returncode == 0, run.stderr[-4000:]


@pytest.mark.parametrize('page', PAGES)
def test_every_fence_is_a_known_kind(page):
  unknown = ['line %d: ```%s' % (line - 1, info)
             for info, line, _ in _blocks(page) if info not in KNOWN]
  assert not unknown, '%s: unknown fence info (known: %s): %s' % (
      page, sorted(KNOWN), unknown)
  indented = [n for n, l in enumerate(_read(page).split('\n'), 1)
              if re.match(r'^\s+```', l)]
  assert not indented, ('%s: indented fences at lines %s are not run; start '
                        'them at column 0' % (page, indented))


@pytest.mark.parametrize('page', PAGES)
def test_relative_links_point_to_files(page):
  text = re.sub(r'(?ms)^```.*?^```[^\n]*$', '', _read(page))  # No fences.
  folder = os.path.dirname(os.path.join(ROOT, page))
  broken = []
  for target in re.findall(r'\]\(([^)\s]+)\)', text):
    if re.match(r'[a-z]+:', target) or target.startswith('#'):
      continue
    path = os.path.normpath(os.path.join(folder, target.split('#')[0]))
    if not os.path.exists(path):
      broken.append(target)
  assert not broken, '%s: links to missing files: %s' % (page, broken)


def test_readme_quickstart_is_the_demo_then_the_tests():
  quickstart = _read('README.md').split('\n## Quickstart\n', 1)[1]
  _, _, first = next(_parse(quickstart, 'README.md'))
  assert first.split() == ['bin/tf1prune_demo', 'bin/run_tests'], first
  for command in first.split():
    assert os.access(os.path.join(ROOT, command), os.X_OK), command
