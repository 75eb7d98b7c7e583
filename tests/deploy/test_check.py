"""The deployment check: its verdicts, its table, and a real run on this stack."""

import os
import sys

import numpy as np
import pytest

from tf1prune import deploy
from tf1prune.cli import check_deploy as check_deploy_cli
from tf1prune.deploy import Cell, format_matrix
from tf1prune.deploy._models import MODELS


def _spec(name='m', made_on='TF 2.21'):
  return dict(name=name, made_on=made_on)


def _result(tmp_path, job, stack, consumer, value=None, error=None):
  result = dict(job=job, stack=stack, consumer=consumer)
  if error is not None:
    result['error'] = error
  else:
    path = str(tmp_path / ('%s_%s_%s.npz' % (job, stack, consumer)).replace(
        '/', '_').replace(' ', ''))
    np.savez(path, np.asarray(value, np.float32))
    result['outputs'] = path
  return result


def test_verdicts_against_the_session_that_made_the_graph(tmp_path):
  ref = [1.0, -2.0, 4.0]
  pb, control = 'TF 2.21/m/pb', 'TF 2.21/m/control'
  results = [
      _result(tmp_path, pb, 'TF 2.21', 'tf_session', ref),
      _result(tmp_path, control, 'TF 2.21', 'tf_session', ref),
      # within 1e-4 of max|y| = 4: ok
      _result(tmp_path, pb, 'TF 2.21', 'tflite', [1.0, -2.0, 4.0003]),
      _result(tmp_path, control, 'TF 2.21', 'tflite', ref),
      # wrong on ours only: wrong
      _result(tmp_path, pb, 'TF 1.15', 'tflite', [1.0, -2.0, 4.5]),
      _result(tmp_path, control, 'TF 1.15', 'tflite', ref),
      # fails on ours and on the control: the converter's limit
      _result(tmp_path, pb, 'TF 2.21', 'onnxruntime', error='E: While'),
      _result(tmp_path, control, 'TF 2.21', 'onnxruntime', error='E: While'),
      # fails on ours only: fails
      _result(tmp_path, pb, 'TF 2.21', 'openvino', error='E: no'),
      _result(tmp_path, control, 'TF 2.21', 'openvino', ref)]
  cells = {c.consumer: c for c in deploy._cells([_spec()], results)}
  assert cells['tf_session @ TF 2.21'].status == 'ok'
  assert cells['tflite @ TF 2.21'].status == 'ok'
  assert cells['tflite @ TF 2.21'].max_diff == pytest.approx(0.0003 / 4, rel=1e-3)
  assert cells['tflite @ TF 1.15'].status == 'wrong'
  assert cells['tflite @ TF 1.15'].max_diff == pytest.approx(0.5 / 4, rel=1e-6)
  assert cells['onnxruntime @ TF 2.21'].status == 'limit'
  assert cells['openvino @ TF 2.21'].status == 'fails'
  assert cells['openvino @ TF 2.21'].detail == 'E: no'


def test_a_nan_in_any_output_is_a_difference(tmp_path):
  """max() over the outputs skipped a NaN after the first (nan > 0.0 is
  False), so a NaN second output was `ok 0.0e+00`."""
  ref = [[1.0, 2.0], [3.0, 4.0]]
  job = 'TF 2.21/m/pb'

  def result(consumer, values):
    path = str(tmp_path / ('%s.npz' % consumer))
    np.savez(path, *[np.asarray(v, np.float32) for v in values])
    return dict(job=job, stack='TF 2.21', consumer=consumer, outputs=path)

  nan = float('nan')
  results = [result('tf_session', ref),
             result('tflite', [ref[0], [3.0, nan]]),
             result('onnxruntime', [[nan, 2.0], ref[1]]),
             result('openvino', [ref[0], [3.0, float('inf')]])]
  cells = {c.consumer.split(' @ ')[0]: c
           for c in deploy._cells([_spec()], results)}
  assert [(n, cells[n].text()) for n in sorted(cells)] == [
      ('onnxruntime', 'WRONG inf'), ('openvino', 'WRONG inf'),
      ('tf_session', 'ok 0.0e+00'), ('tflite', 'WRONG inf')]


