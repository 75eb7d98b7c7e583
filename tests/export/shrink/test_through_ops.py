"""shrink_graph_def through batch norm, residual adds, concat, depthwise, Pad."""

import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink.rounds import shrink_graph_def
from tf1prune.export.shrink.prepare import fold_constants
from tests.support.graphs import const as _const, run_graph_def, run_in_process




def _shrink_same_outputs(feed, **kwargs):
  """Shrinks the default graph; checks y to rtol 1e-5 of max|y|."""
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = shrink_graph_def(graph_def, ['y'], **kwargs)
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  return small, report


def _layer(report, name):
  found = [l for l in report.layers if l.name == name]
  assert len(found) == 1, [l.name for l in report.layers]
  return found[0]


def _weights(rs, shape, zero=()):
  w = rs.randn(*shape).astype(np.float32)
  w[..., list(zero)] = 0.0
  return w


def _bn_stats(rs, channels):
  return (rs.uniform(0.5, 1.5, channels), rs.randn(channels),
          rs.randn(channels), rs.uniform(0.5, 2.0, channels))


def _conv(x, w, name, padding='SAME', stride=1):
  return tf.nn.conv2d(x, _const(w), [1, stride, stride, 1], padding, name=name)


def _fused_bn(h, rs):
  gamma, beta, mean, var = _bn_stats(rs, h.shape[-1])
  out, _, _ = tf.nn.fused_batch_norm(h, _const(gamma), _const(beta),
                                     _const(mean), _const(var), epsilon=1e-3,
                                     is_training=False)
  return out


def _conv_flops(h, w, k, cin, cout):
  return 2 * h * w * k * k * cin * cout


def test_conv_fused_batch_norm_folds_and_its_empty_filters_go():
  rs = np.random.RandomState(0)
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  h = tf.nn.relu(_fused_bn(_conv(x, _weights(rs, [3, 3, 3, 6], [1, 4]),
                                 'conv1'), rs))
  tf.identity(_conv(h, rs.randn(3, 3, 6, 4), 'conv2'), name='y')
  feed = rs.randn(2, 8, 8, 3).astype(np.float32)
  small, report = _shrink_same_outputs(feed)
  assert not [n for n in small.node if n.op.startswith('FusedBatchNorm')]
  assert [n.op for n in small.node if n.op in ('Mul', 'BiasAdd')] == \
      ['BiasAdd']                      # the scale is in conv1's weight
  conv1, conv2 = _layer(report, 'conv1'), _layer(report, 'conv2')
  assert (conv1.outputs_before, conv1.outputs_after) == (6, 4)
  assert (conv2.inputs_before, conv2.inputs_after) == (6, 4)
  assert conv1.flops_after == _conv_flops(8, 8, 3, 3, 4)
  # conv2 pads: what the removed constants give it is a map added with its
  # bias, no multiply-add.
  assert conv2.flops_after == _conv_flops(8, 8, 3, 4, 4)
  assert report.stops == []


def test_unfused_batch_norm_of_frozen_variables_folds_without_other_tools():
  rs = np.random.RandomState(1)
  x = tf.placeholder(tf.float32, [None, 6, 6, 2], name='x')
  h = _conv(x, _weights(rs, [1, 1, 2, 5], [0, 2, 3]), 'conv1', 'VALID')
  gamma, beta, mean, var = [tf.Variable(v.astype(np.float32))
                            for v in _bn_stats(rs, 5)]
  h = tf.nn.relu6(tf.nn.batch_normalization(h, mean, var, beta, gamma, 1e-3))
  tf.identity(_conv(h, rs.randn(3, 3, 5, 3), 'conv2'), name='y')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    frozen = tf.graph_util.convert_variables_to_constants(
        sess, tf.get_default_graph().as_graph_def(), ['y'])
  assert [n for n in frozen.node if n.op == 'Rsqrt']
  feed = rs.randn(2, 6, 6, 2).astype(np.float32)
  small, report = shrink_graph_def(frozen, ['y'])
  np.testing.assert_allclose(
      run_graph_def(small, feed), run_graph_def(frozen, feed), rtol=0,
      atol=1e-5 * np.abs(run_graph_def(frozen, feed)).max())
  assert not [n for n in small.node if n.op in ('Rsqrt', 'Mul', 'Sub')]
  assert _layer(report, 'conv1').outputs_after == 2
  assert _layer(report, 'conv2').inputs_after == 2
  assert report.stops == []


