"""Runs `strip_pruning_vars` and stops it at a named point, to be killed.

    python tests/support/kill_worker.py POINT READY_FILE -- \
        STRIP_PRUNING_VARS_FLAGS...

POINT is where the run pauses (it then writes READY_FILE and sleeps until
killed): `strip` (half-way through writing the stripped graph), `shrink`
(the stripped graph staged, the shrink about to start), `shrink_write`
(half-way through writing the shrunk graph) or `final` (everything staged,
just before the rename into place). tests/export/test_killed_export.py
SIGKILLs it there.
"""

import contextlib
import os
import sys
import time


def _pause(ready):
  with open(ready, 'w') as f:
    f.write(str(os.getpid()))
  while True:
    time.sleep(60)


def main():
  point, ready = sys.argv[1], sys.argv[2]
  argv = sys.argv[sys.argv.index('--') + 1:]
  from tf1prune.cli import strip_pruning_vars
  from tf1prune.export import stream
  from tf1prune.export.shrink import run
  if point == 'strip':
    chunks, calls = stream.const_node_chunks, []

    def paused_chunks(node, value):
      calls.append(node.name)
      if len(calls) == 2:
        _pause(ready)
      return chunks(node, value)

    stream.const_node_chunks = paused_chunks
  elif point == 'shrink':
    shrink = run.shrink_graph_def

    def paused_shrink(*args, **kwargs):
      _pause(ready)
      return shrink(*args, **kwargs)

    run.shrink_graph_def = paused_shrink
  elif point == 'shrink_write':
    write = run.write_atomically

    @contextlib.contextmanager
    def paused_write(path):
      with write(path) as f:

        class Half(object):
          def write(self, data):
            f.write(data[:len(data) // 2])
            f.flush()
            _pause(ready)

        yield Half()

    run.write_atomically = paused_write
  elif point == 'final':
    replace = os.replace
    target = os.path.abspath(os.path.join(
        [a for a in argv if a.startswith('--output_dir=')][0].split('=', 1)[1],
        'm.pb'))

    def paused_replace(src, dst):
      if os.path.abspath(dst) == target:
        _pause(ready)
      return replace(src, dst)

    os.replace = paused_replace
  else:
    raise SystemExit('unknown point %r' % point)
  return strip_pruning_vars.main(argv)


if __name__ == '__main__':
  sys.exit(main())
