"""Freezing and stripping checkpoints: tf1prune.strip (library API).

Also the other TF stack's half of the cross-version check:
    python -m tests.export.test_strip OURS THEIRS   # from the checkout root
loads and checks each OURS/<model>/out.pb, then trains, checkpoints and strips
every model into THEIRS/<model>/ for this stack to load.
"""

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.export import atomic, attrs, stream
from tests.support.checkout import ROOT
from tests.support.graphs import control_flow, read_graph_def, run_graph_def

_PRUNING_NAME = re.compile(r'(^|/)(mask|threshold)(_\d+)?(/|$)')
_MASKED_WEIGHT = re.compile(r'(^|/)masked_weight(_\d+)?$')


# ------------------------------------------------------------------ models
# Each builds into the default graph; returns (output node name, input value).


def _conv_fc_model():
  x = tf.placeholder(tf.float32, [None, 6, 6, 3], name='x')
  net = tf1prune.masked_conv2d(x, 4, 3, scope='conv1')
  net = tf.reshape(net, [-1, 6 * 6 * 4])
  net = tf1prune.masked_fully_connected(net, 5, activation_fn=None, scope='fc')
  tf.identity(net, name='logits')
  return 'logits', np.random.RandomState(0).randn(2, 6, 6, 3)


def _lstm_model():
  x = tf.placeholder(tf.float32, [2, 5, 3], name='x')
  cell = tf1prune.MaskedBasicLSTMCell(4)
  outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
  tf.identity(outputs, name='y')
  return 'y', np.random.RandomState(1).randn(2, 5, 3)


def _control_flow_model():
  """A masked weight and a bias read inside while_loop and cond bodies."""
  x = tf.placeholder(tf.float32, [None, 6], name='x')
  flag = tf.placeholder_with_default(True, [], name='flag')
  weights = tf.get_variable('fc/weights', [6, 6])
  bias = tf.get_variable('fc/biases', [6],
                         initializer=tf.random_uniform_initializer())
  with tf.variable_scope('fc'):
    masked = tf1prune.apply_mask(weights)

  def body(i, h):
    return i + 1, tf.tanh(tf.matmul(h, masked) + bias)

  _, h = tf.while_loop(lambda i, h: i < 3, body, [0, x])
  y = tf.cond(flag, lambda: h * bias, lambda: h - bias)
  tf.identity(y, name='y')
  return 'y', np.random.RandomState(2).randn(2, 6)


def _embedding_model():
  """Lookups in a masked table, and in a raw one inside a cond branch."""
  ids = tf.placeholder(tf.int32, [None], name='x')
  flag = tf.placeholder_with_default(True, [], name='flag')
  table = tf.get_variable('emb/weights', [10, 4])
  with tf.variable_scope('emb'):
    masked = tf1prune.apply_mask(table)
  raw = tf.get_variable('raw_table', [10, 4])
  looked_up = tf.nn.embedding_lookup(masked, ids)
  extra = tf.cond(flag, lambda: tf.gather(raw, ids),
                  lambda: tf.zeros_like(looked_up))
  tf.add(looked_up, extra, name='y')
  return 'y', np.array([1, 3, 5, 3], np.int32)


def _unmasked_model():
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  weights = tf.get_variable('fc/weights', [3, 2])
  tf.matmul(x, weights, name='y')
  return 'y', np.random.RandomState(3).randn(4, 3)


MODELS = {'conv_fc': _conv_fc_model, 'lstm': _lstm_model,
          'control_flow': _control_flow_model, 'embedding': _embedding_model}


def _train(model, checkpoint_dir, sparsity=0.5):
  """Builds `model`, prunes it, saves a checkpoint; returns (out, x, y)."""
  tf.set_random_seed(7)
  output, x = model()
  if x.dtype.kind == 'f':
    x = x.astype(np.float32)
  global_step = tf.train.get_or_create_global_step()
  ops = []
  if tf1prune.get_masks():
    ops.append(tf1prune.Pruning(sparsity=tf.constant(sparsity))
               .mask_update_op())
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(ops)
    y = sess.run(output + ':0', {'x:0': x})
    saver.save(sess, os.path.join(checkpoint_dir, 'model.ckpt'),
               global_step=global_step)
  return output, x, y


