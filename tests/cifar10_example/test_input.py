"""cifar10_example input: the CIFAR-10 binary reader, augmentation, download,
and the embedded digits split, on small files the tests write themselves."""

import io
import os
import tarfile

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from cifar10_example import download, files, input_data

RECORDS_PER_TRAIN_FILE = 2
RECORDS_PER_TEST_FILE = 3


def _records(seed, count):
  """`count` random CIFAR-10 records: (labels [n], CHW uint8 images, bytes)."""
  rng = np.random.RandomState(seed)
  labels = rng.randint(0, 10, size=count).astype(np.uint8)
  images = rng.randint(0, 256, size=(count, 3, 32, 32)).astype(np.uint8)
  data = b''.join(bytes([l]) + img.tobytes() for l, img in zip(labels, images))
  return labels, images, data


def _write_cifar(folder):
  """Writes the six files; returns {file name: (labels, CHW images)}."""
  os.makedirs(folder, exist_ok=True)
  contents = {}
  for i, name in enumerate(files.TRAIN_FILES + files.TEST_FILES):
    count = (RECORDS_PER_TEST_FILE if name in files.TEST_FILES
             else RECORDS_PER_TRAIN_FILE)
    labels, images, data = _records(i, count)
    with open(os.path.join(folder, name), 'wb') as f:
      f.write(data)
    contents[name] = (labels, images)
  return contents


def _standardise(image):
  """NumPy reference of tf.image.per_image_standardization."""
  image = image.astype(np.float64)
  adjusted = max(image.std(), 1.0 / np.sqrt(image.size))
  return (image - image.mean()) / adjusted


def _run_all(dataset):
  batch = tf.data.make_one_shot_iterator(dataset).get_next()
  out = []
  with tf.Session() as sess:
    while True:
      try:
        out.append(sess.run(batch))
      except tf.errors.OutOfRangeError:
        return out


def test_parse_record_gives_hwc_image_and_label(tmp_path):
  contents = _write_cifar(str(tmp_path))
  path = str(tmp_path / 'data_batch_3.bin')
  dataset = tf.data.FixedLengthRecordDataset([path], files.RECORD_BYTES)
  got = _run_all(dataset.map(input_data.parse_record))
  labels, images = contents['data_batch_3.bin']
  assert len(got) == RECORDS_PER_TRAIN_FILE
  for (image, label), want_label, want_chw in zip(got, labels, images):
    assert image.dtype == np.uint8 and image.shape == (32, 32, 3)
    np.testing.assert_array_equal(image, want_chw.transpose(1, 2, 0))
    assert label == want_label
  # Red channel, row 0, column 1 is byte 2 of the record (after the label).
  with open(path, 'rb') as f:
    assert got[0][0][0, 1, 0] == f.read(3)[2]


@pytest.mark.parametrize('subfolder', ['', files.CIFAR10_DIRNAME])
def test_find_cifar10_files_in_dir_or_its_batches_bin_subfolder(tmp_path,
                                                                 subfolder):
  _write_cifar(str(tmp_path / subfolder))
  train, test = files.find_cifar10_files(str(tmp_path))
  assert [os.path.basename(p) for p in train] == [
      'data_batch_%d.bin' % i for i in range(1, 6)]
  assert test == [str(tmp_path / subfolder / 'test_batch.bin')]


def test_find_cifar10_files_none_when_absent(tmp_path):
  assert files.find_cifar10_files(str(tmp_path)) is None
  assert files.find_cifar10_files(str(tmp_path / 'missing')) is None


def test_incomplete_cifar10_raises_naming_missing_files(tmp_path):
  _write_cifar(str(tmp_path))
  os.remove(str(tmp_path / 'data_batch_4.bin'))
  with pytest.raises(ValueError, match='not data_batch_4.bin'):
    files.find_cifar10_files(str(tmp_path))


def test_file_of_wrong_size_raises(tmp_path):
  _write_cifar(str(tmp_path))
  with open(str(tmp_path / 'test_batch.bin'), 'ab') as f:
    f.write(b'x')
  with pytest.raises(ValueError, match='not a positive multiple of the '
                                       '3073-byte CIFAR-10 record'):
    files.find_cifar10_files(str(tmp_path))