def test_nans_and_infs_where_the_reference_has_them_are_no_difference():
  want = np.array([np.nan, np.inf, -2.0, 4.0], np.float32)
  got = np.array([np.nan, np.inf, -2.0, 4.0004], np.float32)
  assert deploy._relative_diff(got, want) == pytest.approx(1e-4, rel=1e-3)
  assert deploy._relative_diff(got[::-1].copy(), want) == float('inf')


def test_a_consumer_giving_fewer_outputs_fails_in_its_cell(tmp_path):
  """It raised KeyError 'arr_1 is not a file in the archive' and ended the
  whole check."""
  pb = 'TF 2.21/m/pb'
  results = [_result(tmp_path, pb, 'TF 2.21', 'tf_session', [1.0, 2.0]),
             _result(tmp_path, pb, 'TF 2.21', 'tflite', [1.0, 2.0])]
  np.savez(results[0]['outputs'], np.ones(2, np.float32),
           np.ones(3, np.float32))
  cells = deploy._cells([_spec()], results)
  assert [(c.consumer, c.text()) for c in cells] == [
      ('tf_session @ TF 2.21', 'ok 0.0e+00'),
      ('tflite @ TF 2.21', 'FAILS: gave 1 outputs for 2')]


def test_a_graph_its_own_session_cannot_run_fails_in_one_cell(tmp_path):
  results = [_result(tmp_path, 'TF 2.21/m/pb', 'TF 2.21', 'tf_session',
                     error='ValueError: bad')]
  (cell,) = deploy._cells([_spec()], results)
  assert (cell.consumer, cell.status) == ('tf_session @ TF 2.21', 'fails')
  # Its error is the reason the row has no other cell: it is shown.
  assert cell.text() == ('FAILS: the session that made it cannot run it: '
                         'ValueError: bad')


def test_matrix_orders_consumers_and_prints_each_verdict():
  cells = [Cell('a', 'openvino @ TF 2.21', 'fails', None, 'E: x|y'),
           Cell('a', 'tflite @ TF 1.15', 'wrong', 0.07, ''),
           Cell('a', 'tflite @ TF 2.21', 'ok', 1.5e-7, ''),
           Cell('a', 'tf_session @ TF 2.21', 'ok', 0.0, ''),
           Cell('b', 'tflite @ TF 2.21', 'limit', None, 'E: While')]
  assert format_matrix(cells).splitlines() == [
      '| model | tf_session @ TF 2.21 | tflite @ TF 2.21 | tflite @ TF 1.15 '
      '| openvino @ TF 2.21 |',
      '|---|---|---|---|---|',
      '| a | ok 0.0e+00 | ok 1.5e-07 | WRONG 7.0e-02 | FAILS: E: x/y |',
      '| b |  | limit (control too): E: While |  |  |']


@pytest.mark.parametrize('argv,message', [
    (['--inputs=x:1,a'], "--inputs entry 'x:1,a' must look like name:1,8,8,3"),
    (['--inputs=:1,2'], "--inputs entry ':1,2' has no node name"),
    (['--pb=m.pb'], '--pb needs --inputs and --outputs'),
    (['--markdown=/no/such/dir/m.md'], "--markdown '/no/such/dir/m.md': the "
     'folder /no/such/dir does not exist'),
    # A folder is refused up front, not after the whole check.
    (['--markdown=/'], "--markdown '/' is a folder: give the file to write, "
     'e.g. /deploy.md'),
    (['--models=cnn_element,cnn,lstm'], '--models names no model cnn,lstm; '
     'the models are %s' % ','.join(sorted(MODELS)))])
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
  assert check_deploy_cli.main(argv) == 2
  assert capsys.readouterr().err == 'check_deploy: error: %s\n' % message


_QUICK_MODELS = ('cnn_filter_shrunk', 'resnet_coupled_shrunk')


@pytest.mark.parametrize('model', [
    m if m in _QUICK_MODELS else pytest.param(m, marks=pytest.mark.slow)
    for m in sorted(MODELS)])
def test_this_stacks_consumers_run_our_graphs_correctly(model, tmp_path):
  """This stack builds the model and runs its session and TFLite converter:
  each is ok, or fails on the never-pruned control too (`limit`)."""
  cells = deploy.check_deploy([sys.executable], str(tmp_path), [model])
  assert [c.consumer.split(' @ ')[0] for c in cells][:2] == ['tf_session',
                                                             'tflite']
  bad = [(c.consumer, c.text()) for c in cells
         if c.status not in ('ok', 'limit')]
  assert not bad, bad