def test_fold_constants_evaluates_only_what_a_live_op_reads():
  x = tf.placeholder(tf.float32, [None, 3], name='x')
  scale = tf.sqrt(_const([4.0, 9.0, 16.0]), name='scale') * 2.0
  tf.multiply(x, scale, name='y')
  graph_def = tf.get_default_graph().as_graph_def()
  assert fold_constants(graph_def, {'y'}) == 1
  consts = {n.name: tf.make_ndarray(n.attr['value'].tensor)
            for n in graph_def.node if n.op == 'Const'}
  assert list(consts.values())[0].tolist() == [4.0, 6.0, 8.0]
  assert sorted(n.op for n in graph_def.node) == ['Const', 'Mul',
                                                  'Placeholder']


def _residual(rs, shortcut_zero, branch_zero):
  """x -> conv_in -> BN -> relu = s; y = conv_out(relu(BN(conv_s(s)) +
  BN(conv_b2(relu(conv_b1(s))))))."""
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  s = tf.nn.relu(_fused_bn(_conv(x, rs.randn(3, 3, 3, 4), 'conv_in'), rs))
  short = _fused_bn(_conv(s, _weights(rs, [1, 1, 4, 8], shortcut_zero),
                          'conv_s'), rs)
  b = tf.nn.relu(_fused_bn(_conv(s, rs.randn(3, 3, 4, 6), 'conv_b1'), rs))
  b = _fused_bn(_conv(b, _weights(rs, [3, 3, 6, 8], branch_zero), 'conv_b2'),
                rs)
  h = tf.nn.relu(tf.add(short, b, name='residual'))
  tf.identity(_conv(h, rs.randn(3, 3, 8, 2), 'conv_out'), name='y')
  return rs.randn(2, 8, 8, 3).astype(np.float32)


def test_residual_add_shrinks_when_every_member_drops_the_same_channels():
  feed = _residual(np.random.RandomState(2), [1, 4, 6], [1, 4, 6])
  _, report = _shrink_same_outputs(feed)
  assert _layer(report, 'conv_s').outputs_after == 5
  assert _layer(report, 'conv_b2').outputs_after == 5
  assert _layer(report, 'conv_out').inputs_after == 5
  assert _layer(report, 'conv_out').flops_after == _conv_flops(8, 8, 3, 5, 2)
  assert report.stops == []


def test_residual_add_keeps_channels_a_member_keeps_and_says_where():
  feed = _residual(np.random.RandomState(3), [1, 4], [4, 6])
  _, report = _shrink_same_outputs(feed)
  assert _layer(report, 'conv_s').outputs_after == 7      # only 4 goes
  assert _layer(report, 'conv_b2').outputs_after == 7
  assert sorted((s.layer, s.node, s.channels) for s in report.stops) == [
      ('conv_b2', 'residual', 1), ('conv_s', 'residual', 1)]
  assert all('not every member of this add drops' in s.reason
             for s in report.stops)


def test_concat_removes_channels_at_their_offsets():
  rs = np.random.RandomState(4)
  x = tf.placeholder(tf.float32, [None, 7, 7, 3], name='x')
  a = tf.nn.relu(tf.nn.bias_add(_conv(x, _weights(rs, [1, 1, 3, 4], [0, 3]),
                                      'conv_a'), _const(rs.randn(4))))
  b = tf.nn.relu(_fused_bn(_conv(x, _weights(rs, [3, 3, 3, 5], [2]),
                                 'conv_b'), rs))
  pool = tf.nn.max_pool(x, [1, 3, 3, 1], [1, 1, 1, 1], 'SAME')
  h = tf.concat([a, b, pool], 3)
  h = tf.nn.avg_pool(h, [1, 3, 3, 1], [1, 2, 2, 1], 'SAME')
  tf.identity(_conv(h, rs.randn(3, 3, 12, 2), 'conv_out'), name='y')
  feed = rs.randn(2, 7, 7, 3).astype(np.float32)
  _, report = _shrink_same_outputs(feed)
  assert _layer(report, 'conv_a').outputs_after == 2
  assert _layer(report, 'conv_b').outputs_after == 4
  assert _layer(report, 'conv_out').inputs_after == 9     # 2 + 4 + 3
  assert report.stops == []


