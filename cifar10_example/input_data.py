"""Input pipelines: the CIFAR-10 binary files, or scikit-learn's 8x8 digits.

    >>> import tensorflow.compat.v1 as tf
    >>> from cifar10_example import input_data
    >>> source = input_data.load_source('/nonexistent/dir')   # no CIFAR-10 there
    >>> source.name, source.image_shape, source.num_train, source.num_test
    ('digits', (8, 8, 1), 1437, 360)
    >>> with tf.Graph().as_default():
    ...   images, labels = tf.data.make_one_shot_iterator(
    ...       source.train_dataset(batch_size=32, seed=0)).get_next()
    ...   images.shape.as_list(), labels.shape.as_list()
    ([32, 8, 8, 1], [32])

CIFAR-10 binary format: each file is a run of 3073-byte records, one label byte
(0..9) then 3072 image bytes, the 1024 red, 1024 green and 1024 blue values of a
32x32 image in row-major order. Training batches are randomly cropped to
24x24, randomly flipped left-right and standardised per image; test batches are
center-cropped to 24x24 and standardised.

The digits set (1797 images, 8x8, grey levels 0..16) ships inside scikit-learn.
It is split once, by a fixed permutation (`numpy.random.RandomState(0)`): 360
test images, 1437 training images. Images are scaled to [0, 1] and
standardised per image; there is no augmentation (a flipped digit is another
digit).
"""

import os

import numpy as np
import tensorflow.compat.v1 as tf

from cifar10_example.files import (CIFAR10_DIRNAME, DEPTH, HEIGHT, LABEL_BYTES,
                                   RECORD_BYTES, TEST_FILES, TRAIN_FILES, WIDTH,
                                   find_cifar10_files)

__all__ = [
    'CIFAR10_DIRNAME', 'RECORD_BYTES', 'TEST_FILES', 'TRAIN_FILES',
    'Cifar10Source', 'DigitsSource', 'find_cifar10_files', 'load_source',
    'parse_record',
]

CROP_SIZE = 24
NUM_CLASSES = 10


def parse_record(record):
  """Decodes one 3073-byte CIFAR-10 record.

  Args:
    record: string scalar tensor of `RECORD_BYTES` bytes.

  Returns:
    `(image, label)`: uint8 `[32, 32, 3]` (height, width, RGB) and int32 scalar.
  """
  raw = tf.decode_raw(record, tf.uint8)
  label = tf.cast(raw[0], tf.int32)
  chw = tf.reshape(raw[LABEL_BYTES:RECORD_BYTES], [DEPTH, HEIGHT, WIDTH])
  return tf.transpose(chw, [1, 2, 0]), label


