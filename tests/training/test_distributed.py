"""Multi-machine training: between-graph replication with `tf.train.Server`
processes on 127.0.0.1 (two parameter servers, two workers, partitioned
weights), and in-graph replication over two CPU devices.

The cluster runs tests/support/dist_worker.py in child processes, bounded by
timeouts and always killed in the end.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import np_reference
from tests.support.graphs import read_graph_def, run_graph_def
from tests.support.checkout import ROOT, SUPPORT

WORKER = os.path.join(SUPPORT, 'dist_worker.py')
TIMEOUT = 300  # seconds for the whole run; it takes a few alone.
PRUNING_FREQUENCY = 5
TARGET = 0.75  # reached at step 20 (see dist_worker.HPARAMS)


def _free_ports(n):
  sockets = []
  try:
    for _ in range(n):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind(('127.0.0.1', 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


@pytest.fixture(scope='module')
def cluster_run(tmp_path_factory):
  """Runs one parameter-server process (2 ps tasks) and two workers."""
  root = str(tmp_path_factory.mktemp('cluster'))
  ports = _free_ports(4)
  cluster = {'ps': ['127.0.0.1:%d' % p for p in ports[:2]],
             'worker': ['127.0.0.1:%d' % p for p in ports[2:]]}
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
             PYTHONPATH=os.pathsep.join([ROOT,
                                         os.environ.get('PYTHONPATH', '')]))
  logdir = os.path.join(root, 'train')
  os.makedirs(logdir)
  procs, logs = [], []

  def launch(name, *args):
    path = os.path.join(root, name + '.log')
    with open(path, 'wb') as log:
      procs.append(subprocess.Popen(
          [sys.executable, WORKER, '--cluster=' + json.dumps(cluster)] +
          list(args), env=env, stdout=log, stderr=subprocess.STDOUT))
    logs.append(path)
    return procs[-1]

  def tail(path):
    with open(path) as f:
      return '%s:\n%s' % (path, f.read()[-2000:])

  try:
    launch('ps', '--job=ps', '--task=-1')
    workers = [launch('worker%d' % i, '--job=worker', '--task=%d' % i,
                      '--logdir=' + logdir,
                      '--report=' + os.path.join(root, 'worker%d.json' % i))
               for i in range(2)]
    for worker in workers:
      try:
        code = worker.wait(timeout=TIMEOUT)
      except subprocess.TimeoutExpired:
        pytest.fail('worker timed out\n' + '\n'.join(tail(p) for p in logs))
      assert code == 0, '\n'.join(tail(p) for p in logs)
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  reports = []
  for i in range(2):
    with open(os.path.join(root, 'worker%d.json' % i)) as f:
      reports.append(json.load(f))
  return {'root': root, 'logdir': logdir, 'reports': reports}


def test_masks_and_thresholds_live_on_their_weights_parameter_server(
    cluster_run):
  for report in cluster_run['reports']:
    devices = report['devices']
    # The partitioned weight spans both parameter servers.
    assert {devices['fc1/weights/part_0'], devices['fc1/weights/part_1']} == {
        '/job:ps/task:0', '/job:ps/task:1'}
    for layer, home in (('fc1', 'fc1/weights/part_0'), ('fc2', 'fc2/weights')):
      assert devices[layer + '/mask'] == devices[home], layer
      assert devices[layer + '/threshold'] == devices[home], layer
    for name, device in devices.items():
      assert device.startswith('/job:ps/task:'), (name, device)


def test_only_the_chief_updates_masks_once_per_pruning_step(cluster_run):
  chief, other = cluster_run['reports']
  # Both workers trained (the global step is shared), the chief to the end.
  assert chief['final_step'] == 60
  assert 40 <= other['final_step'] < 60
  seen = chief['seen']
  # last_mask_update_step as the chief saw it after each of its runs: every
  # change is one update, at least pruning_frequency steps after the last.
  assert len(seen) >= 4
  assert all(b - a >= PRUNING_FREQUENCY for a, b in zip(seen, seen[1:]))
  assert seen[-1] >= 60 - PRUNING_FREQUENCY - 1
  # The non-chief saw the initial value and the chief's updates, never
  # values of its own. (The chief may miss the initial 0 if the non-chief ran
  # the first steps.)
  assert set(other['seen']) <= set(seen) | {0}


def _checkpoint(logdir):
  reader = tf.train.load_checkpoint(logdir)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def test_the_run_reaches_the_target_sparsity_exactly(cluster_run):
  values = _checkpoint(cluster_run['logdir'])
  assert values['global_step'] == 60
  assert values['model_pruning/last_mask_update_step'] >= 20
  for layer, size in (('fc1', 20 * 32), ('fc2', 32 * 10)):
    mask = values[layer + '/mask']
    assert mask.sum() == np_reference.keep_count(size, TARGET), layer
    # The mask keeps the largest magnitudes of the weight it was computed
    # from; training moved the weight since, so check the kept count only,
    # and that the threshold is the one of a real update.
    assert values[layer + '/threshold'] > 0.0


def test_the_checkpoint_strips_and_computes_the_training_graph(cluster_run):
  values = _checkpoint(cluster_run['logdir'])
  output = os.path.join(cluster_run['root'], 'stripped.pb')
  if hasattr(tf1prune, 'strip_checkpoint'):
    tf1prune.strip_checkpoint(cluster_run['logdir'], ['logits'], output)
    graph_def = read_graph_def(output)
  else:
    graph_def = tf1prune.strip_pruning_vars_fn(
        tf1prune.graph_def_from_checkpoint(cluster_run['logdir'], ['logits']),
        ['logits'])
  ops = {node.op for node in graph_def.node}
  assert not ops & {'VariableV2', 'VarHandleOp', 'ReadVariableOp'}
  assert not [n.name for n in graph_def.node
              if n.name.endswith(('/mask', '/threshold'))]
  x = np.random.RandomState(1).randn(5, 20).astype(np.float32)
  got = run_graph_def(graph_def, {'input:0': x}, 'logits:0')
  hidden = np.maximum(
      x.dot(values['fc1/weights'] * values['fc1/mask']) + values['fc1/biases'],
      0.0)
  expected = (hidden.dot(values['fc2/weights'] * values['fc2/mask']) +
              values['fc2/biases'])
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------- in-graph replication


def _source_variable(tensor):
  """The name of the variable op that `tensor` reads (through reads)."""
  op = tensor.op
  while op.type in ('Identity', 'ReadVariableOp'):
    op = op.inputs[0].op
  return op.name


def test_in_graph_towers_on_two_cpus_share_one_mask_per_weight():
  rs = np.random.RandomState(0)
  data = rs.randn(2, 8, 6).astype(np.float32)  # one batch per tower
  step = tf.train.get_or_create_global_step()
  optimizer = tf.train.GradientDescentOptimizer(0.1)
  tower_grads, outputs, masked = [], [], []
  for tower in range(2):
    with tf.device('/cpu:%d' % tower), \
         tf.variable_scope('model', reuse=tower > 0):
      w = tf.get_variable('fc/weights', initializer=tf.constant(
          rs.randn(6, 4).astype(np.float32)) if tower == 0 else None)
      with tf.variable_scope('fc'):
        kernel = tf1prune.apply_mask(w)
      out = tf.matmul(tf.constant(data[tower]), kernel)
      outputs.append(out)
      masked.append(kernel)
      tower_grads.append(optimizer.compute_gradients(tf.reduce_sum(out ** 2)))
  grads = [(tf.add_n([g0, g1]) / 2.0, v)
           for (g0, v), (g1, _) in zip(*tower_grads)]
  train_op = optimizer.apply_gradients(grads, global_step=step)
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=1,pruning_frequency=1'))
  update = p.conditional_mask_update_op()

  mask, = tf1prune.get_masks()  # one mask for the weight of both towers
  assert len(tf1prune.get_thresholds()) == 1
  assert mask.device == w.device == '/device:CPU:0'
  for kernel in masked:
    assert _source_variable(kernel.op.inputs[0]) == mask.op.name
  config = tf.ConfigProto(device_count={'CPU': 2}, allow_soft_placement=False,
                          intra_op_parallelism_threads=1,
                          inter_op_parallelism_threads=2)
  with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(3):
      sess.run(train_op)
      sess.run(update)
    metadata = tf.RunMetadata()
    outs, m, weights = sess.run(
        [outputs, mask, w], options=tf.RunOptions(
            trace_level=tf.RunOptions.FULL_TRACE), run_metadata=metadata)
  devices = {d.device for d in metadata.step_stats.dev_stats}
  assert any(d.endswith('CPU:1') for d in devices), devices
  np.testing.assert_array_equal(
      m, np_reference.magnitude_mask(np.abs(weights), 0.5))
  for tower in range(2):
    np.testing.assert_allclose(outs[tower], data[tower].dot(weights * m),
                               rtol=1e-6)


def test_a_checkpoint_whose_output_reads_the_global_step_strips(tmp_path):
  step = tf.train.get_or_create_global_step()
  w = tf.get_variable('fc/weights', initializer=tf.constant(
      np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2)))
  with tf.variable_scope('fc'):
    kernel = tf1prune.apply_mask(w)
  tf.identity(tf.matmul(tf.ones([1, 3]), kernel) * tf.cast(step, tf.float32),
              name='out')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 3))
    tf.train.Saver().save(sess, str(tmp_path / 'model.ckpt'), global_step=3)
  tf1prune.strip_checkpoint(str(tmp_path), ['out'], str(tmp_path / 'out.pb'))
  graph_def = read_graph_def(str(tmp_path / 'out.pb'))
  np.testing.assert_array_equal(run_graph_def(graph_def, None, 'out:0'),
                                [[27.0, 36.0]])