def _all_nodes(graph_def):
  nodes = list(graph_def.node)
  for function in graph_def.library.function:
    nodes.extend(function.node_def)
  return nodes


def _assert_no_pruning_left(graph_def):
  for node in _all_nodes(graph_def):
    assert node.op not in ('VariableV2', 'Variable', 'VarHandleOp',
                           'ReadVariableOp'), node.name
    assert not _PRUNING_NAME.search(node.name), node.name
    assert not (node.op == 'Mul' and _MASKED_WEIGHT.search(node.name)), (
        node.name)
  for function in graph_def.library.function:
    for arg in function.signature.input_arg:
      assert arg.type != tf.resource.as_datatype_enum, (function.signature.name,
                                                        arg.name)


def _folded(graph_def):
  return {n.name: tf.make_ndarray(n.attr['value'].tensor)
          for n in graph_def.node
          if n.op == 'Const' and _MASKED_WEIGHT.search(n.name)}


def _gzip_size(data):
  buf = io.BytesIO()
  with gzip.GzipFile(fileobj=buf, mode='wb', compresslevel=6, mtime=0,
                     filename='') as f:
    f.write(data)
  return len(buf.getvalue())


# ------------------------------------------------------------------- tests


@pytest.mark.parametrize('name', sorted(MODELS))
def test_stripped_graph_computes_the_training_graph_outputs(name, tmp_path):
  output, x, want = _train(MODELS[name], str(tmp_path))
  path = str(tmp_path / 'out.pb')
  report = tf1prune.strip_checkpoint(str(tmp_path), [output], path)
  graph_def = read_graph_def(path)
  _assert_no_pruning_left(graph_def)
  assert len(report.layers) == len(_folded(graph_def)) >= 1
  got = run_graph_def(graph_def, x, output + ':0')
  np.testing.assert_array_equal(got, want)


def test_report_counts_the_zeros_of_the_written_constants(tmp_path):
  output, _, _ = _train(_conv_fc_model, str(tmp_path))
  path = str(tmp_path / 'out.pb')
  report = tf1prune.strip_checkpoint(str(tmp_path), output, path)
  graph_def = read_graph_def(path)
  folded = _folded(graph_def)
  reader = tf.train.load_checkpoint(str(tmp_path))
  assert [l.name for l in report.layers] == ['conv1', 'fc']
  for layer in report.layers:
    mask = reader.get_tensor(layer.name + '/mask')
    weight = reader.get_tensor(layer.name + '/weights')
    np.testing.assert_array_equal(folded[layer.node], weight * mask)
    assert layer.node == layer.name + '/weights/masked_weight'
    assert layer.shape == list(weight.shape)
    assert layer.size == weight.size
    assert layer.nonzeros == np.count_nonzero(folded[layer.node])
    assert layer.sparsity == 1.0 - layer.nonzeros / float(layer.size)
    assert layer.nonzeros == weight.size // 2  # sparsity 0.5, even sizes.
  assert report.total_size == 3 * 3 * 3 * 4 + 144 * 5
  assert report.total_nonzeros == report.total_size // 2
  data = open(path, 'rb').read()
  assert report.file_bytes == len(data)
  assert report.file_bytes_gzip == _gzip_size(data)
  dense = tf.GraphDef()
  dense.CopyFrom(graph_def)
  for node in dense.node:
    if node.name in folded:
      layer = node.name.split('/')[0]
      node.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(
          reader.get_tensor(layer + '/weights')))
  dense_data = dense.SerializeToString(deterministic=True)
  assert report.dense_file_bytes == len(dense_data) == len(data)
  assert report.dense_file_bytes_gzip == _gzip_size(dense_data)
  assert report.dense_file_bytes_gzip > report.file_bytes_gzip
  as_dict = json.loads(json.dumps(report.to_dict()))
  assert as_dict['totals'] == {'size': report.total_size,
                               'nonzeros': report.total_nonzeros,
                               'sparsity': 0.5}
  assert as_dict['layers'][1]['shape'] == [144, 5]
  table = report.format_table()
  assert re.search(r'conv1\s+3x3x3x4\s+108\s+54\s+50\.00%', table), table
  assert re.search(r'fc\s+144x5\s+720\s+360\s+50\.00%', table), table