def test_a_given_pb_is_checked_without_a_control(tmp_path):
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  x = tf.placeholder(tf.float32, [1, 4], name='x')
  tf.nn.relu(tf.matmul(x, tf.constant(np.eye(4, dtype=np.float32))), name='y')
  path = os.path.join(str(tmp_path), 'eye.pb')
  with open(path, 'wb') as f:
    f.write(tf.get_default_graph().as_graph_def().SerializeToString())
  cells = deploy.check_deploy([sys.executable], str(tmp_path), pb=path,
                              inputs=[['x', [1, 4]]], outputs=['y'])
  assert [c.status for c in cells] == ['ok', 'ok']
  assert cells[0].model.startswith('eye.pb (made on TF ')


def test_workers_import_only_this_tf1prune_even_after_another_ran_there(
    tmp_path):
  """Their folder holds one link, to this package; a link left by a run of
  another tf1prune in the same work_dir is replaced."""
  elsewhere = tmp_path / 'other' / 'tf1prune'
  elsewhere.mkdir(parents=True)
  (tmp_path / 'package').mkdir()
  os.symlink(str(elsewhere), str(tmp_path / 'package' / 'tf1prune'))
  home = deploy._package_home(str(tmp_path))
  assert os.listdir(home) == ['tf1prune']
  assert os.path.realpath(os.path.join(home, 'tf1prune')) == os.path.realpath(
      os.path.dirname(deploy.__file__).rsplit(os.sep, 1)[0])
  assert deploy._package_home(str(tmp_path)) == home


def test_a_worker_that_cannot_run_is_one_line_error(tmp_path, capsys):
  broken = tmp_path / 'python'
  broken.write_text('#!/bin/sh\nexit 3\n')
  broken.chmod(0o755)
  with pytest.raises(ValueError) as e:
    deploy.check_deploy([str(broken)], str(tmp_path / 'work'),
                        ['cnn_filter_shrunk'])
  assert str(e.value).startswith('the deploy worker under %s failed (build, '
                                 'exit status 3' % broken)
  assert check_deploy_cli.main(['--tf1_python', str(broken),
                                '--models', 'cnn_filter_shrunk',
                                '--work_dir', str(tmp_path / 'cli')]) == 1
  last = capsys.readouterr().err.splitlines()[-1]
  assert last.startswith('check_deploy: error: the deploy worker under ')


def test_a_consumer_that_is_not_installed_is_said_to_be_left_out(
    tmp_path, monkeypatch, capsys):
  """Without tf1prune[deploy] the onnxruntime and openvino columns were
  missing from the matrix without a word, and the exit status was 0."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from tf1prune.deploy import _worker  # pylint: disable=g-import-not-at-top
  monkeypatch.setitem(sys.modules, 'tf2onnx', None)
  monkeypatch.setitem(sys.modules, 'openvino', None)
  jobs = tmp_path / 'jobs.json'
  jobs.write_text('[]')
  assert _worker.main(['run', str(jobs), str(tmp_path / 'results.json')]) == 0
  stack = _worker.stack_name()
  lines = capsys.readouterr().err.splitlines()
  if tf.__version__.startswith('1.'):
    assert lines == []      # TF 1.15 has neither converter
  else:
    assert lines == [
        '[check_deploy] %s on %s is left out of the matrix: import of %s '
        'halted; None in sys.modules (pip install "tf1prune[deploy]")'
        % (consumer, stack, module)
        for consumer, module in (('onnxruntime', 'tf2onnx'),
                                 ('openvino', 'openvino'))]


def test_no_tf1_python_is_said(monkeypatch, capsys):
  monkeypatch.delenv('TF1PRUNE_TF1_PYTHON', raising=False)
  monkeypatch.setattr(deploy, 'check_deploy', lambda pythons, *args: [
      Cell('m', 'tf_session @ TF 2.21', 'ok', 0.0, '')])
  assert check_deploy_cli.main(['--models=cnn_element']) == 0
  assert capsys.readouterr().err == (
      'check_deploy: no --tf1_python (or TF1PRUNE_TF1_PYTHON): TF 1.15 is '
      'left out of the matrix\n')


def test_a_work_dir_is_used_again(tmp_path):
  """A second run in the same --work_dir ended in `[Errno 17] File exists:
  .../stack0` before any worker ran."""
  broken = tmp_path / 'python'
  broken.write_text('#!/bin/sh\nexit 3\n')
  broken.chmod(0o755)
  for _ in range(2):
    with pytest.raises(ValueError) as e:
      deploy.check_deploy([str(broken)], str(tmp_path / 'work'),
                          ['cnn_filter_shrunk'])
    assert str(e.value).startswith('the deploy worker under %s failed '
                                   '(build, exit status 3' % broken)


def test_a_relative_work_dir_is_the_callers(tmp_path, monkeypatch):
  """The workers run in <work_dir>/package: a relative work_dir was read
  from there, so they found neither tf1prune nor their files."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default() as graph:
    x = tf.placeholder(tf.float32, [1, 4], name='x')
    tf.nn.relu(x * 2.0, name='y')
  (tmp_path / 'm.pb').write_bytes(graph.as_graph_def().SerializeToString())
  monkeypatch.chdir(str(tmp_path))
  cells = deploy.check_deploy([sys.executable], 'work', pb='m.pb',
                              inputs=[['x', [1, 4]]], outputs=['y'])
  assert [(c.consumer.split(' @ ')[0], c.status) for c in cells] == [
      ('tf_session', 'ok'), ('tflite', 'ok')]
  assert os.path.isfile(str(tmp_path / 'work' / 'results0.jsonl'))


