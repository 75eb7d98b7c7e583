"""Atomic writes: a write that fails leaves the existing output as it was.

The project writes `.pb` files and JSON reports through
`tf1prune.export.write_atomically` (a temporary file in the same directory,
then one `os.replace`), pruned checkpoints into a new directory renamed into
place, and checkpoints through TF's `Saver` (a temporary file per data shard,
then a rename). Each test makes a write fail midway and checks that the old
file is intact and that no temporary file is left behind.
"""

import errno
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.export import atomic, pipeline, stream


def _listing(directory):
  return sorted(os.listdir(directory))


def _read(path):
  with open(path, 'rb') as f:
    return f.read()


# ------------------------------------------------------------ the helper


@pytest.mark.parametrize('error', [OSError(errno.ENOSPC, 'No space left'),
                                   KeyboardInterrupt()])
def test_write_atomically_keeps_the_old_file_when_the_write_fails(tmp_path,
                                                                  error):
  path = str(tmp_path / 'out.pb')
  with open(path, 'wb') as f:
    f.write(b'old contents')
  with pytest.raises(type(error)):
    with atomic.write_atomically(path) as f:
      f.write(b'new contents, half of them')
      raise error
  assert _read(path) == b'old contents'
  assert _listing(str(tmp_path)) == ['out.pb']


def test_write_atomically_replaces_the_file_in_one_step(tmp_path):
  path = str(tmp_path / 'out.pb')
  with open(path, 'wb') as f:
    f.write(b'old')
  with atomic.write_atomically(path) as f:
    f.write(b'new')
    # Until the block ends, readers still see the old file.
    assert _read(path) == b'old'
  assert _read(path) == b'new'
  assert _listing(str(tmp_path)) == ['out.pb']


def test_write_atomically_into_a_missing_directory_is_a_value_error(tmp_path):
  missing = str(tmp_path / 'missing' / 'out.pb')
  with pytest.raises(ValueError, match='does not exist; create it first'):
    with atomic.write_atomically(missing):
      pass
  assert _listing(str(tmp_path)) == []


def _dead_pid():
  """The pid of a process that has ended."""
  child = subprocess.Popen(['true'])
  child.wait()
  return child.pid


def _staging_name(output, pid, kind, host=None):
  """A staging name as `atomic.staging_path` makes them, for another pid."""
  own = os.path.basename(atomic.staging_path(output, kind))
  os.remove(os.path.join(os.path.dirname(output), own))
  match = re.match(r'^(\..+\.tf1prune-)([0-9a-f]{6})-\d+-', own)
  return '%s%s-%d-x.%s' % (match.group(1), host or match.group(2), pid, kind)


def test_staging_names_carry_the_output_and_this_process(tmp_path):
  path = str(tmp_path / 'm.pb')
  staged = atomic.staging_path(path, 'staged')
  # A staging file's own staging files belong to the same output.
  tmp = atomic.staging_path(staged, 'tmp')
  for name in (staged, tmp):
    assert re.match(r'^\.m\.pb\.tf1prune-[0-9a-f]{6}-%d-\w+\.(staged|tmp)$'
                    % os.getpid(), os.path.basename(name)), name
    assert atomic.output_of(name) == 'm.pb'


def test_write_removes_only_dead_processes_staging_files_of_its_output(
    tmp_path):
  path = str(tmp_path / 'm.pb')
  dead = _dead_pid()
  sleeper = subprocess.Popen(['sleep', '60'])
  try:
    stale = [_staging_name(path, dead, 'tmp'),
             _staging_name(path, dead, 'staged')]
    keep = [_staging_name(path, sleeper.pid, 'tmp'),               # live
            _staging_name(path, dead, 'tmp', host='000000'),       # a host
            _staging_name(str(tmp_path / 'n.pb'), dead, 'tmp'),    # output
            '.m.pb.tmp', 'm.pb.%d.tmp' % dead]                     # not ours
    for name in stale + keep:
      open(os.path.join(str(tmp_path), name), 'wb').close()
    os.mkdir(os.path.join(str(tmp_path), _staging_name(path, dead, 'dir')))
    with atomic.write_atomically(path) as f:
      f.write(b'new')
    assert _listing(str(tmp_path)) == sorted(keep + ['m.pb'])
  finally:
    sleeper.kill()
    sleeper.wait()


# ------------------------------------------------------- the strip tool


def _pruned_checkpoint(directory):
  """Saves a small pruned model; returns the output node name."""
  step = tf.train.get_or_create_global_step()
  w = tf.get_variable('fc/weights', initializer=tf.constant(
      np.arange(1.0, 13.0, dtype=np.float32).reshape(4, 3)))
  with tf.variable_scope('fc'):
    kernel = tf1prune.apply_mask(w)
  tf.identity(tf.matmul(tf.ones([2, 4]), kernel), name='out')
  update = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=1')).mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 10))
    sess.run(update)
    tf.train.Saver().save(sess, os.path.join(directory, 'model.ckpt'),
                          global_step=10)
  return 'out'