def test_strip_checkpoint_writes_what_the_library_functions_return(tmp_path):
  output, _, _ = _train(_lstm_model, str(tmp_path))
  path = str(tmp_path / 'out.pb')
  tf1prune.strip_checkpoint(str(tmp_path), [output], path)
  frozen = tf1prune.graph_def_from_checkpoint(str(tmp_path), [output])
  frozen_copy = tf.GraphDef()
  frozen_copy.CopyFrom(frozen)
  stripped = tf1prune.strip_pruning_vars_fn(frozen, [output])
  assert frozen == frozen_copy  # the input is not changed
  assert stripped == read_graph_def(path)


@pytest.mark.parametrize('name', ['conv_fc', 'lstm'])
def test_strip_pruning_vars_fn_on_a_graph_frozen_by_tensorflow(name):
  """The contrib workflow: TF's own convert_variables_to_constants, then us."""
  tf.set_random_seed(7)
  output, x = MODELS[name]()
  x = x.astype(np.float32)
  tf.train.get_or_create_global_step()
  update = tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    want = sess.run(output + ':0', {'x:0': x})
    frozen = tf.graph_util.convert_variables_to_constants(
        sess, sess.graph.as_graph_def(), [output])
  stripped = tf1prune.strip_pruning_vars_fn(frozen, [output])
  _assert_no_pruning_left(stripped)
  assert len(_folded(stripped)) == (1 if name == 'lstm' else 2)
  got = run_graph_def(stripped, x, output + ':0')
  np.testing.assert_array_equal(got, want)


def test_graph_def_from_checkpoint_holds_checkpoint_values(tmp_path):
  output, x, want = _train(_conv_fc_model, str(tmp_path))
  frozen = tf1prune.graph_def_from_checkpoint(str(tmp_path), output + ':0')
  consts = {n.name: n for n in frozen.node if n.op == 'Const'}
  reader = tf.train.load_checkpoint(str(tmp_path))
  for name in ('conv1/weights', 'conv1/mask', 'fc/weights', 'fc/mask',
               'fc/biases'):
    np.testing.assert_array_equal(
        tf.make_ndarray(consts[name].attr['value'].tensor),
        reader.get_tensor(name))
  assert not [n for n in frozen.node if 'Variable' in n.op or n.device]
  assert 'conv1/threshold' not in consts  # the outputs do not need it
  got = run_graph_def(frozen, x, output + ':0')
  np.testing.assert_array_equal(got, want)


def test_scalar_variables_on_the_output_path_stay_scalars(tmp_path):
  w = tf.get_variable('w', initializer=np.arange(9.0, dtype=np.float32).reshape(3, 3))
  scale = tf.get_variable('scale', initializer=np.float32(2.0))
  x = tf.placeholder(tf.float32, [1, 3], name='x')
  y = tf.identity(tf.matmul(x, tf1prune.apply_mask(w, 'fc')) * scale, name='y')
  feed = np.ones((1, 3), np.float32)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    want = sess.run(y, {x: feed})
    tf.train.Saver().save(sess, str(tmp_path / 'model.ckpt'))
  path = str(tmp_path / 'out.pb')
  tf1prune.strip_checkpoint(str(tmp_path), ['y'], path)
  graph_def = read_graph_def(path)
  consts = {n.name: n for n in graph_def.node if n.op == 'Const'}
  assert tf.make_ndarray(consts['scale'].attr['value'].tensor).shape == ()
  np.testing.assert_array_equal(run_graph_def(graph_def, feed), want)


def test_attributes_at_their_default_are_not_written(tmp_path):
  output, _, _ = _train(_control_flow_model, str(tmp_path))
  path = str(tmp_path / 'out.pb')
  tf1prune.strip_checkpoint(str(tmp_path), [output], path)
  graph_def = read_graph_def(path)
  defs = attrs.op_defs(graph_def)
  for node in _all_nodes(graph_def):
    for attr in defs[node.op].attr if node.op in defs else ():
      if attr.HasField('default_value') and attr.name in node.attr:
        assert node.attr[attr.name] != attr.default_value, (node.name,
                                                            attr.name)
    assert not (node.op == 'MatMul' and ('grad_a' in node.attr or
                                         'transpose_a' in node.attr))
  assert 'MatMul' in [n.op for n in _all_nodes(graph_def)]


