"""Border maps: what removed channels give a conv's output where padding
makes it vary, added with the conv's bias as one constant (`border_maps`)."""

import os
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune import deploy
from tf1prune.export import graph_io
from tf1prune.export.shrink.rounds import shrink_graph_def
from tests.support.graphs import consts as _consts, run_graph_def


def _masked(name, shape, empty, initializer):
  """A TF-initialized weight whose output channels `empty` are zeroed by a
  constant mask (frozen: the shrink's preparation multiplies it out)."""
  weight = tf.get_variable(name, shape, initializer=initializer)
  mask = np.ones(shape, np.float32)
  mask[..., list(empty)] = 0.0
  return weight * mask


def _block(size=8, stride=1, pointwise_bias=True, batch=None, empty=(1, 4, 6),
           explicit_pool=False):
  """conv1 3x3 -> bias -> relu6 -> depthwise 3x3 SAME (`stride`) -> bias ->
  relu6 -> pointwise 1x1 conv (maybe with a bias) -> relu6 -> y, frozen.

  conv1's filters `empty` are zero: their channels are relu6(bias) before
  the depthwise conv and a map after it. `explicit_pool`: a 3x3 stride-2
  max pool with explicit padding after the depthwise block. Returns
  (graph_def, feed)."""
  init = tf.glorot_uniform_initializer(seed=3)
  bias = tf.random_uniform_initializer(0.1, 0.9, seed=4)
  x = tf.placeholder(tf.float32, [batch, size, size, 3], name='x')
  h = tf.nn.conv2d(x, _masked('w1', [3, 3, 3, 8], empty, init), [1] * 4,
                   'SAME', name='conv1')
  h = tf.nn.relu6(tf.nn.bias_add(h, tf.get_variable('b1', [8],
                                                    initializer=bias)))
  h = tf.nn.depthwise_conv2d(h, tf.get_variable('dw', [3, 3, 8, 1],
                                                initializer=init),
                             [1, stride, stride, 1], 'SAME', name='depthwise')
  h = tf.nn.relu6(tf.nn.bias_add(h, tf.get_variable('b2', [8],
                                                    initializer=bias)))
  if explicit_pool:
    h = tf.nn.max_pool2d(h, 3, 2, [[0, 0], [1, 1], [1, 1], [0, 0]])
  h = tf.nn.conv2d(h, tf.get_variable('w3', [1, 1, 8, 12], initializer=init),
                   [1] * 4, 'VALID', name='pointwise')
  if pointwise_bias:
    h = tf.nn.bias_add(h, tf.get_variable('b3', [12], initializer=bias))
  tf.nn.relu6(h, name='y')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    frozen = tf.graph_util.convert_variables_to_constants(
        sess, tf.get_default_graph().as_graph_def(), ['y'])
  feed = np.random.RandomState(0).uniform(
      -1, 1, [batch or 2, size, size, 3]).astype(np.float32)
  return frozen, feed


def _same_outputs(graph_def, small, feed):
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())


def _layer(report, prefix):
  found, = [l for l in report.layers if l.name.startswith(prefix)]
  return found


def test_a_depthwise_block_gets_one_map_with_the_pointwise_bias():
  graph_def, feed = _block()
  small, report = shrink_graph_def(graph_def, ['y'])
  _same_outputs(graph_def, small, feed)
  assert report.stops == []
  pointwise = _layer(report, 'pointwise')
  assert (pointwise.inputs_before, pointwise.inputs_after) == (8, 5)
  # No extra input channel: the FLOPs are the kept channels' only; the map
  # (8 x 8 positions x 12 outputs) takes the bias's place in the parameters.
  assert pointwise.flops_after == 2 * 8 * 8 * 5 * 12
  assert pointwise.params_after == 5 * 12 + 8 * 8 * 12
  ops = {n.name: n.op for n in small.node}
  assert not [n for n in ops if 'shrink_ones' in n]
  maps = [n for n in ops if n.endswith('/shrink_map/value')]
  assert len(maps) == 1 and _consts(small)[maps[0]].shape == (1, 1, 64, 12)
  # The map is a bias add: the Add reads the pointwise conv through a
  # Reshape (TOCO folds an Add straight after a conv into its [C] bias).
  base = maps[0][:-len('/value')]
  add, = [n for n in small.node if n.name == base + '/add']
  flat, = [n for n in small.node if n.name == add.input[0]]
  assert flat.op == 'Reshape' and flat.input[0].startswith('pointwise')
  assert ops[[n for n in small.node if n.name == 'y'][0].input[0]] == \
      'Reshape'


def test_any_batch_size_a_stride_2_block_and_a_conv_without_bias():
  graph_def, _ = _block(size=9, stride=2, pointwise_bias=False)
  small, report = shrink_graph_def(graph_def, ['y'])
  for batch in (1, 3):
    feed = np.random.RandomState(batch).uniform(
        -1, 1, [batch, 9, 9, 3]).astype(np.float32)
    _same_outputs(graph_def, small, feed)
  assert report.stops == []
  assert _layer(report, 'pointwise').flops_after == 2 * 5 * 5 * 5 * 12
  ops = {n.name: n.op for n in small.node}
  # No bias to merge with: the map has its own Add, after the conv.
  assert ops['pointwise/shrink_map'] == 'Reshape'
  assert _consts(small)['pointwise/shrink_map/value'].shape == (1, 1, 25, 12)


@pytest.mark.skipif(tf.__version__.startswith('1.'),
                    reason='MaxPool has explicit padding from TF 2.x')
