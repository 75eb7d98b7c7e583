"""Files that appear whole or not at all.

    >>> import os, tempfile
    >>> from tf1prune.export.atomic import write_atomically
    >>> path = os.path.join(tempfile.mkdtemp(), 'model.pb')
    >>> with write_atomically(path) as f:
    ...   _ = f.write(b'whole')
    >>> open(path, 'rb').read(), os.listdir(os.path.dirname(path))
    (b'whole', ['model.pb'])

`write_atomically` writes into a temporary file next to the target and
renames it into place once the block succeeded; if the block raises, the
temporary file is removed and the target is left as it was.
"""

import contextlib
import os
import tempfile


def _umask():
  mask = os.umask(0o22)
  os.umask(mask)
  return mask


@contextlib.contextmanager
def write_atomically(path):
  """Yields a binary file; on success it replaces `path` in one rename.

  The file is created in `path`'s directory (so `os.replace` is atomic) and
  removed if the block raises: `path` is then left as it was.

  Raises:
    ValueError: the directory does not exist or is not writable.
  """
  directory = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(directory):
    raise ValueError('output directory %r does not exist; create it first'
                     % directory)
  try:
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path),
                               suffix='.tmp', dir=directory)
  except OSError as e:
    raise ValueError('output directory %r is not writable: %s'
                     % (directory, e.strerror or e))
  try:
    with os.fdopen(fd, 'wb') as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