def test_masked_weights_of_a_partitioned_variable_and_renamed_keys(tmp_path):
  x = tf.placeholder(tf.float32, [None, 6], name='x')
  weights = tf.get_variable('fc/weights', [6, 4],
                            partitioner=tf.fixed_size_partitioner(2))
  with tf.variable_scope('fc'):
    masked = tf1prune.apply_mask(weights)
  y = tf.matmul(x, masked, name='y')
  tf.train.get_or_create_global_step()
  update = tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
  saver = tf.train.Saver({'renamed/weights': weights,
                          'renamed/mask': tf1prune.get_masks()[0]})
  x_value = np.random.RandomState(4).randn(3, 6).astype(np.float32)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    want = sess.run(y, {x: x_value})
    saver.save(sess, str(tmp_path / 'model.ckpt'))
  path = str(tmp_path / 'out.pb')
  report = tf1prune.strip_checkpoint(str(tmp_path), ['y'], path)
  graph_def = read_graph_def(path)
  assert sorted(n.op for n in graph_def.node) == ['Const', 'MatMul',
                                                  'Placeholder']
  assert [(l.name, l.size, l.nonzeros) for l in report.layers] == [
      ('fc', 24, 12)]
  np.testing.assert_array_equal(run_graph_def(graph_def, x_value, 'y:0'), want)


def test_monitored_training_session_checkpoint_suffices(tmp_path):
  output, x = _conv_fc_model()
  x = x.astype(np.float32)
  loss = tf.reduce_mean(tf.square(tf.get_default_graph().get_tensor_by_name(
      output + ':0')))
  global_step = tf.train.get_or_create_global_step()
  train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=global_step)
  pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.75,sparsity_function_end_step=2,pruning_frequency=1'))
  saver = tf.train.Saver()
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
      save_summaries_steps=None, hooks=[tf1prune.PruningHook(pruning)]) as sess:
    for _ in range(4):
      sess.run(train_op, {'x:0': x})
  with tf.Session() as sess:
    saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
    want = sess.run(output + ':0', {'x:0': x})
  out_dir = tmp_path / 'export'
  out_dir.mkdir()
  report = tf1prune.strip_checkpoint(str(tmp_path), [output],
                                     str(out_dir / 'm.pb'))
  assert report.checkpoint.endswith('model.ckpt-4')
  assert abs(report.total_sparsity - 0.75) < 0.01
  graph_def = read_graph_def(str(out_dir / 'm.pb'))
  _assert_no_pruning_left(graph_def)
  got = run_graph_def(graph_def, x, output + ':0')
  np.testing.assert_array_equal(got, want)


def test_no_masks_raises_unless_allowed(tmp_path):
  output, x, want = _train(_unmasked_model, str(tmp_path))
  path = str(tmp_path / 'out.pb')
  with pytest.raises(ValueError, match='no masked weights.*allow_no_masks'):
    tf1prune.strip_checkpoint(str(tmp_path), [output], path)
  assert not os.path.exists(path)
  report = tf1prune.strip_checkpoint(str(tmp_path), [output], path,
                                     allow_no_masks=True)
  assert report.layers == [] and report.total_sparsity == 0.0
  assert report.dense_file_bytes == report.file_bytes
  got = run_graph_def(read_graph_def(path), x, output + ':0')
  np.testing.assert_array_equal(got, want)


def _hashes(directory):
  return {name: hashlib.sha256(open(os.path.join(directory, name), 'rb')
                               .read()).hexdigest()
          for name in sorted(os.listdir(directory))}


def test_bad_input_raises_and_writes_nothing(tmp_path):
  ckpt = tmp_path / 'ckpt'
  ckpt.mkdir()
  output, _, _ = _train(_conv_fc_model, str(ckpt))
  before = _hashes(str(ckpt))
  out = tmp_path / 'out'
  out.mkdir()
  path = str(out / 'm.pb')
  with pytest.raises(ValueError, match="'logits_typo', 'nope' not found"):
    tf1prune.strip_checkpoint(str(ckpt), 'logits_typo,nope', path)
  with pytest.raises(ValueError, match='does not exist'):
    tf1prune.strip_checkpoint(str(tmp_path / 'missing'), [output], path)
  with pytest.raises(ValueError, match='holds no checkpoint'):
    tf1prune.strip_checkpoint(str(out), [output], path)
  with pytest.raises(ValueError, match='output_node_names is empty'):
    tf1prune.strip_checkpoint(str(ckpt), ' , ', path)
  with pytest.raises(ValueError, match='does not exist; create it'):
    tf1prune.strip_checkpoint(str(ckpt), [output], str(out / 'no' / 'm.pb'))
  assert os.listdir(str(out)) == []
  tf1prune.strip_checkpoint(str(ckpt), [output], path)
  assert os.listdir(str(out)) == ['m.pb']
  assert _hashes(str(ckpt)) == before  # the checkpoint is only read


