"""bin/prune_checkpoint: prune a saved checkpoint, resume training from it."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import checkpoint_flags
from tf1prune.cli import prune_checkpoint as prune_checkpoint_cli
from tf1prune.export import checkpoint_prune
from tests.support import np_reference
from tests.support.checkout import ROOT

LOCKED = np.s_[:, :, 1, 2]


def _build():
  """conv (masked) -> fc (masked, locked) with Momentum and a global step."""
  rs = np.random.RandomState(0)
  images = tf.constant(rs.randn(4, 5, 5, 3).astype(np.float32))
  step = tf.train.get_or_create_global_step()
  with tf.variable_scope('conv1'):
    kernel = tf.get_variable('weights', initializer=rs.randn(3, 3, 3, 4)
                             .astype(np.float32))
    net = tf.nn.conv2d(images, tf1prune.apply_mask(kernel), [1, 1, 1, 1],
                       'SAME')
  with tf.variable_scope('conv2'):
    kernel2 = tf.get_variable('weights', initializer=rs.randn(3, 3, 4, 4)
                              .astype(np.float32))
    effective = tf1prune.lock(tf1prune.apply_mask(kernel2), LOCKED)
    net = tf.nn.conv2d(net, effective, [1, 1, 1, 1], 'SAME')
  with tf.variable_scope('fc'):
    bias = tf.get_variable('biases', initializer=np.ones(4, np.float32))
  loss = tf.reduce_mean(tf.square(net + bias - 1.0))
  train = tf.train.MomentumOptimizer(0.01, 0.9).minimize(loss, global_step=step)
  return train, step, effective


def _train(logdir, steps):
  with tf.Graph().as_default():
    train, step, effective = _build()
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=logdir, hooks=[tf1prune.LockHook()],
        save_checkpoint_steps=steps, save_summaries_steps=None) as sess:
      for _ in range(steps):
        sess.run(train)
      return sess.run(effective)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """One training run for the module; tests only read it."""
  logdir = str(tmp_path_factory.mktemp('train'))
  effective = _train(logdir, 3)
  return logdir, effective


def _read(prefix):
  reader = tf.train.NewCheckpointReader(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_prunes_by_magnitude_zeroes_slots_and_updates_masks(trained, tmp_path):
  logdir, _ = trained
  before = _read(tf.train.latest_checkpoint(logdir))
  out = str(tmp_path / 'pruned')
  report = checkpoint_prune.prune_checkpoint(
      logdir, out, {'conv1/weights$': 0.75}, [('conv2/weights', (0, 0, 3, 1))])
  assert report['checkpoint'] == os.path.join(out, 'model.ckpt-3')
  assert sorted(os.listdir(out)) == sorted([
      'checkpoint', 'model.ckpt-3.data-00000-of-00001', 'model.ckpt-3.index',
      'model.ckpt-3.meta'])
  assert tf.train.latest_checkpoint(out) == report['checkpoint']
  after = _read(report['checkpoint'])
  assert sorted(after) == sorted(before)
  w = before['conv1/weights']
  keep = np_reference.magnitude_mask(np.abs(w), 0.75)
  np.testing.assert_array_equal(after['conv1/weights'], w * keep)
  np.testing.assert_array_equal(after['conv1/mask'], keep)
  assert after['conv1/threshold'] == np.abs(w)[keep == 1].min()
  np.testing.assert_array_equal(after['conv1/weights/Momentum'],
                                before['conv1/weights/Momentum'] * keep)
  # conv2: one entry zeroed in the weight, the mask, the slot and the lock.
  for name in ('conv2/weights', 'conv2/mask', 'conv2/weights/Momentum'):
    assert after[name][0, 0, 3, 1] == 0.0
    changed = after[name] != before[name]
    assert changed.sum() <= 1
  assert after['conv2/lock_mask'][0, 0, 3, 1]
  assert after['conv2/lock_value'][0, 0, 3, 1] == 0.0
  assert after['conv2/lock_mask'].sum() == before['conv2/lock_mask'].sum() + 1
  for name in ('fc/biases', 'global_step', 'conv2/lock_captured'):
    np.testing.assert_array_equal(after[name], before[name])
  entry = {e['name']: e for e in report['weights']}
  assert entry['conv1/weights']['zeros_after'] == 0.75
  assert entry['conv1/weights']['slots'] == ['conv1/weights/Momentum']
  assert entry['conv2/weights']['locks'] == ['conv2/lock_mask']


def test_each_weight_is_pruned_in_a_graph_of_its_own(trained, tmp_path,
                                                    monkeypatch):
  # In one graph for all, each run went through every earlier weight's ops:
  # the time per weight grew with the number of weights.
  from tf1prune import masks
  magnitude_mask = masks.magnitude_mask
  ops_before = []

  def recording(weights, sparsity):
    ops_before.append([op.type for op in weights.graph.get_operations()])
    return magnitude_mask(weights, sparsity)

  monkeypatch.setattr(masks, 'magnitude_mask', recording)
  checkpoint_prune.prune_checkpoint(
      trained[0], str(tmp_path / 'out'),
      {'conv1/weights': 0.5, 'conv2/weights': 0.5})
  assert ops_before == [['Placeholder'], ['Placeholder']]


def test_repeated_sparsity_flags_all_apply(trained, tmp_path, capsys):
  # Every --sparsity applies, not only the last: conv1 is pruned too.
  logdir, _ = trained
  before = _read(tf.train.latest_checkpoint(logdir))
  out = str(tmp_path / 'pruned')
  code, stdout, stderr = _main(
      ['--checkpoint', logdir, '--output_dir', out, '--sparsity',
       'conv1/weights:0.75', '--sparsity', 'conv2/weights:0.5'], capsys)
  assert (code, stderr) == (0, '')
  assert [line.split(' ')[0] for line in stdout.splitlines()] == [
      'conv1/weights', 'conv2/weights', 'wrote']
  after = _read(tf.train.latest_checkpoint(out))
  w1 = before['conv1/weights']
  np.testing.assert_array_equal(
      after['conv1/mask'], np_reference.magnitude_mask(np.abs(w1), 0.75))
  keep2 = np_reference.magnitude_mask(np.abs(before['conv2/weights']), 0.5)
  keep2[LOCKED] = 1.0           # entries under the lock keep their mask
  np.testing.assert_array_equal(after['conv2/mask'], keep2)


def test_training_resumes_from_the_pruned_checkpoint(trained, tmp_path):
  logdir, effective = trained
  out = str(tmp_path / 'pruned')
  checkpoint_prune.prune_checkpoint(logdir, out, {'conv1/weights$': 0.5},
                                    [('conv2/weights', (0, 0, 3, 1))])
  pruned = _read(tf.train.latest_checkpoint(out))
  with tf.Graph().as_default():
    train, step, effective2 = _build()
    records = {r.name: r for r in tf1prune.masked_weight_records()}
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=out, hooks=[tf1prune.LockHook()],
        save_checkpoint_steps=None, save_summaries_steps=None) as sess:
      assert sess.run(step) == 3
      np.testing.assert_array_equal(sess.run(records['conv1/weights'].mask),
                                    pruned['conv1/mask'])
      for _ in range(2):
        sess.run(train)
      assert sess.run(step) == 5
      conv1 = sess.run(records['conv1/weights'].masked_weight)
      conv2 = sess.run(effective2)
  assert np.all(conv1[pruned['conv1/mask'] == 0] == 0.0)
  assert (conv1 == 0).mean() == 0.5
  assert conv2[0, 0, 3, 1] == 0.0
  # The original lock still holds its values bit for bit.
  np.testing.assert_array_equal(conv2[LOCKED], effective[LOCKED])


def test_mask_of_a_locked_weight_is_written(tmp_path):
  # apply_mask(lock(w)): the mask record names the lock's output, the
  # checkpoint the variable w.
  with tf.Graph().as_default():
    with tf.variable_scope('fc'):
      w = tf.get_variable('weights', [8, 6],
                          initializer=tf.glorot_uniform_initializer(seed=1))
      tf1prune.apply_mask(tf1prune.lock(w, np.s_[0, :], value='zero'))
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      prefix = saver.save(sess, str(tmp_path / 'train' / 'model.ckpt'))
  before = _read(prefix)
  out = str(tmp_path / 'pruned')
  report = checkpoint_prune.prune_checkpoint(prefix, out, {'fc/weights': 0.5})
  after = _read(report['checkpoint'])
  w = before['fc/weights']
  keep = np_reference.magnitude_mask(np.abs(w), 0.5)
  keep[0, :] = 1      # locked entries keep their mask
  np.testing.assert_array_equal(after['fc/mask'], keep)
  np.testing.assert_array_equal(after['fc/weights'], w * keep)
  assert after['fc/threshold'] == np.abs(w)[
      np_reference.magnitude_mask(np.abs(w), 0.5) == 1].min()


def test_without_meta_graph_masks_are_found_by_name(trained, tmp_path):
  logdir, _ = trained
  copy = str(tmp_path / 'copy')
  shutil.copytree(logdir, copy)
  prefix = os.path.join(copy, os.path.basename(tf.train.latest_checkpoint(logdir)))
  os.remove(prefix + '.meta')
  out = str(tmp_path / 'pruned')
  report = checkpoint_prune.prune_checkpoint(prefix, out,
                                             {'conv1/weights$': 0.5})
  after = _read(report['checkpoint'])
  assert (after['conv1/mask'] == 0).mean() == 0.5
  np.testing.assert_array_equal(after['conv1/mask'],
                                (after['conv1/weights'] != 0).astype(np.float32))
  assert not os.path.exists(report['checkpoint'] + '.meta')


def test_parse_helpers():
  assert checkpoint_flags.parse_sparsity_map('a:0.5, b/c$:0.9,') == {
      'a': 0.5, 'b/c$': 0.9}
  assert checkpoint_flags.parse_zero('conv2/weights[:, :, 29, 13]') == (
      'conv2/weights', (slice(None), slice(None), 29, 13))
  assert checkpoint_flags.parse_index('..., 1:5:2, -1') == (
      Ellipsis, slice(1, 5, 2), -1)


def _main(argv, capsys):
  code = prune_checkpoint_cli.main(argv)
  captured = capsys.readouterr()
  return code, captured.out, captured.err


@pytest.mark.parametrize('argv,message,status', [
    (['--sparsity', 'conv1'], "--sparsity entries must look like 'regex:0.8'",
     2),
    (['--sparsity', 'conv1:1.5'], r'sparsity must be a number in \[0, 1\)', 2),
    (['--sparsity', '(:0.5'], "--sparsity regex '\\(' is not valid", 2),
    # Not the later value without a word: an error.
    (['--sparsity', 'conv1/weights:0.5,conv1/weights:0.3'],
     r"--sparsity regex 'conv1/weights' is given twice \(0\.5 and 0\.3\); "
     r"give each regex once$", 2),
    (['--zero', 'conv2/weights'], '--zero must look like', 2),
    (['--zero', 'conv2/weights[a]'], 'each part must be an int', 2),
    ([], 'nothing to do', 2),
    (['--sparsity', 'nothing_here:0.5'], "matches no prunable variable", 1),
    (['--sparsity', 'weights:0.5,conv1:0.2'], 'matches both', 1),
    (['--zero', 'conv2/weights[:, :, 9]'], 'does not fit a weight of shape', 1),
    (['--sparsity', 'conv1/mask:0.5'], 'matches no prunable variable', 1),
])
def test_bad_input_is_one_line_error_and_writes_nothing(argv, message, status,
                                                        trained, tmp_path,
                                                        capsys):
  logdir, _ = trained
  out = str(tmp_path / 'pruned')
  before = sorted(os.listdir(str(tmp_path)))
  code, stdout, stderr = _main(['--checkpoint', logdir, '--output_dir', out]
                               + argv, capsys)
  assert code == status     # 2: the flags themselves, 1: the checkpoint
  lines = stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('prune_checkpoint: error: ')
  assert __import__('re').search(message, lines[0]), lines[0]
  assert sorted(os.listdir(str(tmp_path))) == before
  assert stdout == ''


@pytest.mark.parametrize('value', [1.0, 1.5, -0.5, float('nan'), '0.5', True])
def test_api_refuses_a_sparsity_outside_0_1(value, trained, tmp_path):
  logdir, _ = trained
  out = str(tmp_path / 'pruned')
  with pytest.raises(checkpoint_prune.CheckpointPruneError,
                     match=r"sparsity\['conv1/weights'\] = .*\[0, 1\)"):
    checkpoint_prune.prune_checkpoint(logdir, out, {'conv1/weights': value})
  assert not os.path.exists(out)


def test_a_partitioned_weight_is_refused_by_name(tmp_path):
  with tf.Graph().as_default():
    tf.get_variable('fc/weights', [6, 4],
                    initializer=tf.glorot_uniform_initializer(seed=2),
                    partitioner=tf.fixed_size_partitioner(2))
    tf.train.get_or_create_global_step()
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      prefix = saver.save(sess, str(tmp_path / 'train' / 'model.ckpt'))
  with pytest.raises(checkpoint_prune.CheckpointPruneError,
                     match='matches fc/weights, partitioned in the graph'):
    checkpoint_prune.prune_checkpoint(prefix, str(tmp_path / 'out'),
                                      {'fc/weights': 0.5})


def test_missing_checkpoint_and_existing_output(tmp_path, capsys):
  empty = tmp_path / 'empty'
  empty.mkdir()
  code, _, err = _main(['--checkpoint', str(empty), '--output_dir',
                        str(tmp_path / 'o'), '--sparsity', 'w:0.5'], capsys)
  assert code == 1 and 'has no checkpoint' in err
  code, _, err = _main(['--checkpoint', str(tmp_path / 'nope'), '--output_dir',
                        str(tmp_path / 'o'), '--sparsity', 'w:0.5'], capsys)
  assert code == 1 and 'neither a folder nor a checkpoint prefix' in err
  prefix = str(empty / 'm.ckpt-3')
  open(prefix + '.index', 'w').close()
  for suffix in ('.index', '.meta', '.data-00000-of-00001'):
    code, _, err = _main(['--checkpoint', prefix + suffix, '--output_dir',
                          str(tmp_path / 'o'), '--sparsity', 'w:0.5'], capsys)
    assert code == 1 and err.strip().endswith(
        '--checkpoint %s%s is a file of checkpoint %s: pass that prefix or its '
        'folder' % (prefix, suffix, prefix)), err
  os.remove(prefix + '.index')
  code, _, err = _main(['--checkpoint', str(empty), '--output_dir', str(empty),
                        '--sparsity', 'w:0.5'], capsys)
  assert code == 1 and 'exists; give a new folder' in err
  code, _, err = _main(['--output_dir', 'x'], capsys)
  assert code == 2 and 'required: --checkpoint' in err
  assert sorted(os.listdir(str(tmp_path))) == ['empty']


def _run_cli(python, argv):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([python, os.path.join(ROOT, 'bin', 'prune_checkpoint')]
                        + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        env=env, timeout=300)


def test_bin_script_prints_per_weight_report(trained, tmp_path):
  logdir, _ = trained
  out = str(tmp_path / 'pruned')
  result = _run_cli(sys.executable, ['--checkpoint', logdir, '--output_dir',
                                     out, '--sparsity', 'conv.*/weights:0.5'])
  assert result.returncode == 0, result.stderr.decode()[-2000:]
  lines = result.stdout.decode().strip().splitlines()
  assert lines[0].startswith('conv1/weights [3, 3, 3, 4]: zeros 0.0000 -> 0.5000')
  assert 'mask conv1/mask' in lines[0] and 'slots conv1/weights/Momentum' in lines[0]
  assert lines[1].startswith('conv2/weights [3, 3, 4, 4]: zeros ')
  assert lines[-1] == 'wrote %s' % os.path.join(out, 'model.ckpt-3')


def test_bin_script_bad_input_prints_one_line_only(tmp_path):
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(('TF_CPP', 'TF_ENABLE'))}
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, 'bin', 'prune_checkpoint'),
       '--checkpoint', str(tmp_path / 'nope'), '--output_dir',
       str(tmp_path / 'out'), '--sparsity', 'w:0.5'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=300)
  assert result.returncode == 1
  assert result.stderr.decode().splitlines() == [
      'prune_checkpoint: error: --checkpoint %s is neither a folder nor a '
      'checkpoint prefix (no %s.index)' % (tmp_path / 'nope', tmp_path / 'nope')]
  assert os.listdir(str(tmp_path)) == []


def test_other_stack_prunes_this_stacks_checkpoint(trained, tmp_path,
                                                   other_python):
  logdir, _ = trained
  out = str(tmp_path / 'pruned')
  result = _run_cli(other_python, ['--checkpoint', logdir, '--output_dir', out,
                                   '--sparsity', 'conv1/weights$:0.75'])
  assert result.returncode == 0, result.stderr.decode()[-2000:]
  after = _read(tf.train.latest_checkpoint(out))
  assert (after['conv1/mask'] == 0).mean() == 0.75
  with tf.Graph().as_default():
    _build()
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, tf.train.latest_checkpoint(out))
      mask = sess.run(tf1prune.get_masks()[0])
  np.testing.assert_array_equal(mask, after['conv1/mask'])


def _ram_filesystem():
  """A `ram://` folder of tf.io.gfile (TF 2.x), or skip (TF 1.15 has none)."""
  folder = 'ram://prune_checkpoint_%d' % os.getpid()
  try:
    tf.io.gfile.makedirs(folder)
    with tf.io.gfile.GFile(folder + '/probe', 'w') as f:
      f.write('x')
  except (tf.errors.OpError, NotImplementedError):
    pytest.skip('this TensorFlow has no ram:// filesystem to stand in for '
                'gs://')
  return folder


def test_checkpoint_on_another_filesystem_prunes_like_a_local_one(trained,
                                                                  tmp_path):
  # The same prefix resolution as strip_checkpoint (tf.io.gfile), so a
  # checkpoint that only tf.io.gfile can read (gs://, here ram://) prunes.
  logdir, _ = trained
  local_prefix = tf.train.latest_checkpoint(logdir)
  basename = os.path.basename(local_prefix)
  remote = _ram_filesystem() + '/train'
  tf.io.gfile.makedirs(remote)
  for name in os.listdir(logdir):
    if name.startswith(basename + '.'):
      tf.io.gfile.copy(os.path.join(logdir, name), remote + '/' + name)
  with tf.io.gfile.GFile(remote + '/checkpoint', 'w') as f:
    f.write('model_checkpoint_path: "%s"\n' % basename)
  sparsity = {'conv1/weights$': 0.75}
  zero = [('conv2/weights', (0, 0, 3, 1))]
  local = checkpoint_prune.prune_checkpoint(
      logdir, str(tmp_path / 'local'), sparsity, zero)
  for i, source in enumerate([remote, remote + '/' + basename]):
    out = str(tmp_path / ('remote%d' % i))
    report = checkpoint_prune.prune_checkpoint(source, out, sparsity, zero)
    assert report['checkpoint'] == os.path.join(out, basename)
    assert report['weights'] == local['weights']
    assert sorted(os.listdir(out)) == sorted(
        os.listdir(str(tmp_path / 'local')))
    got, want = _read(report['checkpoint']), _read(local['checkpoint'])
    assert sorted(got) == sorted(want)
    for name in want:
      np.testing.assert_array_equal(got[name], want[name])
  with pytest.raises(checkpoint_prune.CheckpointPruneError) as error:
    checkpoint_prune.prune_checkpoint(remote + '/nope', str(tmp_path / 'x'),
                                      sparsity)
  assert str(error.value) == (
      '--checkpoint %s/nope is neither a folder nor a checkpoint prefix (no '
      '%s/nope.index)' % (remote, remote))
