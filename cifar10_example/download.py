"""Fetching and unpacking the official CIFAR-10 binary archive, atomically.

    >>> from cifar10_example import download
    >>> download.CIFAR10_URL
    'https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz'

`download_and_extract(data_dir)` downloads the archive into a temporary file
inside `data_dir`, unpacks it into a temporary folder there, checks the six
files, and only then renames the folder to `data_dir/cifar-10-batches-bin`.
An interrupted run leaves no half-written data set behind (at most a hidden
temporary, removed on the next error path). Any URL urllib opens works,
`file://` included, which is how the tests exercise it without a network.
"""

import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request

from cifar10_example import files

__all__ = ['CIFAR10_URL', 'download_and_extract']

CIFAR10_URL = 'https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz'
_CHUNK = 1 << 20


def _fetch(url, path, timeout):
  try:
    with urllib.request.urlopen(url, timeout=timeout) as response, \
        open(path, 'wb') as out:
      shutil.copyfileobj(response, out, _CHUNK)
  except (urllib.error.URLError, OSError, ValueError) as e:
    raise IOError('could not download %s (%s); without internet, fetch it by '
                  'hand, unpack it and pass its folder as --data_dir' %
                  (url, getattr(e, 'reason', e)))


def _safe_extract(archive, target):
  """Extracts regular files and folders only, all of them inside `target`."""
  root = os.path.realpath(target)
  try:
    with tarfile.open(archive, 'r:*') as tar:
      members = []
      for member in tar.getmembers():
        path = os.path.realpath(os.path.join(root, member.name))
        if not (member.isfile() or member.isdir()) or \
            os.path.commonpath([root, path]) != root:
          raise IOError('refusing archive member %r: only files and folders '
                        'inside the archive root are extracted' % member.name)
        members.append(member)
      tar.extractall(root, members=members)
  except tarfile.TarError as e:
    raise IOError('%s is not a readable tar archive: %s' % (archive, e))


def download_and_extract(data_dir, url=CIFAR10_URL, timeout=60):
  """Makes sure `data_dir` holds CIFAR-10, downloading it if it does not.

  Args:
    data_dir: destination folder (created if needed).
    url: the archive, a `.tar.gz` holding `cifar-10-batches-bin/`.
    timeout: seconds to wait for the server.

  Returns:
    The folder holding the six `.bin` files.

  Raises:
    IOError: the download failed, the archive is unreadable or unsafe, or it
      has no complete `cifar-10-batches-bin` folder.
    ValueError: `data_dir` already holds an incomplete CIFAR-10.
  """
  found = files.find_cifar10_files(data_dir)
  if found is not None:
    return os.path.dirname(found[1][0])
  if not os.path.isdir(data_dir):
    os.makedirs(data_dir)
  target = os.path.join(data_dir, files.CIFAR10_DIRNAME)
  fd, archive = tempfile.mkstemp(prefix='.cifar10-', suffix='.tar.gz',
                                 dir=data_dir)
  os.close(fd)
  unpacked = tempfile.mkdtemp(prefix='.cifar10-', dir=data_dir)
  try:
    _fetch(url, archive, timeout)
    _safe_extract(archive, unpacked)
    source = os.path.join(unpacked, files.CIFAR10_DIRNAME)
    try:
      complete = files.find_cifar10_files(source) is not None
    except ValueError as e:
      raise IOError('the archive from %s is incomplete: %s' % (url, e))
    if not complete or not os.path.isdir(source):
      raise IOError('the archive from %s has no %s/ folder with the CIFAR-10 '
                    'binary files' % (url, files.CIFAR10_DIRNAME))
    if os.path.isdir(target) and not os.listdir(target):
      os.rmdir(target)
    if os.path.exists(target):
      raise IOError('%s exists and holds no CIFAR-10 files; move it away and '
                    'retry' % target)
    os.rename(source, target)
  finally:
    os.remove(archive)
    shutil.rmtree(unpacked, ignore_errors=True)
  return target
