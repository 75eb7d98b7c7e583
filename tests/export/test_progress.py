"""Progress of the long exports: the callback's counts, the terminal line.

The library functions call `progress(stage, done, total)`; the console
scripts draw it as one line on stderr when stderr is a terminal (checked
through a pseudo-terminal), and print nothing of it into a pipe or with
`--quiet`.
"""

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.export.progress import TerminalProgress, terminal_progress
from tests.support.checkout import ROOT
from tests.support.nets import save_conv_net

# A carriage return that rewrites a line (a terminal shows '\n' as '\r\n').
_BARE_CR = re.compile('\r(?!\n)')


class _Recorder(object):
  def __init__(self):
    self.calls, self.fractions = [], []

  def __call__(self, stage, done, total, fraction):
    self.calls.append((stage, done, total))
    self.fractions.append((stage, fraction))

  def stage(self, stage):
    return [(d, t) for s, d, t in self.calls if s == stage]


def _counts(total):
  return [(done, total) for done in range(total + 1)]


@pytest.fixture(scope='module')
def train_dir(tmp_path_factory):
  """conv1 (4 of 8 filters emptied), conv2, fc: masked, with biases."""
  directory = str(tmp_path_factory.mktemp('train'))
  return directory, save_conv_net(directory, 6, [8, 4], 3, emptied=4)


def test_strip_reports_every_variable_written(train_dir, tmp_path):
  progress = _Recorder()
  tf1prune.strip_checkpoint(train_dir[0], ['fc/BiasAdd'],
                            str(tmp_path / 'm.pb'), progress=progress)
  # Weights (masks folded in) and biases: the trainable variables.
  assert progress.calls == [('writing variables', d, t)
                            for d, t in _counts(train_dir[1])]
  # The share of the work is counted in weight entries: x is 6x6x3, conv1
  # 3x3x3x8 (+8), conv2 3x3x8x4 (+4), fc 144x3 (+3), in graph order.
  sizes = np.cumsum([216, 8, 288, 4, 432, 3])
  np.testing.assert_allclose([f for _, f in progress.fractions],
                             np.concatenate([[0], sizes / sizes[-1]]))


def test_shrink_reports_the_layers_of_each_round(train_dir, tmp_path):
  path = str(tmp_path / 'm.pb')
  tf1prune.strip_checkpoint(train_dir[0], ['fc/BiasAdd'], path)
  progress = _Recorder()
  report = tf1prune.shrink_pb(path, ['fc/BiasAdd'], progress=progress)
  assert [l.outputs_after for l in report.layers] == [4, 4, 3]
  stages = sorted(set(s for s, _, _ in progress.calls))
  # Batch norms folded first; round 1 removes conv1's channels, round 2
  # finds nothing more; then the shrunk graph is checked.
  assert stages == ['checking the shrunk graph', 'preparing the graph',
                    'shrinking layers (round 1)', 'shrinking layers (round 2)']
  assert progress.stage('preparing the graph') == _counts(1)
  assert progress.stage('checking the shrunk graph') == _counts(1)
  for stage in stages[2:]:
    assert progress.stage(stage) == _counts(len(report.layers))


def test_prune_checkpoint_reports_variables_read_and_weights_pruned(
    train_dir, tmp_path):
  progress = _Recorder()
  tf1prune.export.prune_checkpoint(
      train_dir[0], str(tmp_path / 'pruned'),
      {'conv2/weights': 0.5, 'fc/weights': 0.5}, progress=progress)
  reader = tf.train.load_checkpoint(train_dir[0])
  count = len(reader.get_variable_to_shape_map())
  assert progress.stage('reading variables') == _counts(count)
  assert progress.stage('pruning weights') == _counts(2)


class _Tty(io.StringIO):
  def isatty(self):
    return True


def test_terminal_line_is_rewritten_in_place_with_time_left():
  out = _Tty()
  times = iter([100.0, 100.0, 101.0, 101.1, 104.0, 104.0])
  bar = TerminalProgress(out, prog='prog', clock=lambda: next(times))
  bar('writing variables', 0, 4, 0.0)   # drawn: a new stage
  bar('writing variables', 1, 4, 0.1)   # drawn: 1 s after the last
  bar('writing variables', 2, 4, 0.2)   # skipped: 0.1 s after the last
  bar('writing variables', 4, 4, 1.0)   # drawn: the last item
  bar('shrinking layers (round 1)', 0, 9)
  frames = out.getvalue().split('\r')[1:]
  assert [f.rstrip() for f in frames] == [
      'prog: writing variables 0/4, 0s elapsed',
      'prog: writing variables 1/4, 1s elapsed, about 9s left',
      'prog: writing variables 4/4, 4s elapsed',
      'prog: shrinking layers (round 1) 0/9, 4s elapsed']
  # A shorter frame overwrites the rest of the longer one with spaces.
  assert len(frames[2]) == len(frames[1])
  bar.close()
  assert out.getvalue().endswith('\r' + ' ' * len(frames[3]) + '\r')


def test_no_terminal_no_progress():
  assert terminal_progress('p', stream=io.StringIO()) is None
  assert terminal_progress('p', quiet=True, stream=_Tty()) is None
  assert isinstance(terminal_progress('p', stream=_Tty()), TerminalProgress)


