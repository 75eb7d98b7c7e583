"""Where the CIFAR-10 binary files are, in plain Python (no TensorFlow).

    >>> from cifar10_example import files
    >>> files.RECORD_BYTES, files.TRAIN_FILES[0], files.find_cifar10_files('/nonexistent')
    (3073, 'data_batch_1.bin', None)

Kept free of TensorFlow so that a script can say which data it uses before
importing TensorFlow (whose import prints lines of its own).
"""

import os

__all__ = ['CIFAR10_DIRNAME', 'RECORD_BYTES', 'TEST_FILES', 'TRAIN_FILES',
           'find_cifar10_files']

CIFAR10_DIRNAME = 'cifar-10-batches-bin'
TRAIN_FILES = tuple('data_batch_%d.bin' % i for i in range(1, 6))
TEST_FILES = ('test_batch.bin',)
HEIGHT, WIDTH, DEPTH = 32, 32, 3
LABEL_BYTES = 1
RECORD_BYTES = LABEL_BYTES + HEIGHT * WIDTH * DEPTH  # 3073


def find_cifar10_files(data_dir):
  """Finds the CIFAR-10 binary files in `data_dir` or its `cifar-10-batches-bin`.

  Args:
    data_dir: a directory path (need not exist).

  Returns:
    `(train_paths, test_paths)`, or None when neither folder holds any of the
    six files.

  Raises:
    ValueError: a folder holds some of the files but not all six (the message
      lists the missing ones), or a file's size is not a positive multiple of
      3073.
  """
  for folder in (os.path.join(data_dir, CIFAR10_DIRNAME), data_dir):
    present = [n for n in TRAIN_FILES + TEST_FILES
               if os.path.isfile(os.path.join(folder, n))]
    if not present:
      continue
    missing = [n for n in TRAIN_FILES + TEST_FILES if n not in present]
    if missing:
      raise ValueError('%s holds part of CIFAR-10 but not %s; remove the '
                       'folder and use --download, or point --data_dir '
                       'elsewhere' % (folder, ', '.join(missing)))
    for name in present:
      size = os.path.getsize(os.path.join(folder, name))
      if size == 0 or size % RECORD_BYTES:
        raise ValueError('%s has %d bytes, not a positive multiple of the '
                         '%d-byte CIFAR-10 record: the file is damaged or not '
                         'CIFAR-10 binary' % (os.path.join(folder, name), size,
                                              RECORD_BYTES))
    return ([os.path.join(folder, n) for n in TRAIN_FILES],
            [os.path.join(folder, n) for n in TEST_FILES])
  return None
