"""From a training checkpoint to a frozen, stripped .pb, and its accuracy.

    >>> import tensorflow.compat.v1 as tf, tempfile, os
    >>> from cifar10_example import frozen, input_data, train
    >>> tf.disable_eager_execution()
    >>> source, folder = input_data.DigitsSource(), tempfile.mkdtemp()
    >>> _ = train.train(source, os.path.join(folder, 'train'), max_steps=5)
    >>> pb, report = frozen.freeze(source, os.path.join(folder, 'train'),
    ...                            os.path.join(folder, 'export'),
    ...                            os.path.join(folder, 'model.pb'))
    >>> images, labels = frozen.test_arrays(source)
    >>> 0.0 <= frozen.evaluate_pb(pb, images, labels)['accuracy'] <= 1.0
    True

The training graph reads its images from a tf.data iterator, which has no
place in an inference graph. `export_inference_checkpoint` rebuilds the model
on a placeholder `images` (float32 `[None, h, w, c]`, preprocessed like the
test set), restores the training checkpoint into it and saves that graph's
checkpoint; `tf1prune.strip_checkpoint` then freezes it into a `.pb` whose
masked weights are constants `weight * mask`, ending in the op `logits`.
`evaluate_pb` loads the `.pb` with `tf.import_graph_def` and feeds it.
"""

import gzip
import os

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from cifar10_example import model

__all__ = ['INPUT_NAME', 'evaluate_pb', 'export_inference_checkpoint',
           'file_sizes', 'freeze', 'test_accuracy', 'test_arrays']

# The placeholder of the inference graph; the output is model.LOGITS_NAME.
INPUT_NAME = 'images'


def export_inference_checkpoint(source, checkpoint_dir, export_dir):
  """Saves the newest checkpoint of `checkpoint_dir` under an inference graph.

  Args:
    source: the `input_data` source the model was trained on (for the image
      shape and the number of classes).
    checkpoint_dir: the training folder.
    export_dir: where the new checkpoint (with its meta graph) goes.

  Returns:
    The new checkpoint's prefix.

  Raises:
    ValueError: `checkpoint_dir` holds no checkpoint.
  """
  path = tf.train.latest_checkpoint(checkpoint_dir)
  if not path:
    raise ValueError('no checkpoint in %s to export; train first' %
                     checkpoint_dir)
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    images = tf.placeholder(tf.float32, [None] + list(source.image_shape),
                            name=INPUT_NAME)
    model.inference(images, source.num_classes)
    saver = tf.train.Saver(tf.global_variables())
    with tf.Session() as sess:
      saver.restore(sess, path)
      return saver.save(sess, os.path.join(export_dir, 'model.ckpt'),
                        global_step=global_step)


def freeze(source, checkpoint_dir, export_dir, pb_path):
  """Exports an inference checkpoint and strips it to `pb_path`.

  Returns:
    `(pb_path, report)`, the report a `tf1prune.StripReport`.
  """
  export_inference_checkpoint(source, checkpoint_dir, export_dir)
  folder = os.path.dirname(os.path.abspath(pb_path))
  if not os.path.isdir(folder):
    os.makedirs(folder)
  report = tf1prune.strip_checkpoint(export_dir, [model.LOGITS_NAME], pb_path)
  return pb_path, report


def test_arrays(source, batch_size=1000):
  """Returns the whole preprocessed test set as NumPy arrays.

  Returns:
    `(images, labels)`: float32 `[num_test, h, w, c]` and int32 `[num_test]`,
    exactly what the eval pipeline feeds the model.
  """
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        source.test_dataset(batch_size)).get_next()
    images, labels = [], []
    with tf.Session() as sess:
      while True:
        try:
          x, y = sess.run(batch)
        except tf.errors.OutOfRangeError:
          break
        images.append(x)
        labels.append(y)
  return np.concatenate(images), np.concatenate(labels)


_TEST_SET = []


def test_accuracy(sess, batch_size=500):
  """Accuracy on the digits' test set of the model in `sess` (a graph with
  the placeholder `images` and the op `logits`, as the inference checkpoint
  has): the metric `tf1prune_sensitivity --metric` takes."""
  from cifar10_example import input_data  # pylint: disable=g-import-not-at-top
  if not _TEST_SET:
    _TEST_SET.append(test_arrays(input_data.DigitsSource()))
  images, labels = _TEST_SET[0]
  inputs = sess.graph.get_tensor_by_name(INPUT_NAME + ':0')
  logits = sess.graph.get_tensor_by_name(model.LOGITS_NAME + ':0')
  correct = 0
  for start in range(0, len(labels), batch_size):
    out = sess.run(logits, {inputs: images[start:start + batch_size]})
    correct += int(np.sum(np.argmax(out, 1) ==
                          labels[start:start + batch_size]))
  return correct / float(len(labels))


def evaluate_pb(pb_path, images, labels, batch_size=500):
  """Accuracy of the frozen graph in `pb_path` on `images`.

  Args:
    pb_path: a binary GraphDef with a placeholder `images` and an op `logits`.
    images: float32 `[n, h, w, c]`, preprocessed (see `test_arrays`).
    labels: int `[n]`.
    batch_size: images per `session.run`.

  Returns:
    dict: `accuracy` (float in [0, 1]), `correct` and `count` (ints).
  """
  graph_def = tf.GraphDef()
  with open(pb_path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(graph_def, name='')
    inputs = graph.get_tensor_by_name(INPUT_NAME + ':0')
    logits = graph.get_tensor_by_name(model.LOGITS_NAME + ':0')
    correct = 0
    with tf.Session() as sess:
      for start in range(0, len(labels), batch_size):
        out = sess.run(logits, {inputs: images[start:start + batch_size]})
        correct += int(np.sum(np.argmax(out, 1) ==
                              labels[start:start + batch_size]))
  return {'accuracy': correct / float(max(len(labels), 1)),
          'correct': correct, 'count': int(len(labels))}


def file_sizes(path, level=6):
  """Returns `(bytes, gzipped bytes)` of the file, gzip at `level` (as gzip -6)."""
  with open(path, 'rb') as f:
    data = f.read()
  return len(data), len(gzip.compress(data, compresslevel=level))