def _run_cli(module, flags, tty, status=0):
  """Runs a console script; returns its stderr (through a pty if `tty`);
  its exit status must be `status`."""
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='2')
  command = [sys.executable, '-m', module] + flags
  if not tty:
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=600)
    assert done.returncode == status, done.stderr
    return done.stderr.decode()
  master, slave = pty.openpty()
  child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                           stderr=slave)
  os.close(slave)
  data = b''
  while True:
    try:
      chunk = os.read(master, 4096)
    except OSError:  # EIO: the child closed the terminal.
      break
    if not chunk:
      break
    data += chunk
  os.close(master)
  child.stdout.read()
  child.stdout.close()
  assert child.wait(timeout=600) == status, data
  return data.decode()


def _strip_flags(train_dir, out, *extra):
  return ['--checkpoint_dir=' + train_dir[0], '--output_node_names=fc/BiasAdd',
          '--output_dir=' + out] + list(extra)


def test_strip_cli_draws_progress_on_a_terminal_only(train_dir, tmp_path):
  text = _run_cli('tf1prune.cli.strip_pruning_vars',
                  _strip_flags(train_dir, str(tmp_path / 'a'), '--shrink'),
                  tty=True)
  total = train_dir[1]
  assert '\rstrip_pruning_vars: writing variables %d/%d' % (total, total) \
      in text
  assert '\rstrip_pruning_vars: shrinking layers (round 1) 3/3' in text
  assert text.endswith('\r')   # the line is cleared for the table
  piped = _run_cli('tf1prune.cli.strip_pruning_vars',
                   _strip_flags(train_dir, str(tmp_path / 'b'), '--shrink'),
                   tty=False)
  assert 'writing variables' not in piped and not _BARE_CR.search(piped)
  quiet = _run_cli('tf1prune.cli.strip_pruning_vars',
                   _strip_flags(train_dir, str(tmp_path / 'c'), '--shrink',
                                '--quiet'), tty=True)
  assert 'writing variables' not in quiet and not _BARE_CR.search(quiet)


def test_prune_checkpoint_cli_draws_progress_on_a_terminal_only(train_dir,
                                                                tmp_path):
  flags = ['--checkpoint=' + train_dir[0], '--sparsity=fc/weights:0.5']
  text = _run_cli('tf1prune.cli.prune_checkpoint',
                  flags + ['--output_dir=' + str(tmp_path / 'a')], tty=True)
  assert '\rprune_checkpoint: pruning weights 1/1' in text
  quiet = _run_cli('tf1prune.cli.prune_checkpoint',
                   flags + ['--output_dir=' + str(tmp_path / 'b'), '--quiet'],
                   tty=True)
  assert 'pruning weights' not in quiet
  piped = _run_cli('tf1prune.cli.prune_checkpoint',
                   flags + ['--output_dir=' + str(tmp_path / 'c')], tty=False)
  assert 'pruning weights' not in piped


def test_an_error_is_printed_after_the_progress_line_is_cleared(train_dir,
                                                                tmp_path):
  text = _run_cli('tf1prune.cli.prune_checkpoint',
                  ['--checkpoint=' + train_dir[0],
                   '--zero=fc/weights[0, 0, 0, 0, 0]',
                   '--output_dir=' + str(tmp_path / 'a')], tty=True, status=1)
  assert re.search(r'reading variables [^\r]*\r +\rprune_checkpoint: '
                   r'error: --zero fc/weights', text), repr(text)


def test_a_line_as_wide_as_the_terminal_drops_the_program_name_then_is_cut():
  # On an 80-column terminal an 80-column line wraps, and '\r' rewrites
  # only its last row: every redraw would add a row.
  frames = {}
  for columns in (80, 50):
    out = _Tty()
    times = iter([100.0, 100.0, 128.0])
    bar = TerminalProgress(out, prog='strip_pruning_vars',
                           clock=lambda: next(times), columns=columns)
    bar('shrinking layers (round 1)', 0, 54, 0.0)
    bar('shrinking layers (round 1)', 20, 54, 20 / 54.0)
    frames[columns] = out.getvalue().split('\r')[1:]
  assert frames[80] == [
      'strip_pruning_vars: shrinking layers (round 1) 0/54, 0s elapsed',
      'shrinking layers (round 1) 20/54, 28s elapsed, about 48s left  ']
  assert frames[50] == [
      'shrinking layers (round 1) 0/54, 0s elapsed',
      'shrinking layers (round 1) 20/54, 28s elapsed, ab']


def test_the_line_fits_the_width_of_the_real_terminal():
  master, slave = pty.openpty()
  try:
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 40, 0, 0))
    with io.open(slave, 'w', closefd=False) as stream:
      times = iter([0.0, 0.0, 3.0])
      bar = TerminalProgress(stream, prog='prune_checkpoint',
                             clock=lambda: next(times))
      bar('reading variables', 0, 4, 0.0)
      bar('reading variables', 1, 4, 0.25)
    text = os.read(master, 4096).decode()
  finally:
    os.close(master)
    os.close(slave)
  assert text.split('\r')[1:] == ['reading variables 0/4, 0s elapsed',
                                  'reading variables 1/4, 3s elapsed, abou']