def test_a_map_goes_through_a_max_pool_with_explicit_padding():
  graph_def, feed = _block(explicit_pool=True)
  small, report = shrink_graph_def(graph_def, ['y'])
  _same_outputs(graph_def, small, feed)
  assert report.stops == []
  assert _layer(report, 'pointwise').inputs_after == 5


def test_a_filter_that_only_read_removed_channels_goes_next_round():
  graph_def, feed = _block()
  weights = {n.name: n for n in graph_def.node if n.name == 'w3'}
  w3 = tf.make_ndarray(weights['w3'].attr['value'].tensor).copy()
  keep = [c for c in range(8) if c not in (1, 4, 6)]
  w3[:, :, keep, 5] = 0.0      # output 5 reads only the removed inputs
  weights['w3'].attr['value'].tensor.CopyFrom(tf.make_tensor_proto(w3))
  with tf.Graph().as_default():
    tf.import_graph_def(graph_def, name='')
    y = tf.get_default_graph().get_tensor_by_name('y:0')
    tf.identity(tf.nn.conv2d(y, tf.constant(np.random.RandomState(5).randn(
        3, 3, 12, 4).astype(np.float32)), [1] * 4, 'SAME'), name='z')
    graph_def = tf.get_default_graph().as_graph_def()
  small, report = shrink_graph_def(graph_def, ['z'])
  expected = run_graph_def(graph_def, feed, 'z:0')
  np.testing.assert_allclose(run_graph_def(small, feed, 'z:0'), expected,
                             rtol=0, atol=1e-5 * np.abs(expected).max())
  assert report.stops == []
  # Output 5 was a map (bias + what the removed inputs gave): removed, and
  # the next conv gets what it gave as a map of its own.
  assert _layer(report, 'pointwise').outputs_after == 11
  assert len([n for n in small.node if n.name.endswith('/shrink_map/add')]) \
      == 2


def test_a_shrunk_graph_shrinks_again_to_itself():
  graph_def, feed = _block()
  small, _ = shrink_graph_def(graph_def, ['y'])
  again, report = shrink_graph_def(small, ['y'])
  _same_outputs(graph_def, again, feed)
  assert report.flops_after == report.flops_before
  assert report.stops == []


def test_params_objective_keeps_the_extra_channels():
  graph_def, feed = _block()
  small, report = shrink_graph_def(graph_def, ['y'], objective='params')
  _same_outputs(graph_def, small, feed)
  ops = [n.name for n in small.node]
  assert not [n for n in ops if 'shrink_map' in n]


# One const and the table form; batch size 1 too, where TOCO once moved the
# Add in front of the conv's Reshape and aborted (`Dimensions must match`).
@pytest.mark.parametrize('size, batch', [(8, 2), (8, 1), (24, 1)])
def test_every_consumer_of_both_stacks_computes_the_map_exactly(
    tmp_path, other_python, size, batch):
  """TF 1.15's TFLite converter (TOCO) included, on a graph shrunk here (of
  any batch size), converted at `batch`."""
  graph_def, _ = _block(size=size)
  small, _ = shrink_graph_def(graph_def, ['y'])
  assert any(n.name.endswith('/shrink_map/table') for n in small.node) == (
      size == 24)
  graph_io.strip_default_attrs(small, graph_io.op_defs(small))
  path = os.path.join(str(tmp_path), 'block.pb')
  with open(path, 'wb') as f:
    f.write(small.SerializeToString())
  _same_outputs(graph_def, small, np.random.RandomState(0).uniform(
      -1, 1, [batch, size, size, 3]).astype(np.float32))
  cells = deploy.check_deploy([sys.executable, other_python],
                              str(tmp_path), pb=path,
                              inputs=[['x', [batch, size, size, 3]]],
                              outputs=['y'])
  consumers = sorted(c.consumer for c in cells)
  assert [c for c in consumers if c.startswith('tflite @ TF 1.15')], consumers
  bad = [(c.consumer, c.text()) for c in cells if c.status != 'ok']
  assert not bad, bad


def test_a_large_map_is_stored_as_its_table_of_distinct_rows_and_columns():
  from tf1prune.export.shrink.border_maps import COMPACT_FROM, compact
  graph_def, feed = _block(size=24)           # 24 x 24 x 12 = 6912 entries
  assert 24 * 24 * 12 >= COMPACT_FROM
  small, report = shrink_graph_def(graph_def, ['y'])
  _same_outputs(graph_def, small, feed)
  assert report.stops == []
  consts = _consts(small)
  base, = [n[:-len('/table')] for n in consts
           if n.endswith('/shrink_map/table')]
  table = consts[base + '/table']
  rows, cols = consts[base + '/row_index'], consts[base + '/col_index']
  # Top, interior and bottom rows; left, interior and right columns.
  assert table.shape == (3, 3, 12)
  assert len(set(rows.tolist())) == 3 and rows[0] != rows[1] != rows[-1]
  assert len(set(cols.tolist())) == 3 and cols[0] != cols[1] != cols[-1]
  assert rows.shape == (24,) and cols.shape == (24,)
  ops = {n.name: n.op for n in small.node}
  assert ops[base + '/value'] == 'Reshape'
  assert ops[base + '/full'] == 'GatherV2'
  # The report counts the table (with the bias in it), not the 24 x 24 map.
  assert _layer(report, 'pointwise').params_after == 5 * 12 + 3 * 3 * 12
  # compact: table[rows][:, cols] is the map, exactly.
  value = np.random.RandomState(0).uniform(size=[3, 3, 2])[
      [0, 1, 1, 2]][:, [0, 1, 1, 1, 2]]
  table, rows, cols = compact(value)
  assert table.shape == (3, 3, 2)
  np.testing.assert_array_equal(table[rows][:, cols], value)