class Cifar10Source(object):
  """CIFAR-10 binary files as tf.data pipelines.

  Args:
    train_paths: list of data_batch_*.bin paths.
    test_paths: list of test_batch.bin paths.
    crop_size: side of the square crops fed to the model (24 as in the
      tutorial; at most 32).

  Attributes:
    name: 'cifar10'.
    description: one line saying where the data comes from.
    image_shape: `(crop_size, crop_size, 3)`.
    num_classes, num_train, num_test: ints.
  """

  name = 'cifar10'
  num_classes = NUM_CLASSES

  def __init__(self, train_paths, test_paths, crop_size=CROP_SIZE):
    if not 1 <= crop_size <= HEIGHT:
      raise ValueError('crop_size must be in [1, %d], got %r' % (HEIGHT,
                                                                 crop_size))
    self._train_paths = list(train_paths)
    self._test_paths = list(test_paths)
    self._crop = crop_size
    self.image_shape = (crop_size, crop_size, DEPTH)
    self.num_train = sum(os.path.getsize(p) for p in train_paths) // RECORD_BYTES
    self.num_test = sum(os.path.getsize(p) for p in test_paths) // RECORD_BYTES
    self.description = ('CIFAR-10 from %s (%d train / %d test images, %dx%d '
                        'crops)' % (os.path.dirname(self._test_paths[0]),
                                    self.num_train, self.num_test, crop_size,
                                    crop_size))

  def _records(self, paths):
    return tf.data.FixedLengthRecordDataset(paths, RECORD_BYTES)

  def train_dataset(self, batch_size, seed=None):
    """Endless shuffled, augmented batches of `(float32 images, int32 labels)`.

    The crop offsets and flips are stateless random functions of `seed` and
    the example's position in the stream, so a seed gives the same batches
    on every run, even though the records are decoded in parallel.
    """
    if seed is None:
      seed = np.random.randint(2 ** 31 - 1)
    margin = HEIGHT - self._crop + 1

    def augment(position, record):
      image, label = parse_record(record)
      draws = tf.random.stateless_uniform(
          [3], seed=tf.stack([tf.constant(seed, tf.int64), position]),
          minval=0, maxval=2 ** 30, dtype=tf.int32)
      image = tf.slice(tf.cast(image, tf.float32),
                       [draws[0] % margin, draws[1] % margin, 0],
                       [self._crop, self._crop, DEPTH])
      image = tf.cond(tf.equal(draws[2] % 2, 1), lambda: image[:, ::-1],
                      lambda: image)
      image.set_shape([self._crop, self._crop, DEPTH])
      return tf.image.per_image_standardization(image), label

    records = (self._records(self._train_paths)
               .shuffle(min(self.num_train, 10000), seed=seed).repeat())
    return (tf.data.Dataset.zip((tf.data.Dataset.range(2 ** 62), records))
            .map(augment, num_parallel_calls=2)
            .batch(batch_size, drop_remainder=True).prefetch(1))

  def test_dataset(self, batch_size):
    """One pass over the test set: center crops, standardised, in file order."""

    def center(record):
      image, label = parse_record(record)
      image = tf.image.resize_image_with_crop_or_pad(
          tf.cast(image, tf.float32), self._crop, self._crop)
      return tf.image.per_image_standardization(image), label

    return self._records(self._test_paths).map(center).batch(batch_size)


class DigitsSource(object):
  """scikit-learn's 8x8 handwritten digits with a fixed train/test split.

  Args:
    num_test: images held out for testing, by a fixed permutation.

  Raises:
    ImportError: scikit-learn is not installed.

  Attributes: as `Cifar10Source` (name 'digits', image_shape `(8, 8, 1)`).
  """

  name = 'digits'
  num_classes = 10
  image_shape = (8, 8, 1)

  def __init__(self, num_test=360):
    try:
      from sklearn.datasets import load_digits  # only needed for this source
    except ImportError:
      raise ImportError('the embedded digits data set needs scikit-learn: pip '
                        'install scikit-learn, or point --data_dir at CIFAR-10')
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., np.newaxis]
    labels = digits.target.astype(np.int32)
    order = np.random.RandomState(0).permutation(len(labels))
    test, train = order[:num_test], order[num_test:]
    self._train = (images[train], labels[train])
    self._test = (images[test], labels[test])
    self.num_train, self.num_test = len(train), len(test)
    self.description = ('the 8x8 handwritten digits embedded in scikit-learn '
                        '(%d train / %d test images)' % (self.num_train,
                                                         self.num_test))

  @staticmethod
  def _standardise(image, label):
    return tf.image.per_image_standardization(image), label

  def train_dataset(self, batch_size, seed=None):
    """Endless shuffled batches of `(float32 images, int32 labels)`."""
    return (tf.data.Dataset.from_tensor_slices(self._train)
            .shuffle(self.num_train, seed=seed).repeat()
            .map(self._standardise)
            .batch(batch_size, drop_remainder=True).prefetch(1))

  def test_dataset(self, batch_size):
    """One pass over the test images, standardised, in a fixed order."""
    return (tf.data.Dataset.from_tensor_slices(self._test)
            .map(self._standardise).batch(batch_size))


def load_source(data_dir, crop_size=CROP_SIZE):
  """Returns a `Cifar10Source` if `data_dir` has CIFAR-10, else `DigitsSource`.

  Raises:
    ValueError: `data_dir` holds an incomplete or damaged CIFAR-10 copy.
  """
  files = find_cifar10_files(data_dir) if data_dir else None
  if files is None:
    return DigitsSource()
  return Cifar10Source(files[0], files[1], crop_size)