def test_strip_failing_midway_leaves_the_old_pb_intact(tmp_path, monkeypatch):
  train, out = str(tmp_path / 'train'), str(tmp_path / 'out')
  os.makedirs(train)
  os.makedirs(out)
  node = _pruned_checkpoint(train)
  path = os.path.join(out, 'stripped.pb')
  tf1prune.strip_checkpoint(train, [node], path)
  old = _read(path)
  assert old

  real = stream.const_node_chunks

  def disk_full_after_first_chunk(*args, **kwargs):
    for chunk in real(*args, **kwargs):
      yield chunk
      raise OSError(errno.ENOSPC, 'No space left on device')

  monkeypatch.setattr(stream, 'const_node_chunks',
                      disk_full_after_first_chunk)
  with pytest.raises(OSError, match='No space left'):
    tf1prune.strip_checkpoint(train, [node], path)
  assert _read(path) == old
  assert _listing(out) == ['stripped.pb']


def test_strip_cli_failing_report_keeps_the_old_pb_and_report(tmp_path,
                                                              monkeypatch):
  from tf1prune.cli import strip_pruning_vars as strip_cli
  train, out = str(tmp_path / 'train'), str(tmp_path / 'out')
  os.makedirs(train)
  os.makedirs(out)
  node = _pruned_checkpoint(train)
  pb, report = os.path.join(out, 'p.pb'), os.path.join(out, 'report.json')
  argv = ['--checkpoint_dir=' + train, '--output_node_names=' + node,
          '--output_dir=' + out, '--filename=p.pb', '--report_json=' + report]
  assert strip_cli.main(argv) == 0
  old_pb, old_report = _read(pb), _read(report)

  class FailingJson(object):

    @staticmethod
    def dumps(*args, **kwargs):
      raise OSError(errno.ENOSPC, 'No space left on device')

  monkeypatch.setattr(pipeline, 'json', FailingJson)
  assert strip_cli.main(argv) == 1
  assert _read(report) == old_report
  assert _read(pb) == old_pb


# ------------------------------------------------------ TF checkpoints

_SAVE_WITH_A_FILE_SIZE_LIMIT = textwrap.dedent('''
    import os, resource, signal, sys
    import numpy as np
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    directory, step = sys.argv[1], int(sys.argv[2])
    v = tf.get_variable('big', initializer=tf.constant(
        np.arange(1 << 18, dtype=np.float32)))
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      saver.save(sess, os.path.join(directory, 'model.ckpt'), global_step=1)
      sess.run(tf.assign(v, tf.zeros_like(v)))
      # Files may now grow to 64 KB only: the 1 MB data shard cannot be
      # written (EFBIG, as on a full disk).
      signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
      resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, resource.RLIM_INFINITY))
      try:
        saver.save(sess, os.path.join(directory, 'model.ckpt'),
                   global_step=step)
      except tf.errors.OpError as e:
        print('save failed: %s' % type(e).__name__)
        sys.exit(0)
    print('save succeeded')
    sys.exit(1)
''')


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs RLIMIT_FSIZE')
@pytest.mark.parametrize('step', [2, 1], ids=['new_step', 'same_prefix'])
def test_checkpoint_survives_a_failing_save(tmp_path, step):
  directory = str(tmp_path)
  proc = subprocess.run(
      [sys.executable, '-c', _SAVE_WITH_A_FILE_SIZE_LIMIT, directory,
       str(step)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'), timeout=240)
  output = proc.stdout.decode('utf-8', 'replace')
  assert proc.returncode == 0 and 'save failed' in output, output[-2000:]
  latest = tf.train.latest_checkpoint(directory)
  assert latest == os.path.join(directory, 'model.ckpt-1')
  value = tf.train.load_variable(latest, 'big')
  np.testing.assert_array_equal(value, np.arange(1 << 18, dtype=np.float32))
  # No data shard of step 2 and no temporary file are left behind.
  assert _listing(directory) == ['checkpoint',
                                 'model.ckpt-1.data-00000-of-00001',
                                 'model.ckpt-1.index', 'model.ckpt-1.meta']


# --------------------------------------------------- pruned checkpoints


def test_prune_checkpoint_never_touches_an_existing_output(tmp_path,
                                                           monkeypatch):
  checkpoint_prune = pytest.importorskip('tf1prune.checkpoint_prune')
  train = str(tmp_path / 'train')
  os.makedirs(train)
  _pruned_checkpoint(train)
  existing = str(tmp_path / 'existing')
  os.makedirs(existing)
  with open(os.path.join(existing, 'keep'), 'w') as f:
    f.write('keep')
  with pytest.raises(Exception):
    checkpoint_prune.prune_checkpoint(train, existing, sparsity={'fc': 0.5})
  assert _listing(existing) == ['keep']

  def fail(*args, **kwargs):
    raise OSError(errno.ENOSPC, 'No space left on device')

  monkeypatch.setattr(tf.io.gfile, 'copy', fail)   # copying the .meta file
  target = str(tmp_path / 'new')
  with pytest.raises(OSError, match='No space left'):
    checkpoint_prune.prune_checkpoint(train, target, sparsity={'fc': 0.5})
  assert not os.path.exists(target)
  assert _listing(str(tmp_path)) == ['existing', 'train']


def test_prune_checkpoint_removes_a_killed_runs_folder(tmp_path):
  train = str(tmp_path / 'train')
  os.makedirs(train)
  _pruned_checkpoint(train)
  target = str(tmp_path / 'new')
  left = os.path.join(str(tmp_path), _staging_name(target, _dead_pid(), 'tmp'))
  os.makedirs(os.path.join(left, 'half'))
  tf1prune.export.prune_checkpoint(train, target, sparsity={'fc': 0.5})
  assert _listing(str(tmp_path)) == ['new', 'train']
