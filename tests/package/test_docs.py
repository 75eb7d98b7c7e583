"""The documentation runs: every ```python block of README.md and docs/*.md.

A ```text block right after a ```python block (blank lines between) is its
output: the block must print exactly that.

The blocks of one page run in order in one fresh Python process
(tests/support/docs_worker.py), in a temporary working directory: they share
names (a page imports once, a later block may use a folder an earlier one
trained into), and each block starts on a fresh default graph. A block
fenced as ```python no-run is shown but not run (for blocks that need a
cluster, data or minutes; docs/development.md says when to use it). Shell
blocks are not run. The pages and their blocks: tests/support/docs_pages.py.
"""

import os
import re

import pytest

from tests.support.checkout import ROOT
from tests.support.docs_pages import (EAGER, NO_RUN, PAGES, RUN, blocks, parse,
                                      read, run_blocks, runnable)

# Info strings a fence may carry: a typo such as ```pyhton would otherwise
# hide a block from the run.
KNOWN = {'', RUN, NO_RUN, 'text', 'console', 'sh', 'bash', 'json'}


@pytest.mark.parametrize('page', [p for p in PAGES
                                  if runnable(p) and EAGER not in read(p)])
def test_python_blocks_of_page_run(page, tmp_path):
  run = run_blocks(page, tmp_path)
  assert run.returncode == 0, run.stderr[-4000:]


@pytest.mark.parametrize('page', PAGES)
def test_every_fence_is_a_known_kind(page):
  unknown = ['line %d: ```%s' % (line - 1, info)
             for info, line, _ in blocks(page) if info not in KNOWN]
  assert not unknown, '%s: unknown fence info (known: %s): %s' % (
      page, sorted(KNOWN), unknown)
  indented = [n for n, l in enumerate(read(page).split('\n'), 1)
              if re.match(r'^\s+```', l)]
  assert not indented, ('%s: indented fences at lines %s are not run; start '
                        'them at column 0' % (page, indented))


@pytest.mark.parametrize('page', PAGES)
def test_relative_links_point_to_files(page):
  text = re.sub(r'(?ms)^```.*?^```[^\n]*$', '', read(page))  # No fences.
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
  quickstart = read('README.md').split('\n## Quickstart\n', 1)[1]
  _, _, first = next(parse(quickstart, 'README.md'))
  assert first.split() == ['bin/tf1prune_demo', 'bin/run_tests'], first
  for command in first.split():
    assert os.access(os.path.join(ROOT, command), os.X_OK), command