_ABORTING_PYTHON = '''#!/bin/sh
# {python} -m tf1prune.deploy._worker ARGS, with a tflite consumer that
# aborts the process and a third consumer after it.
shift 2
exec {python} -c "
import os, runpy, sys
from tf1prune.deploy import _consumers
def tflite(*args):
  os.abort()
_consumers.available = lambda: dict(tf_session=_consumers.tf_session,
                                    tflite=tflite,
                                    zz_session=_consumers.tf_session)
_consumers.missing = dict
sys.argv[0] = 'worker'
runpy.run_module('tf1prune.deploy._worker', run_name='__main__')
" "$@"
'''


def test_a_consumer_that_ends_its_process_fails_in_its_cell(tmp_path):
  """It ended the whole check: 'the deploy worker ... failed (run, exit
  status -6 ...): check that this Python has TensorFlow and the consumers
  installed', no matrix (e.g. TF 1.15's TFLite interpreter on a 5-D Add)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  python = tmp_path / 'python'
  python.write_text(_ABORTING_PYTHON.format(python=sys.executable))
  python.chmod(0o755)
  with tf.Graph().as_default() as graph:
    x = tf.placeholder(tf.float32, [1, 4], name='x')
    tf.nn.relu(x * 2.0, name='y')
  (tmp_path / 'm.pb').write_bytes(graph.as_graph_def().SerializeToString())
  cells = deploy.check_deploy([str(python)], str(tmp_path / 'work'),
                              pb=str(tmp_path / 'm.pb'),
                              inputs=[['x', [1, 4]]], outputs=['y'])
  assert [(c.consumer.split(' @ ')[0], c.text()) for c in cells] == [
      ('tf_session', 'ok 0.0e+00'),
      ('tflite', 'FAILS: it ended the process (killed by SIGABRT)'),
      ('zz_session', 'ok 0.0e+00')]


def test_a_relative_python_is_the_callers(tmp_path, monkeypatch):
  """The workers start in <work_dir>/package, where subprocess looked for a
  relative interpreter: `--tf1_python=.venv/tf1/bin/python` failed with
  "No such file or directory: '.venv/tf1/bin/python'" though it exists."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default() as graph:
    x = tf.placeholder(tf.float32, [1, 4], name='x')
    tf.nn.relu(x * 2.0, name='y')
  (tmp_path / 'm.pb').write_bytes(graph.as_graph_def().SerializeToString())
  monkeypatch.chdir(str(tmp_path))
  python = os.path.relpath(sys.executable)     # this venv's bin/ on PATH
  assert os.path.dirname(python)
  cells = deploy.check_deploy([python], 'work', pb='m.pb',
                              inputs=[['x', [1, 4]]], outputs=['y'])
  assert [(c.consumer.split(' @ ')[0], c.status) for c in cells] == [
      ('tf_session', 'ok'), ('tflite', 'ok')]
