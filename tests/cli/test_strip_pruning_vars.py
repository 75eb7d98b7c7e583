"""The strip_pruning_vars command: flags, output, and bad input."""

import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import strip_pruning_vars as strip_cli
from tests.support.checkout import ROOT
from tests.support.graphs import read_graph_def, run_graph_def

_BIN = os.path.join(ROOT, 'bin', 'strip_pruning_vars')


def _save(directory, masked):
  """A small fc model, pruned to 50% if `masked`, checkpointed."""
  with tf.Graph().as_default():
    tf.set_random_seed(3)
    x = tf.placeholder(tf.float32, [None, 4], name='x')
    if masked:
      net = tf1prune.masked_fully_connected(x, 6, scope='fc1')
      tf1prune.masked_fully_connected(net, 2, activation_fn=None, scope='fc2')
    else:
      tf.matmul(x, tf.get_variable('w', [4, 2]), name='fc2/BiasAdd')
    step = tf.train.get_or_create_global_step()
    update = (tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
              if masked else tf.no_op())
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update)
      tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                            global_step=step)


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
  """(masked checkpoint dir, unmasked checkpoint dir), built once."""
  masked = str(tmp_path_factory.mktemp('masked'))
  unmasked = str(tmp_path_factory.mktemp('unmasked'))
  _save(masked, True)
  _save(unmasked, False)
  return masked, unmasked


def _hashes(directory):
  return {n: hashlib.sha256(open(os.path.join(directory, n), 'rb').read())
             .hexdigest() for n in sorted(os.listdir(directory))}


def _error_line(capsys):
  out, err = capsys.readouterr()
  assert out == ''
  lines = err.strip().splitlines()
  assert len(lines) == 1, err
  assert lines[0].startswith('strip_pruning_vars: error: '), err
  return lines[0]


def test_writes_the_pb_the_table_and_the_json(checkpoints, tmp_path, capsys):
  masked, _ = checkpoints
  before = _hashes(masked)
  out_dir = tmp_path / 'export' / 'new'
  report_path = str(tmp_path / 'report.json')
  assert strip_cli.main(['--checkpoint_path=' + masked,
                         '--output_node_names', 'fc2/BiasAdd',
                         '--output_dir', str(out_dir),
                         '--report_json', report_path]) == 0
  out, err = capsys.readouterr()
  path = str(out_dir / 'pruning_stripped.pb')
  assert os.listdir(str(out_dir)) == ['pruning_stripped.pb']
  assert 'wrote %s' % path in out
  report = json.load(open(report_path))
  assert [(l['name'], l['size'], l['nonzeros'], l['sparsity'])
          for l in report['layers']] == [('fc1', 24, 12, 0.5),
                                         ('fc2', 12, 6, 0.5)]
  assert report['file']['bytes'] == os.path.getsize(path)
  for layer in report['layers']:
    assert '%s ' % layer['name'] in out and '50.00%' in out
  assert 'Traceback' not in err
  graph_def = read_graph_def(path)
  assert sorted(n.name for n in graph_def.node if n.op == 'Const') == [
      'fc1/biases', 'fc1/weights/masked_weight', 'fc2/biases',
      'fc2/weights/masked_weight']
  assert not [n for n in graph_def.node
              if n.op in ('VariableV2', 'VarHandleOp', 'Mul')]
  assert _hashes(masked) == before


def test_filename_flag_and_bool_value_for_allow_no_masks(checkpoints,
                                                          tmp_path, capsys):
  _, unmasked = checkpoints
  assert strip_cli.main(['--checkpoint_dir', unmasked, '--output_node_names',
                         'fc2/BiasAdd', '--output_dir', str(tmp_path),
                         '--filename', 'dense.pb',
                         '--allow_no_masks=true']) == 0
  assert 'total (0 masked)' in capsys.readouterr().out
  assert os.listdir(str(tmp_path)) == ['dense.pb']


@pytest.mark.parametrize('case, message', [
    ('missing', "checkpoint_dir '.*missing' does not exist"),
    ('index_file', r"checkpoint_dir '(.*)\.index' is a file of checkpoint "
                   r"'\1': pass that prefix \(without the file's suffix\) "
                   r"or its directory"),
    ('empty', 'holds no checkpoint'),
    ('no_masks', 'has no masked weights .*--allow_no_masks'),
    ('unknown_node', "output nodes 'nope', 'fc9' not found"),
    ('output_is_a_file', "--output_dir '.*a_file' is not a directory"),
    ('uncreatable', "(--output_dir|Permission denied|No such file|"
                    "Operation not permitted)"),
])
def test_bad_input_is_one_line_nonzero_and_writes_nothing(
    case, message, checkpoints, tmp_path, capsys):
  masked, unmasked = checkpoints
  (tmp_path / 'empty').mkdir()
  (tmp_path / 'a_file').write_text(u'x')
  flags = {'checkpoint_dir': masked, 'output_node_names': 'fc2/BiasAdd',
           'output_dir': str(tmp_path / 'out' / 'sub')}
  if case == 'missing':
    flags['checkpoint_dir'] = str(tmp_path / 'missing')
  elif case == 'index_file':
    flags['checkpoint_dir'] = tf.train.latest_checkpoint(masked) + '.index'
  elif case == 'empty':
    flags['checkpoint_dir'] = str(tmp_path / 'empty')
  elif case == 'no_masks':
    flags['checkpoint_dir'] = unmasked
  elif case == 'unknown_node':
    flags['output_node_names'] = 'fc2/BiasAdd,nope,fc9'
  elif case == 'output_is_a_file':
    flags['output_dir'] = str(tmp_path / 'a_file')
  else:
    flags['output_dir'] = '/proc/tf1prune_no_such_dir/out'
  before = sorted(os.listdir(str(tmp_path)))
  status = strip_cli.main(['--%s=%s' % kv for kv in sorted(flags.items())])
  assert status == 1
  line = _error_line(capsys)
  assert re.search(message, line), line
  assert sorted(os.listdir(str(tmp_path))) == before  # nothing created


