"""Runs the ```python blocks of one Markdown page in order (tests/test_docs.py).

    python tests/_docs_worker.py blocks.json

`blocks.json` is a list of `{"path": ..., "line": ..., "code": ...}`. The
blocks share one namespace (a page imports once); each starts on a fresh
default graph. A failing block prints its traceback, whose file and line
numbers are the page's own, and the worker exits with status 1.
"""

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
    try:
      code = compile(source, block['path'], 'exec')
      exec(code, namespace)  # pylint: disable=exec-used
    except BaseException:  # pylint: disable=broad-except
      traceback.print_exc()
      sys.stderr.write('docs block failed: %s, the block starting at line %d\n'
                       % (block['path'], block['line']))
      return 1
    sys.stdout.flush()
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