def test_test_dataset_center_crops_and_standardises(tmp_path):
  contents = _write_cifar(str(tmp_path))
  source = input_data.load_source(str(tmp_path))
  assert isinstance(source, input_data.Cifar10Source)
  assert (source.num_train, source.num_test) == (10, 3)
  assert source.image_shape == (24, 24, 3)
  (images, labels), = _run_all(source.test_dataset(batch_size=10))
  want_labels, want_chw = contents['test_batch.bin']
  np.testing.assert_array_equal(labels, want_labels)
  assert images.dtype == np.float32 and images.shape == (3, 24, 24, 3)
  for got, chw in zip(images, want_chw):
    center = chw.transpose(1, 2, 0)[4:28, 4:28]
    np.testing.assert_allclose(got, _standardise(center), rtol=1e-5,
                               atol=1e-5)


def test_train_dataset_gives_standardised_random_crops_or_flips(tmp_path):
  contents = _write_cifar(str(tmp_path))
  source = input_data.load_source(str(tmp_path))
  originals = []
  for name in files.TRAIN_FILES:
    labels, images = contents[name]
    originals.extend(zip(labels, images.transpose(0, 2, 3, 1)))
  batch = tf.data.make_one_shot_iterator(
      source.train_dataset(batch_size=4, seed=1)).get_next()
  with tf.Session() as sess:
    batches = [sess.run(batch) for _ in range(5)]  # 20 images: 2 epochs
  seen = []
  for images, labels in batches:
    assert images.shape == (4, 24, 24, 3) and labels.shape == (4,)
    for image, label in zip(images, labels):
      matches = [
          (i, y, x, flip) for i, (l, full) in enumerate(originals) if l == label
          for y in range(9) for x in range(9) for flip in (False, True)
          if np.allclose(image, _standardise(
              (full[:, ::-1] if flip else full)[y:y + 24, x:x + 24]),
                         atol=1e-4)]
      assert matches, 'a training image is no crop of a training record'
      seen.append(matches[0][0])
  # Both epochs cover every record once.
  assert sorted(seen[:10]) == list(range(10))
  assert sorted(seen[10:]) == list(range(10))


def test_train_dataset_is_repeatable_with_a_seed(tmp_path):
  _write_cifar(str(tmp_path))
  source = input_data.load_source(str(tmp_path))
  runs = []
  for _ in range(2):
    with tf.Graph().as_default():
      tf.set_random_seed(3)
      batch = tf.data.make_one_shot_iterator(
          source.train_dataset(batch_size=5, seed=7)).get_next()
      with tf.Session() as sess:
        runs.append(sess.run(batch))
  np.testing.assert_array_equal(runs[0][0], runs[1][0])
  np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_digits_fallback_has_fixed_split(tmp_path):
  from sklearn.datasets import load_digits
  source = input_data.load_source(str(tmp_path))
  assert isinstance(source, input_data.DigitsSource)
  assert (source.num_train, source.num_test) == (1437, 360)
  assert source.image_shape == (8, 8, 1)
  assert 'scikit-learn' in source.description
  digits = load_digits()
  test_index = np.random.RandomState(0).permutation(1797)[:360]
  images = np.concatenate([b[0] for b in _run_all(source.test_dataset(100))])
  labels = np.concatenate([b[1] for b in _run_all(source.test_dataset(100))])
  np.testing.assert_array_equal(labels, digits.target[test_index])
  want = np.stack([_standardise(digits.images[i] / 16.0)[..., None]
                   for i in test_index])
  np.testing.assert_allclose(images, want, rtol=1e-5, atol=1e-5)


def test_digits_train_batches_come_from_the_train_part_only():
  from sklearn.datasets import load_digits
  source = input_data.DigitsSource()
  digits = load_digits()
  test_index = set(np.random.RandomState(0).permutation(1797)[:360])
  reference = {_standardise(digits.images[i] / 16.0).astype(np.float32)
               .round(4).tobytes(): i for i in range(1797)}
  batch = tf.data.make_one_shot_iterator(
      source.train_dataset(batch_size=64, seed=0)).get_next()
  with tf.Session() as sess:
    images, labels = sess.run(batch)
  for image, label in zip(images, labels):
    index = reference[image[..., 0].round(4).tobytes()]
    assert index not in test_index and digits.target[index] == label


