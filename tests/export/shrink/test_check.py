"""Every shrink checks itself: the shrunk graph beside the given one, on
random inputs in the running TensorFlow; one that differs is not written."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import strip_pruning_vars as strip_cli
from tf1prune.export.shrink import rewrite
from tf1prune.export.verify import OutputsDiffer

from tests.support.shrunk_graphs import glorot


def _dense_net(size=1):
  """x [None, 3] (size 1; else an image of `size` x `size`, None: unknown,
  averaged over the positions) -> fc1 (4, output 1 empty, bias 2: relu(2)
  = 2 is folded into y) -> y (2)."""
  w1, w2 = glorot(13, [3, 4], [4, 2])
  w1[:, 1] = 0.0
  if size == 1:
    x = tf.placeholder(tf.float32, [None, 3], name='x')
  else:
    image = tf.placeholder(tf.float32, [None, size, size, 3], name='x')
    x = tf.reduce_mean(image, [1, 2])
  h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1, name='fc1'),
                                np.float32([0.1, 2.0, 0.0, -0.3])))
  tf.nn.bias_add(tf.matmul(h, w2, name='fc2'), np.float32([0.5, -0.5]),
                 name='y')
  return tf.get_default_graph().as_graph_def()


def _lose_folds(monkeypatch):
  """A shrink that forgets what removed channels gave the next layer."""
  monkeypatch.setattr(rewrite, '_fold', lambda *args: None)


def test_the_report_says_the_check_passed_and_by_how_much():
  small, report = tf1prune.shrink_graph_def(_dense_net(), ['y'])
  assert report.check.passed is True
  assert 0.0 <= report.check.max_diff <= 1e-6
  assert report.check.inputs == {'x': [[2, 3], [1, 3]]}
  line = [l for l in report.format_table().split('\n')
          if l.startswith('check: ')]
  assert line == ['check: passed: max |shrunk - unshrunk| %.1e of max|y| '
                  '(tolerance 1e-04), random inputs x [2, 3] and [1, 3], '
                  'TensorFlow %s' % (report.check.max_diff, tf.__version__)]
  as_dict = json.loads(json.dumps(report.to_dict()))['check']
  assert as_dict['passed'] is True and as_dict['tolerance'] == {'y': 1e-4}
  assert len(small.node) < len(_dense_net().node) + 4


def test_without_the_check_the_report_has_none():
  _, report = tf1prune.shrink_graph_def(_dense_net(), ['y'], check=False)
  assert report.check is None and report.to_dict()['check'] is None
  assert 'check:' not in report.format_table()
  with pytest.raises(TypeError) as e:
    tf1prune.shrink_graph_def(_dense_net(), ['y'], check='yes')
  assert str(e.value) == "check must be True or False, got 'yes'"


def test_a_shrunk_graph_that_differs_is_refused_with_the_way_out(monkeypatch):
  _lose_folds(monkeypatch)
  with pytest.raises(OutputsDiffer) as e:
    tf1prune.shrink_graph_def(_dense_net(), ['y'])
  diff = e.value.comparison.diffs['y']
  assert diff > 0.01
  assert str(e.value) == (
      "the shrunk graph computes other outputs than the unshrunk graph in "
      "TensorFlow %s: y by %.1e of max|y| (tolerance 1e-04), on random "
      "inputs x [2, 3]. That is a bug of the shrink or of this TensorFlow's "
      "kernels (docs/deployment.md lists the known ones): please report it "
      "with the graph. To write it anyway, skip the check: check=False"
      % (tf.__version__, diff))
  small, report = tf1prune.shrink_graph_def(_dense_net(), ['y'], check=False)
  assert report.check is None


def test_unknown_sizes_are_checked_with_the_shapes_given():
  graph_def = _dense_net(size=None)
  _, report = tf1prune.shrink_graph_def(graph_def, ['y'])
  assert report.check.passed is None
  assert 'check: not run: input x has unknown dimensions [None, None, None, ' \
      '3]' in report.format_table()
  _, report = tf1prune.shrink_graph_def(graph_def, ['y'],
                                        input_shapes={'x': [1, 5, 6, 3]})
  assert report.check.passed
  assert report.check.inputs == {'x': [[1, 5, 6, 3], [1, 5, 6, 3]]}


def test_shrink_pb_writes_nothing_when_the_check_fails(tmp_path, monkeypatch):
  path, out = str(tmp_path / 'model.pb'), str(tmp_path / 'small.pb')
  with open(path, 'wb') as f:
    f.write(_dense_net().SerializeToString())
  _lose_folds(monkeypatch)
  with pytest.raises(OutputsDiffer):
    tf1prune.shrink_pb(path, ['y'], output_path=out)
  assert not os.path.exists(out)
  assert sorted(os.listdir(str(tmp_path))) == ['model.pb']
  report = tf1prune.shrink_pb(path, ['y'], output_path=out, check=False)
  assert report.check is None and os.path.exists(out)


def _checkpoint(directory):
  with tf.Graph().as_default():
    x = tf.placeholder(tf.float32, [None, 3], name='x')
    h = tf1prune.masked_fully_connected(x, 4, scope='fc1')
    tf1prune.masked_fully_connected(h, 2, activation_fn=None, scope='y')
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf1prune.get_masks()[0][:, 1].assign(tf.zeros([3])))
      sess.run(tf.trainable_variables()[1][1].assign(2.0))   # fc1's bias
      tf.train.Saver().save(sess, os.path.join(directory, 'model'))


def test_strip_pruning_vars_shrink_reports_and_refuses_by_its_flag(
    tmp_path, monkeypatch, capsys):
  train, export = str(tmp_path / 'train'), str(tmp_path / 'export')
  os.makedirs(train)
  _checkpoint(train)
  flags = ['--checkpoint_dir=' + train, '--output_node_names=y/BiasAdd',
           '--output_dir=' + export, '--shrink', '--quiet']
  assert strip_cli.main(flags + ['--report_json=' + export + '/r.json']) == 0
  printed = capsys.readouterr().out
  assert '\ncheck: passed: max |shrunk - unshrunk| ' in printed
  with open(os.path.join(export, 'r.json')) as f:
    assert json.load(f)['shrink']['check']['passed'] is True
  os.remove(os.path.join(export, 'pruning_stripped.pb'))
  _lose_folds(monkeypatch)
  assert strip_cli.main(flags) == 1
  error = capsys.readouterr().err
  assert error.startswith('strip_pruning_vars: error: the shrunk graph '
                          'computes other outputs than the unshrunk graph')
  assert error.rstrip().endswith('skip the check: --shrink_check=false')
  assert not os.path.exists(os.path.join(export, 'pruning_stripped.pb'))
  assert strip_cli.main(flags + ['--shrink_check=false']) == 0
  assert 'check:' not in capsys.readouterr().out


def test_write_pb_names_its_own_argument_to_skip_the_check(tmp_path,
                                                           monkeypatch):
  _checkpoint(str(tmp_path))
  _lose_folds(monkeypatch)
  with pytest.raises(OutputsDiffer) as e:
    tf1prune.export.write_pb(str(tmp_path), ['y/BiasAdd'],
                             str(tmp_path / 'out' / 'model.pb'), shrink=True)
  assert str(e.value).endswith('skip the check: shrink_check=False')
  assert not os.path.exists(str(tmp_path / 'out'))


def test_a_bad_input_shapes_flag_is_a_usage_error(capsys):
  with pytest.raises(SystemExit) as e:
    strip_cli.parse_args(['--checkpoint_dir=/tmp', '--output_node_names=y',
                          '--shrink_input_shapes=x:1,a'])
  assert e.value.code == 2
  assert capsys.readouterr().err == (
      "strip_pruning_vars: error: --shrink_input_shapes: input shape 'x:1,a' "
      "must look like name:1,224,224,3 (several separated by ;) (see "
      "--help)\n")