def test_depthwise_conv_drops_the_multiplier_outputs_of_a_removed_input():
  rs = np.random.RandomState(5)
  x = tf.placeholder(tf.float32, [None, 6, 6, 3], name='x')
  h = tf.nn.relu6(_fused_bn(_conv(x, _weights(rs, [1, 1, 3, 5], [0, 3]),
                                  'expand'), rs))
  h = tf.nn.depthwise_conv2d(h, _const(rs.randn(3, 3, 5, 2)), [1, 1, 1, 1],
                             'SAME', name='depthwise')
  h = tf.nn.relu6(_fused_bn(h, rs))
  tf.identity(_conv(h, rs.randn(1, 1, 10, 4), 'project'), name='y')
  feed = rs.randn(2, 6, 6, 3).astype(np.float32)
  small, report = _shrink_same_outputs(feed)
  depthwise = _layer(report, 'depthwise')
  assert (depthwise.inputs_before, depthwise.inputs_after) == (5, 3)
  assert (depthwise.outputs_before, depthwise.outputs_after) == (10, 6)
  assert depthwise.flops_after == 2 * 6 * 6 * 3 * 3 * 3 * 2
  assert _layer(report, 'project').inputs_after == 6
  assert report.stops == []


@pytest.mark.parametrize('objective', ['flops', 'params'])
def test_explicit_pad_before_a_valid_stride_2_conv_is_passed_exactly(
    objective):
  rs = np.random.RandomState(6)
  x = tf.placeholder(tf.float32, [None, 9, 9, 2], name='x')
  h = tf.nn.relu(_fused_bn(_conv(x, _weights(rs, [3, 3, 2, 6], [1, 2, 5]),
                                 'conv1'), rs))
  h = tf.pad(h, [[0, 0], [1, 1], [1, 1], [0, 0]])     # slim's conv2d_same
  h = tf.nn.relu(_fused_bn(_conv(h, rs.randn(3, 3, 6, 4), 'conv2', 'VALID',
                                 2), rs))
  tf.identity(_conv(h, rs.randn(1, 1, 4, 2), 'conv3'), name='y')
  feed = rs.randn(2, 9, 9, 2).astype(np.float32)
  small, report = _shrink_same_outputs(feed, objective=objective)
  assert _layer(report, 'conv1').outputs_after == 3
  assert _layer(report, 'conv2').inputs_after == 3
  ops = {n.name: n.op for n in small.node}
  if objective == 'flops':
    # A [5, 5, 4] map added with conv2's bias: no multiply-add for it.
    assert _layer(report, 'conv2').flops_after == _conv_flops(5, 5, 3, 3, 4)
    assert [op for n, op in ops.items() if n.endswith('/shrink_map/add')] == \
        ['Add']
    assert not [n for n in ops if 'shrink_ones' in n]
  else:
    # The removed channels are constants inside, 0 in the padding: conv2
    # reads them as one extra channel of ones padded the same way.
    assert _layer(report, 'conv2').flops_after == _conv_flops(5, 5, 3, 3 + 1,
                                                              4)
    assert ops['conv2/shrink_ones/pad'] == 'Pad'
    assert 'conv2/shrink_ones/pattern' not in ops
  assert report.stops == []


def test_global_mean_and_dense_after_flatten_pass():
  rs = np.random.RandomState(7)
  x = tf.placeholder(tf.float32, [None, 6, 6, 3], name='x')
  h = tf.nn.relu(_fused_bn(_conv(x, _weights(rs, [3, 3, 3, 8], [0, 5, 7]),
                                 'conv1'), rs))
  pooled = tf.reduce_mean(h, [1, 2], keepdims=True)
  tf.squeeze(_conv(pooled, rs.randn(1, 1, 8, 3), 'logits'), [1, 2],
             name='y')
  feed = rs.randn(2, 6, 6, 3).astype(np.float32)
  _, report = _shrink_same_outputs(feed)
  assert _layer(report, 'conv1').outputs_after == 5
  assert _layer(report, 'logits').inputs_after == 5