# ------------------------------------------------------------------ download


def _archive(path, members):
  """Writes a .tar.gz holding {name: bytes}; returns its file:// URL."""
  with tarfile.open(str(path), 'w:gz') as tar:
    for name, data in members.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return 'file://' + str(path)


def _cifar_members(prefix=files.CIFAR10_DIRNAME + '/'):
  members = {}
  for i, name in enumerate(files.TRAIN_FILES + files.TEST_FILES):
    members[prefix + name] = _records(i, 2)[2]
  members[prefix + 'batches.meta.txt'] = b'airplane\n'
  return members


def _leftovers(folder):
  return [n for n in os.listdir(folder) if n.startswith('.cifar10-')]


def test_download_from_file_url_extracts_batches_bin(tmp_path):
  members = _cifar_members()
  url = _archive(tmp_path / 'cifar-10-binary.tar.gz', members)
  data_dir = str(tmp_path / 'data')
  folder = download.download_and_extract(data_dir, url=url)
  assert folder == os.path.join(data_dir, files.CIFAR10_DIRNAME)
  for name, data in members.items():
    with open(os.path.join(data_dir, name), 'rb') as f:
      assert f.read() == data
  assert _leftovers(data_dir) == []
  source = input_data.load_source(data_dir)
  assert (source.name, source.num_train, source.num_test) == ('cifar10', 10, 2)


def test_download_skipped_when_data_is_there(tmp_path):
  _write_cifar(str(tmp_path / files.CIFAR10_DIRNAME))
  folder = download.download_and_extract(
      str(tmp_path), url='file://' + str(tmp_path / 'no-such.tar.gz'))
  assert folder == str(tmp_path / files.CIFAR10_DIRNAME)


def test_failed_download_raises_and_leaves_nothing(tmp_path):
  data_dir = str(tmp_path / 'data')
  with pytest.raises(IOError, match='could not download'):
    download.download_and_extract(
        data_dir, url='file://' + str(tmp_path / 'no-such.tar.gz'))
  assert os.listdir(data_dir) == []


def test_archive_without_batches_folder_raises(tmp_path):
  url = _archive(tmp_path / 'a.tar.gz', _cifar_members(prefix='other/'))
  data_dir = str(tmp_path / 'data')
  with pytest.raises(IOError, match='has no cifar-10-batches-bin/ folder'):
    download.download_and_extract(data_dir, url=url)
  assert os.listdir(data_dir) == []


def test_archive_missing_a_batch_raises(tmp_path):
  members = _cifar_members()
  del members[files.CIFAR10_DIRNAME + '/data_batch_2.bin']
  url = _archive(tmp_path / 'a.tar.gz', members)
  data_dir = str(tmp_path / 'data')
  with pytest.raises(IOError, match='incomplete.*data_batch_2.bin'):
    download.download_and_extract(data_dir, url=url)
  assert os.listdir(data_dir) == []


def test_archive_escaping_its_root_is_refused(tmp_path):
  members = _cifar_members()
  members['../escaped.txt'] = b'no'
  url = _archive(tmp_path / 'a.tar.gz', members)
  data_dir = str(tmp_path / 'data')
  with pytest.raises(IOError, match="refusing archive member '../escaped.txt'"):
    download.download_and_extract(data_dir, url=url)
  assert os.listdir(data_dir) == []
  assert not (tmp_path / 'escaped.txt').exists()


def test_not_a_tar_archive_raises(tmp_path):
  (tmp_path / 'junk.tar.gz').write_bytes(b'not an archive')
  data_dir = str(tmp_path / 'data')
  with pytest.raises(IOError, match='not a readable tar archive'):
    download.download_and_extract(data_dir,
                                  url='file://' + str(tmp_path / 'junk.tar.gz'))
  assert os.listdir(data_dir) == []
