"""strip_pruning_vars --tflite and tf1prune.export.write_tflite."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import strip_pruning_vars as strip_cli
from tf1prune.export import pipeline
from tests.support.graphs import read_graph_def, run_graph_def

_TF1 = tf.__version__.startswith('1.')


@pytest.fixture(scope='module')
def pruned_dir(tmp_path_factory):
  """A 256x256 dense layer pruned to 90%, checkpointed."""
  directory = str(tmp_path_factory.mktemp('pruned'))
  with tf.Graph().as_default():
    tf.set_random_seed(5)
    x = tf.placeholder(tf.float32, [None, 256], name='x')
    tf1prune.masked_fully_connected(x, 256, activation_fn=None, scope='fc')
    step = tf.train.get_or_create_global_step()
    update = tf1prune.Pruning(sparsity=tf.constant(0.9)).mask_update_op()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update)
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                            global_step=step)
  return directory


@pytest.mark.skipif(_TF1, reason='the TFLite export needs TensorFlow 2.x')
def test_tflite_is_sparse_encoded_smaller_and_equal(pruned_dir, tmp_path,
                                                    capsys):
  tflite = str(tmp_path / 'model.tflite')
  report_json = str(tmp_path / 'report.json')
  assert strip_cli.main(['--checkpoint_dir', pruned_dir,
                         '--output_node_names=fc/BiasAdd',
                         '--output_dir', str(tmp_path), '--tflite', tflite,
                         '--report_json', report_json]) == 0
  report = json.load(open(report_json))['tflite']
  assert report['path'] == tflite
  assert report['bytes'] == os.path.getsize(tflite)
  assert report['sparse'] is True
  # 90% zeros: the sparse encoding stores under a third of the dense floats.
  assert report['bytes'] < 0.35 * report['dense_bytes']
  assert report['max_diff'] < 1e-5
  assert 'sparse encoding' in capsys.readouterr().out
  interpreter = tf.lite.Interpreter(model_path=tflite)
  interpreter.allocate_tensors()
  feed = np.linspace(-1, 1, 256, dtype=np.float32)[None]
  interpreter.set_tensor(interpreter.get_input_details()[0]['index'], feed)
  interpreter.invoke()
  got = interpreter.get_tensor(interpreter.get_output_details()[0]['index'])
  want = run_graph_def(read_graph_def(str(tmp_path / 'pruning_stripped.pb')),
                       feed, 'fc/BiasAdd:0')
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.skipif(_TF1, reason='the TFLite export needs TensorFlow 2.x')
def test_dense_weights_keep_the_dense_encoding(tmp_path):
  path = str(tmp_path / 'dense.pb')
  x = tf.placeholder(tf.float32, [1, 32], name='x')
  tf.matmul(x, tf.constant(np.ones([32, 32], np.float32)), name='y')
  with open(path, 'wb') as f:
    f.write(tf.get_default_graph().as_graph_def().SerializeToString())
  report = tf1prune.export.write_tflite(path, 'y', str(tmp_path / 'd.tflite'))
  assert report.sparse is False and report.bytes == report.dense_bytes


@pytest.mark.skipif(not _TF1, reason='TF 1.15 refuses --tflite')
def test_tf1_refuses_tflite_before_writing_anything(pruned_dir, tmp_path,
                                                    capsys):
  assert strip_cli.main(['--checkpoint_dir', pruned_dir,
                         '--output_node_names=fc/BiasAdd',
                         '--output_dir', str(tmp_path),
                         '--tflite', str(tmp_path / 'm.tflite')]) == 1
  assert '--tflite needs TensorFlow 2.x' in capsys.readouterr().err
  assert os.listdir(str(tmp_path)) == []


@pytest.mark.skipif(_TF1, reason='the TFLite export needs TensorFlow 2.x')
def test_a_failing_run_leaves_no_tflite_json_or_pb(pruned_dir, tmp_path,
                                                   capsys, monkeypatch):
  out = tmp_path / 'out'
  out.mkdir()
  (out / 'old.tflite').write_bytes(b'old')

  class FullDisk(object):

    @staticmethod
    def dumps(*args, **kwargs):
      raise OSError(28, 'No space left on device', str(out / 'report.json'))

  monkeypatch.setattr(pipeline, 'json', FullDisk)
  assert strip_cli.main(['--checkpoint_dir', pruned_dir,
                         '--output_node_names=fc/BiasAdd',
                         '--output_dir', str(out),
                         '--tflite', str(out / 'old.tflite'),
                         '--report_json', str(out / 'report.json')]) == 1
  assert 'No space left on device' in capsys.readouterr().err
  assert os.listdir(str(out)) == ['old.tflite']
  assert (out / 'old.tflite').read_bytes() == b'old'