def test_residual_graph_shrunk_here_runs_under_the_other_tf(tmp_path,
                                                            other_python):
  feed = _residual(np.random.RandomState(2), [1, 4, 6], [1, 4, 6])
  graph_def = tf.get_default_graph().as_graph_def()
  small, _ = shrink_graph_def(graph_def, ['y'])
  other, = run_in_process(other_python, [small], feed, str(tmp_path))
  expected = run_graph_def(graph_def, feed)
  np.testing.assert_allclose(other, expected,
                             rtol=0, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize('op', ['FusedBatchNorm', 'FusedBatchNormV2',
                                'FusedBatchNormV3'])
def test_every_fused_batch_norm_version_folds(op):
  rs = np.random.RandomState(8)
  x = tf.placeholder(tf.float32, [None, 5, 5, 2], name='x')
  h = tf.nn.relu(_fused_bn(_conv(x, _weights(rs, [3, 3, 2, 4], [2]),
                                 'conv1'), rs))
  tf.identity(_conv(h, rs.randn(1, 1, 4, 3), 'conv2'), name='y')
  graph_def = tf.get_default_graph().as_graph_def()
  feed = rs.randn(2, 5, 5, 2).astype(np.float32)
  expected = run_graph_def(graph_def, feed)
  for node in graph_def.node:
    if node.op.startswith('FusedBatchNorm'):
      node.op = op
      for attr in {'FusedBatchNorm': ('U', 'exponential_avg_factor'),
                   'FusedBatchNormV2': ('exponential_avg_factor',)}.get(op,
                                                                        ()):
        if attr in node.attr:
          del node.attr[attr]
  small, report = shrink_graph_def(graph_def, ['y'])
  np.testing.assert_allclose(run_graph_def(small, feed), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  assert _layer(report, 'conv1').outputs_after == 3
  assert not [n for n in small.node if n.op.startswith('FusedBatchNorm')]


def _hard_swish(x):
  return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def test_unfused_batch_norm_offset_becomes_a_bias_add():
  # A MobileNet v3 block with unfused batch norms: their offsets, folded,
  # add to the conv's output; they become the BiasAdds they are.
  rs = np.random.RandomState(0)
  with tf.Graph().as_default(), tf.Session() as sess:
    inits = [tf.glorot_uniform_initializer(seed=1)(s)
             for s in ([1, 1, 4, 8], [3, 3, 8, 1], [8, 3])]
    w1, dw, w2 = sess.run(inits)
  w1[..., [1, 5]] = 0.0
  stats = [_bn_stats(rs, 8) for _ in range(2)]
  x = rs.randn(2, 6, 6, 4).astype(np.float32)
  with tf.Graph().as_default():
    images = tf.placeholder(tf.float32, [None, 6, 6, 4], name='x')
    h = tf.nn.conv2d(images, _const(w1), [1] * 4, 'SAME')
    gamma, beta, mean, var = [_const(s.astype(np.float32)) for s in stats[0]]
    h = tf.nn.batch_normalization(h, mean, var, beta, gamma, 1e-3)
    h = h * tf.nn.relu6(h + 3.0) / 6.0
    h = tf.nn.depthwise_conv2d(h, _const(dw), [1] * 4, 'SAME')
    gamma, beta, mean, var = [_const(s.astype(np.float32)) for s in stats[1]]
    h = tf.nn.batch_normalization(h, mean, var, beta, gamma, 1e-3)
    h = h * tf.nn.relu6(h + 3.0) / 6.0
    tf.identity(tf.matmul(tf.reduce_mean(h, [1, 2]), _const(w2)), name='y')
    small, report = _shrink_same_outputs(x)
  assert [(l.name, l.outputs_after) for l in report.layers] == [
      ('Conv2D', 6), ('depthwise', 6), ('MatMul', 3)]
  readers = {}
  for node in small.node:
    for name in node.input:
      readers.setdefault(name, []).append(node.op)
  assert readers['Conv2D'] == ['BiasAdd']
  assert readers['depthwise'] == ['BiasAdd']

  def batch_norm(h, stats):
    gamma, beta, mean, var = stats
    return (h - mean) / np.sqrt(var + 1e-3) * gamma + beta

  h = _hard_swish(batch_norm(x.astype(np.float64) @ w1[0, 0], stats[0]))
  padded = np.pad(h, [(0, 0), (1, 1), (1, 1), (0, 0)])
  h = sum(padded[:, i:i + 6, j:j + 6] * dw[i, j, :, 0]
          for i in range(3) for j in range(3))
  expected = _hard_swish(batch_norm(h, stats[1])).mean(axis=(1, 2)) @ w2
  np.testing.assert_allclose(run_graph_def(small, x), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())


def test_a_conv_add_and_hard_swish_run_without_a_remapper_failure(tmp_path):
  # TF 2.21's grappler remapper fails on a conv, an Add of a [C] constant
  # and a hard-swish ("remapper failed: ... fanout 'truediv' exist for
  # missing node"), and then fuses nothing in the graph. It logs that once
  # per process: the shrunk graph runs in a fresh one.
  with tf.Graph().as_default(), tf.Session() as sess:
    w, dw = sess.run([tf.glorot_uniform_initializer(seed=1)(s)
                      for s in ([1, 1, 4, 4], [3, 3, 4, 1])])
  rs = np.random.RandomState(0)
  b1, b2 = rs.randn(2, 4).astype(np.float32)
  x = rs.randn(2, 8, 8, 4).astype(np.float32)
  with tf.Graph().as_default():
    images = tf.placeholder(tf.float32, [None, 8, 8, 4], name='x')
    h = tf.add(tf.nn.conv2d(images, _const(w), [1] * 4, 'SAME'), _const(b1))
    h = h * tf.nn.relu6(h + 3.0) / 6.0
    h = tf.add(tf.nn.depthwise_conv2d(h, _const(dw), [1] * 4, 'SAME'),
               _const(b2))
    h = h * tf.nn.relu6(h + 3.0) / 6.0
    tf.identity(tf.reduce_mean(h, [1, 2]), name='y')
    small, _ = _shrink_same_outputs(x)
  h = _hard_swish(x.astype(np.float64) @ w[0, 0] + b1)
  padded = np.pad(h, [(0, 0), (1, 1), (1, 1), (0, 0)])
  h = sum(padded[:, i:i + 8, j:j + 8] * dw[i, j, :, 0]
          for i in range(3) for j in range(3))
  expected = _hard_swish(h + b2).mean(axis=(1, 2))
  (got,), log = run_in_process(sys.executable, [small], x, str(tmp_path),
                               stderr=True)
  np.testing.assert_allclose(got, expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
  assert 'remapper failed' not in log


def test_an_add_that_broadcasts_a_layer_output_stays_an_add():
  # A MatMul of one unit plus a [3] constant broadcasts to [N, 3]: a
  # BiasAdd (bias of the last dim's size) would fail on it.
  with tf.Graph().as_default(), tf.Session() as sess:
    w1, w2 = sess.run([tf.glorot_uniform_initializer(seed=2)(s)
                       for s in ([4, 1], [3, 2])])
  b = np.array([0.5, -1.0, 2.0], np.float32)
  x = np.random.RandomState(1).randn(5, 4).astype(np.float32)
  with tf.Graph().as_default():
    inputs = tf.placeholder(tf.float32, [None, 4], name='x')
    h = tf.add(tf.matmul(inputs, _const(w1)), _const(b), name='wide')
    tf.identity(tf.matmul(tf.nn.relu(h), _const(w2)), name='y')
    small, _ = _shrink_same_outputs(x)
  assert {n.name: n.op for n in small.node}['wide'] in ('Add', 'AddV2')
  expected = np.maximum(x.astype(np.float64) @ w1 + b, 0.0) @ w2
  np.testing.assert_allclose(run_graph_def(small, x), expected, rtol=0,
                             atol=1e-5 * np.abs(expected).max())
