"""Files that appear whole or not at all, and no litter from killed runs.

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

A run killed outright (SIGKILL, power loss) cannot remove its temporary
files. So every staging file of an output `m.pb` is named
`.m.pb.tf1prune-<host>-<pid>-<random>.<kind>`, and the next write of `m.pb`
(`remove_stale_staging`) removes those of processes of this host that no
longer run. Files of a live process, of another host or of another output
are never touched.
"""

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import tempfile

_TAG = 'tf1prune'
# .<output>.tf1prune-<host>-<pid>-<random>.<kind>
_STAGING = re.compile(r'^\.(?P<output>.+)\.' + _TAG +
                      r'-(?P<host>[0-9a-f]{6})-(?P<pid>[0-9]+)-'
                      r'(?P<token>[A-Za-z0-9_]+)\.(?P<kind>[a-z]+)$')


def _umask():
  mask = os.umask(0o22)
  os.umask(mask)
  return mask


def _host():
  """A short tag of this machine: a pid means nothing on another host."""
  return hashlib.sha1(socket.gethostname().encode('utf-8')).hexdigest()[:6]


def _pid_alive(pid):
  if pid == os.getpid():
    return True
  try:
    os.kill(pid, 0)
  except OSError as e:
    return e.errno != errno.ESRCH  # EPERM: alive, someone else's.
  return True


def output_of(path):
  """The output a staging file belongs to, or `os.path.basename(path)`."""
  name = os.path.basename(os.path.abspath(path))
  match = _STAGING.match(name)
  return match.group('output') if match else name


def staging_path(path, kind, directory=False):
  """Creates a new empty staging file (or folder) for output `path`.

  Args:
    path: the output the staging file is for (itself maybe a staging name:
      its output is used).
    kind: the name's last part, letters only (`tmp`, `staged`, ...).
    directory: create a folder instead of a file.

  Returns:
    The path of the new file or folder, in `path`'s directory, named
    `.<output>.tf1prune-<host>-<pid>-<random>.<kind>`.

  Raises:
    ValueError: the directory does not exist or is not writable.
  """
  folder = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(folder):
    raise ValueError('output directory %r does not exist; create it first'
                     % folder)
  prefix = '.%s.%s-%s-%d-' % (output_of(path), _TAG, _host(), os.getpid())
  try:
    if directory:
      return tempfile.mkdtemp(prefix=prefix, suffix='.' + kind, dir=folder)
    fd, name = tempfile.mkstemp(prefix=prefix, suffix='.' + kind, dir=folder)
    os.close(fd)
    return name
  except OSError as e:
    raise ValueError('output directory %r is not writable: %s'
                     % (folder, e.strerror or e))


def remove_stale_staging(path):
  """Removes what killed runs left while writing `path`; returns the paths.

  Only names of `path`'s own staging files (`staging_path`) are looked at,
  and only those whose process, on this host, no longer runs are removed.
  """
  folder = os.path.dirname(os.path.abspath(path))
  output, host = output_of(path), _host()
  removed = []
  try:
    names = os.listdir(folder)
  except OSError:
    return removed
  for name in names:
    match = _STAGING.match(name)
    if (not match or match.group('output') != output or
        match.group('host') != host or _pid_alive(int(match.group('pid')))):
      continue
    stale = os.path.join(folder, name)
    try:
      if os.path.isdir(stale) and not os.path.islink(stale):
        shutil.rmtree(stale)
      else:
        os.remove(stale)
      removed.append(stale)
    except OSError:
      pass  # Another run removed it first, or it is not ours to remove.
  return removed


@contextlib.contextmanager
def write_atomically(path):
  """Yields a binary file; on success it replaces `path` in one rename.

  The file is created in `path`'s directory (so `os.replace` is atomic),
  under a staging name of `path` (`staging_path`), and removed if the block
  raises: `path` is then left as it was. Staging files that killed runs left
  for the same output are removed first (`remove_stale_staging`).

  Raises:
    ValueError: the directory does not exist or is not writable.
  """
  tmp = staging_path(path, 'tmp')
  remove_stale_staging(path)
  try:
    with open(tmp, 'wb') as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