@pytest.mark.skipif(hasattr(os, 'geteuid') and os.geteuid() == 0,
                    reason='root writes to read-only directories')
def test_unwritable_output_dir(checkpoints, tmp_path, capsys):
  locked = tmp_path / 'locked'
  locked.mkdir()
  locked.chmod(0o555)
  try:
    assert strip_cli.main(['--checkpoint_dir', checkpoints[0],
                           '--output_node_names', 'fc2/BiasAdd',
                           '--output_dir', str(locked)]) == 1
    assert 'is not writable' in _error_line(capsys)
    assert os.listdir(str(locked)) == []
  finally:
    locked.chmod(0o755)


def test_rerun_replaces_the_pb_and_leaves_no_staging_file(checkpoints,
                                                          tmp_path, capsys):
  masked, unmasked = checkpoints
  path = tmp_path / 'pruning_stripped.pb'
  path.write_bytes(b'old')
  flags = ['--output_node_names=fc2/BiasAdd', '--output_dir', str(tmp_path)]
  assert strip_cli.main(['--checkpoint_dir', unmasked] + flags) == 1
  assert path.read_bytes() == b'old'  # no masks: refused, old file kept
  assert strip_cli.main(['--checkpoint_dir', masked] + flags) == 0
  assert path.read_bytes() != b'old'
  assert os.listdir(str(tmp_path)) == ['pruning_stripped.pb']
  capsys.readouterr()


@pytest.mark.parametrize('flag', ['--filename', '--report_json'])
def test_an_output_that_is_a_directory_is_refused_before_any_work(
    flag, checkpoints, tmp_path, capsys):
  taken = tmp_path / 'taken'
  taken.mkdir()
  assert strip_cli.main(['--checkpoint_dir', checkpoints[0],
                         '--output_node_names=fc2/BiasAdd',
                         '--output_dir', str(tmp_path),
                         flag, str(taken)]) == 1
  assert '%s %r is a directory' % (flag, str(taken)) in _error_line(capsys)
  assert os.listdir(str(tmp_path)) == ['taken']
  assert os.listdir(str(taken)) == []


def test_two_outputs_of_one_name_are_refused(checkpoints, tmp_path, capsys):
  path = str(tmp_path / 'pruning_stripped.pb')
  assert strip_cli.main(['--checkpoint_dir', checkpoints[0],
                         '--output_node_names=fc2/BiasAdd',
                         '--output_dir', str(tmp_path),
                         '--report_json', path]) == 1
  assert ('--filename and --report_json name the same file %r' % path
          in _error_line(capsys))
  assert os.listdir(str(tmp_path)) == []


def test_usage_errors_are_one_line_with_status_2(capsys):
  with pytest.raises(SystemExit) as exit_info:
    strip_cli.main(['--output_node_names=y'])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and '--checkpoint_dir' in err[0]
  with pytest.raises(SystemExit):
    strip_cli.main(['--checkpoint_dir=d', '--output_node_names=y',
                    '--filename=a/'])
  assert '--filename must name a file' in capsys.readouterr().err


def test_console_script_is_installed_next_to_python():
  script = os.path.join(os.path.dirname(sys.executable), 'strip_pruning_vars')
  if not os.path.exists(script):
    pytest.skip('tf1prune is not installed in this environment')
  text = open(script).read()
  assert 'from tf1prune.cli.strip_pruning_vars import main' in text or (
      "'strip_pruning_vars'" in text and 'load_entry_point' in text), text


def test_bin_script_from_the_source_tree(checkpoints, tmp_path):
  """Runs bin/strip_pruning_vars twice: once fine, once without a traceback."""
  masked, _ = checkpoints
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  ok = subprocess.run(
      [sys.executable, _BIN, '--checkpoint_dir', masked,
       '--output_node_names=fc2/BiasAdd', '--output_dir', str(tmp_path),
       '--report_json', str(tmp_path / 'r.json')],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=300,
      cwd=str(tmp_path))
  assert ok.returncode == 0, ok.stderr.decode()[-2000:]
  assert b'fc1' in ok.stdout and b'50.00%' in ok.stdout
  y = run_graph_def(read_graph_def(str(tmp_path / 'pruning_stripped.pb')),
                    np.ones([1, 4], np.float32), 'fc2/BiasAdd:0')
  assert y.shape == (1, 2)
  bad = subprocess.run(
      [sys.executable, _BIN, '--checkpoint_dir', str(tmp_path / 'nothing'),
       '--output_node_names=fc2/BiasAdd', '--output_dir',
       str(tmp_path / 'never')], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, env=env, timeout=300)
  err = bad.stderr.decode()
  assert bad.returncode == 1
  assert 'Traceback' not in err
  assert err.strip().splitlines()[-1].startswith(
      'strip_pruning_vars: error: checkpoint_dir ')
  assert not os.path.exists(str(tmp_path / 'never'))
