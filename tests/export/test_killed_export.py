"""A killed export leaves nothing behind once the next run of it is done.

`strip_pruning_vars --shrink` runs in a child process that stops at a named
point (tests/support/kill_worker.py) and is SIGKILLed there: half-way through
the strip, before and during the shrink, and just before the final rename. The
kill leaves the output's staging files; the next run of the same output
removes them and writes the same graph as an uninterrupted run. Staging files
of a live process, and of another output, are left alone.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow.compat.v1 as tf

from tf1prune.cli import strip_pruning_vars as strip_cli
from tests.support.checkout import ROOT, SUPPORT
from tests.support.graphs import read_graph_def
from tests.support.nets import save_conv_net

_WORKER = os.path.join(SUPPORT, 'kill_worker.py')
_STAGING = re.compile(r'^\.(?P<output>.+)\.tf1prune-(?P<host>[0-9a-f]{6})-'
                      r'(?P<pid>[0-9]+)-[A-Za-z0-9_]+\.[a-z]+$')


@pytest.fixture(scope='module')
def train_dir(tmp_path_factory):
  """A conv + fc net whose conv1 lost 3 of 8 filters: the shrink has work."""
  directory = str(tmp_path_factory.mktemp('train'))
  save_conv_net(directory, 8, [8, 8], 4, emptied=3)
  return directory


def _flags(train_dir, out):
  return ['--checkpoint_dir=' + train_dir, '--output_node_names=fc/BiasAdd',
          '--output_dir=' + out, '--filename=m.pb', '--shrink', '--quiet']


@pytest.fixture(scope='module')
def expected(train_dir, tmp_path_factory):
  """The .pb of an uninterrupted run."""
  out = str(tmp_path_factory.mktemp('expected'))
  assert strip_cli.main(_flags(train_dir, out)) == 0
  return os.path.join(out, 'm.pb')


def _killed_run(train_dir, out, point, tmp_path):
  """Runs the worker to `point`, SIGKILLs it; returns (pid, names left)."""
  ready = str(tmp_path / ('ready-' + point))
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='2')
  child = subprocess.Popen(
      [sys.executable, _WORKER, point, ready, '--'] + _flags(train_dir, out),
      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  deadline = time.time() + 300
  while not os.path.exists(ready) and child.poll() is None:
    if time.time() > deadline:
      child.kill()
      pytest.fail('worker never reached %s' % point)
    time.sleep(0.05)
  if child.poll() is not None:
    pytest.fail('worker exited %s before %s: %s' % (
        child.returncode, point, child.stderr.read().decode()[-2000:]))
  child.send_signal(signal.SIGKILL)
  child.wait()
  child.stderr.close()
  assert child.returncode == -signal.SIGKILL
  return child.pid, sorted(os.listdir(out))


@pytest.mark.parametrize('point, kinds', [
    ('strip', ['staged', 'tmp']),          # the marker, half the graph
    ('shrink', ['staged']),                # the whole stripped graph
    ('shrink_write', ['staged', 'tmp']),   # and half the shrunk one
    ('final', ['staged']),                 # the shrunk graph, not renamed
])
def test_next_run_removes_what_a_killed_run_left(train_dir, expected,
                                                  tmp_path, point, kinds):
  out = str(tmp_path / 'out')
  os.mkdir(out)
  with open(os.path.join(out, 'm.pb'), 'wb') as f:
    f.write(b'older file')
  pid, names = _killed_run(train_dir, out, point, tmp_path)
  litter = [n for n in names if n != 'm.pb']
  matches = [_STAGING.match(n) for n in litter]
  assert all(matches), litter
  assert sorted(m.string.rpartition('.')[2] for m in matches) == kinds
  assert set(m.group('output') for m in matches) == {'m.pb'}
  assert set(int(m.group('pid')) for m in matches) == {pid}
  with open(os.path.join(out, 'm.pb'), 'rb') as f:
    assert f.read() == b'older file'   # the kill never touched the output
  host = matches[0].group('host')

  # Staging files the next run must keep: a live process's of the same
  # output, and the dead process's of another output.
  sleeper = subprocess.Popen(['sleep', '120'])
  try:
    keep = ['.m.pb.tf1prune-%s-%d-live.staged' % (host, sleeper.pid),
            '.other.pb.tf1prune-%s-%d-dead.tmp' % (host, pid)]
    for name in keep:
      open(os.path.join(out, name), 'wb').close()
    assert strip_cli.main(_flags(train_dir, out)) == 0
    assert sorted(os.listdir(out)) == sorted(keep + ['m.pb'])
  finally:
    sleeper.kill()
    sleeper.wait()
  # The same GraphDef (the shrink's serialization orders attribute maps
  # as it likes on TF 1.15: compare the messages, not their bytes).
  assert read_graph_def(os.path.join(out, 'm.pb')) == read_graph_def(expected)


def test_the_shrink_of_the_fixture_removes_channels(expected):
  """The killed runs were interrupted in a shrink that does something."""
  graph_def = read_graph_def(expected)
  weights = {n.name: tf.make_ndarray(n.attr['value'].tensor).shape
             for n in graph_def.node if n.name.endswith('masked_weight')}
  assert weights['conv1/weights/masked_weight'] == (3, 3, 3, 5)
  assert weights['conv2/weights/masked_weight'] == (3, 3, 5, 8)
