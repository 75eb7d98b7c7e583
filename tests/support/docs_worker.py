"""Runs the ```python blocks of one Markdown page in order, in this process.

    python tests/support/docs_worker.py blocks.json

`blocks.json` is a list of `{"path": ..., "line": ..., "code": ...,
"expect": ...}`. The blocks share one namespace (a page imports once); each
starts on a fresh default graph. A block with an `expect` text must print
exactly that (the page's ```text block after it). A failing block prints
its traceback, whose file and line numbers are the page's own (or the
difference of its output), and the worker exits with status 1.
`tests.support.docs_pages.run_blocks` writes blocks.json and starts it.
"""

import difflib
import io
import json
import sys
import traceback

import tensorflow.compat.v1 as tf


def main(argv):
  with open(argv[1]) as f:
    blocks = json.load(f)
  namespace = {'__name__': '__main__'}
  for block in blocks:
    tf.reset_default_graph()
    # Blank lines in front, so tracebacks give the line inside the page.
    source = '\n' * (block['line'] - 1) + block['code']
    printed, stdout = io.StringIO(), sys.stdout
    sys.stdout = printed
    try:
      code = compile(source, block['path'], 'exec')
      exec(code, namespace)  # pylint: disable=exec-used
    except BaseException:  # pylint: disable=broad-except
      sys.stdout = stdout
      traceback.print_exc()
      sys.stderr.write('docs block failed: %s, the block starting at line %d\n'
                       % (block['path'], block['line']))
      return 1
    finally:
      sys.stdout = stdout
    stdout.write(printed.getvalue())
    stdout.flush()
    expect = block.get('expect')
    if expect is not None and printed.getvalue() != expect:
      sys.stderr.write(''.join(difflib.unified_diff(
          expect.splitlines(True), printed.getvalue().splitlines(True),
          'the page', 'printed')))
      sys.stderr.write('docs block output differs: %s, the block starting at '
                       'line %d prints other than the text block after it\n'
                       % (block['path'], block['line']))
      return 1
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