@pytest.fixture
def v1_control_flow():
  """TF1's while loops (Enter/Exit nodes) for one test, also on TF 2.x."""
  with control_flow(v2=False):
    yield


def test_masked_weight_multiplied_inside_a_v1_while_loop(tmp_path,
                                                        v1_control_flow):
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  weights = tf.get_variable('fc/weights', [3, 3])
  with tf.variable_scope('fc'):
    tf1prune.apply_mask(weights)  # creates fc/mask
  mask = tf1prune.get_masks()[0]

  def body(i, h):
    with tf.name_scope('fc'):
      masked = tf.multiply(mask, weights, name='weights/masked_weight')
    return i + 1, tf.tanh(tf.matmul(h, masked))

  _, y = tf.while_loop(lambda i, h: i < 2, body, [0, x])
  tf.identity(y, name='y')
  tf.train.get_or_create_global_step()
  update = tf1prune.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
  x_value = np.random.RandomState(5).randn(2, 3).astype(np.float32)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(update)
    want = sess.run('y:0', {x: x_value})
    tf.train.Saver().save(sess, str(tmp_path / 'model.ckpt'))
  path = str(tmp_path / 'out.pb')
  report = tf1prune.strip_checkpoint(str(tmp_path), ['y'], path)
  graph_def = read_graph_def(path)
  _assert_no_pruning_left(graph_def)
  inner = [n for n in graph_def.node
           if n.name == 'while/fc/weights/masked_weight']
  assert [n.op for n in inner] == ['Enter']  # fed by a constant outside
  assert [(l.name, l.size, l.nonzeros) for l in report.layers] == [
      ('fc', 9, 5)]
  np.testing.assert_array_equal(run_graph_def(graph_def, x_value, 'y:0'), want)


def test_checkpoint_without_meta_graph_or_variable_is_refused(tmp_path):
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  weights = tf.get_variable('fc/weights', [3, 2])
  with tf.variable_scope('fc'):
    masked = tf1prune.apply_mask(weights)
  tf.matmul(x, masked, name='y')
  partial = tmp_path / 'partial'
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    tf.train.Saver([weights]).save(sess, str(partial / 'model.ckpt'))
    prefix = tf.train.Saver().save(sess, str(tmp_path / 'model.ckpt'))
  os.remove(prefix + '.meta')
  with pytest.raises(ValueError, match='has no meta graph'):
    tf1prune.strip_checkpoint(str(tmp_path), ['y'], str(tmp_path / 'o.pb'))
  with pytest.raises(ValueError, match="variable 'fc/mask' .* is not in the "
                     'checkpoint'):
    tf1prune.strip_checkpoint(str(partial), ['y'], str(tmp_path / 'o.pb'))
  assert not os.path.exists(str(tmp_path / 'o.pb'))


def test_strip_pruning_vars_fn_needs_a_frozen_graph():
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  weights = tf.get_variable('fc/weights', [3, 2])
  with tf.variable_scope('fc'):
    masked = tf1prune.apply_mask(weights)
  tf.matmul(x, masked, name='y')
  graph_def = tf.get_default_graph().as_graph_def()
  with pytest.raises(ValueError, match="cannot fold masked weight "
                     "'fc/weights/masked_weight'.*freeze the graph first"):
    tf1prune.strip_pruning_vars_fn(graph_def, ['y'])
  with pytest.raises(ValueError, match="output node 'z' not found in "
                     'input_graph_def'):
    tf1prune.strip_pruning_vars_fn(graph_def, ['z'])


def test_write_atomically_keeps_the_old_file_when_writing_fails(tmp_path):
  path = str(tmp_path / 'm.pb')
  with open(path, 'wb') as f:
    f.write(b'old')
  with pytest.raises(RuntimeError):
    with atomic.write_atomically(path) as f:
      f.write(b'partial')
      raise RuntimeError('disk full')
  assert os.listdir(str(tmp_path)) == ['m.pb']
  assert open(path, 'rb').read() == b'old'
  with atomic.write_atomically(path) as f:
    f.write(b'new')
  assert open(path, 'rb').read() == b'new'
  assert os.listdir(str(tmp_path)) == ['m.pb']


@pytest.mark.parametrize('value', [
    np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5,
    np.array(3, np.int32),
    np.zeros([0, 2], np.float64),
    np.array([[True, False]]),
    np.arange(6, dtype=np.float16).reshape(2, 3, 1),
    np.array([b'a', b'bc']),
], ids=['float32', 'scalar', 'empty', 'bool', 'float16', 'string'])
def test_streamed_constant_bytes_equal_protobuf_serialization(value):
  node = tf.NodeDef(name='scope/w', op='Const')
  node.attr['dtype'].type = tf.as_dtype(value.dtype).as_datatype_enum
  node.attr['_class'].list.s.append(b'loc:@scope/w')
  full = tf.NodeDef()
  full.CopyFrom(node)
  full.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(value))
  chunks = stream.const_node_chunks(node, value)
  streamed = b''.join(bytes(c) for c in chunks)
  parsed = tf.GraphDef()
  parsed.ParseFromString(streamed)
  np.testing.assert_array_equal(
      tf.make_ndarray(parsed.node[0].attr['value'].tensor), value)
  canonical = tf.GraphDef()
  canonical.node.add().CopyFrom(parsed.node[0])
  assert streamed == canonical.SerializeToString(deterministic=True)
  if value.dtype.kind != 'S' and value.size:
    assert len(chunks) == 2 and chunks[1].nbytes == value.nbytes


# ---------------------------------------------------- across TF versions


def write_models(directory):
  """Trains, checkpoints and strips every model under `directory`/<name>."""
  for name, model in sorted(MODELS.items()):
    model_dir = os.path.join(directory, name)
    os.makedirs(model_dir)
    with tf.Graph().as_default():
      output, x, want = _train(model, model_dir)
      tf1prune.strip_checkpoint(model_dir, [output],
                                os.path.join(model_dir, 'out.pb'))
    np.save(os.path.join(model_dir, 'x.npy'), x)
    np.save(os.path.join(model_dir, 'want.npy'), want)
    with open(os.path.join(model_dir, 'output.json'), 'w') as f:
      json.dump({'output': output, 'tensorflow': tf.__version__}, f)


def load_models(directory):
  """Returns {name: (max abs difference, writer's TF)} for `directory`/*."""
  results = {}
  for name in sorted(os.listdir(directory)):
    model_dir = os.path.join(directory, name)
    with open(os.path.join(model_dir, 'output.json')) as f:
      meta = json.load(f)
    got = run_graph_def(read_graph_def(os.path.join(model_dir, 'out.pb')),
                        np.load(os.path.join(model_dir, 'x.npy')),
                        meta['output'] + ':0')
    want = np.load(os.path.join(model_dir, 'want.npy'))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    results[name] = (float(np.abs(got - want).max()), meta['tensorflow'])
  return results


def test_pb_files_load_and_run_across_tensorflow_versions(tmp_path,
                                                          other_python):
  """Ours run there and theirs run here (one subprocess does both)."""
  ours, theirs = str(tmp_path / 'ours'), str(tmp_path / 'theirs')
  os.makedirs(ours)
  os.makedirs(theirs)
  write_models(ours)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run(
      [other_python, '-m', 'tests.export.test_strip', ours, theirs],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
      timeout=600)
  assert proc.returncode == 0, proc.stderr.decode()[-3000:]
  loaded_there = json.loads(proc.stdout.decode().strip().splitlines()[-1])
  assert sorted(loaded_there) == sorted(MODELS)
  assert all(writer == tf.__version__ for _, writer in loaded_there.values())
  loaded_here = load_models(theirs)
  assert sorted(loaded_here) == sorted(MODELS)
  assert all(writer != tf.__version__ for _, writer in loaded_here.values())


def _main(argv):
  """Loads (and checks) the models in argv[1], writes new ones to argv[2]."""
  tf.disable_eager_execution()
  results = load_models(argv[1])
  write_models(argv[2])
  print(json.dumps(results))


if __name__ == '__main__':
  _main(sys.argv)
