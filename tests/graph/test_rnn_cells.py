"""MaskedBasicLSTMCell and MaskedLSTMCell under dynamic_rnn / static_rnn."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune

BATCH, TIME, DEPTH, UNITS = 3, 4, 5, 6


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _np_lstm(x, kernel, bias, forget_bias=1.0, peepholes=None, cell_clip=None,
             projection=None, proj_clip=None):
  """TF1 LSTMCell math over `x` [batch, time, depth]; returns (outputs, c, h)."""
  batch, time, _ = x.shape
  units = bias.shape[0] // 4
  h_depth = units if projection is None else projection.shape[1]
  c, h = np.zeros([batch, units]), np.zeros([batch, h_depth])
  outputs = []
  for t in range(time):
    gates = np.concatenate([x[:, t], h], 1).dot(kernel) + bias
    i, j, f, o = np.split(gates, 4, axis=1)
    if peepholes is not None:
      w_f, w_i, w_o = peepholes
      f, i = f + w_f * c, i + w_i * c
    c = _sigmoid(f + forget_bias) * c + _sigmoid(i) * np.tanh(j)
    if cell_clip is not None:
      c = np.clip(c, -cell_clip, cell_clip)
    if peepholes is not None:
      o = o + w_o * c
    h = _sigmoid(o) * np.tanh(c)
    if projection is not None:
      h = h.dot(projection)
      if proj_clip is not None:
        h = np.clip(h, -proj_clip, proj_clip)
    outputs.append(h)
  return np.stack(outputs, 1), c, h


def _inputs():
  return np.random.RandomState(0).randn(BATCH, TIME, DEPTH)


def _variables_by_suffix():
  return {v.op.name.split('/', 2)[-1]: v for v in tf.global_variables()}


def _randomize_and_mask(sess, seed=1):
  """Gives every cell variable random values and the mask a 0/1 pattern.

  Returns a dict suffix -> value as set (the kernel already masked).
  """
  rs = np.random.RandomState(seed)
  values = {}
  for suffix, var in _variables_by_suffix().items():
    if suffix == 'threshold':
      continue
    shape = var.shape.as_list()
    if suffix == 'mask':
      value = (rs.rand(*shape) > 0.4).astype(np.float64)
    else:
      value = rs.randn(*shape) * 0.5
    sess.run(tf.assign(var, value))
    values[suffix] = value
  values['masked_kernel'] = values['kernel'] * values['mask']
  return values


def _run_rnn(cell, x, kind, initial_state=None):
  """Runs `cell` over numpy `x`; returns (outputs [b, t, h], final state)."""
  if kind == 'dynamic':
    outputs, state = tf.nn.dynamic_rnn(cell, tf.constant(x),
                                       initial_state=initial_state,
                                       dtype=tf.float64)
  else:
    steps = tf.unstack(tf.constant(x), axis=1)
    outputs, state = tf.nn.static_rnn(cell, steps, initial_state=initial_state,
                                      dtype=tf.float64)
    outputs = tf.stack(outputs, 1)
  return outputs, state


@pytest.mark.parametrize('kind', ['dynamic', 'static'])
def test_basic_lstm_equals_numpy_with_masked_kernel(kind):
  x = _inputs()
  cell = tf1prune.MaskedBasicLSTMCell(UNITS)
  outputs, state = _run_rnn(cell, x, kind)
  names = sorted(v.op.name for v in tf.global_variables())
  assert names == ['rnn/masked_basic_lstm_cell/bias',
                   'rnn/masked_basic_lstm_cell/kernel',
                   'rnn/masked_basic_lstm_cell/mask',
                   'rnn/masked_basic_lstm_cell/threshold']
  mask, = tf1prune.get_masks()
  assert mask.shape.as_list() == [DEPTH + UNITS, 4 * UNITS]
  assert [w.op.name for w in tf1prune.get_weights()] == [
      'rnn/masked_basic_lstm_cell/kernel']
  assert isinstance(state, tf1prune.LSTMStateTuple)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    got, (c, h) = sess.run([outputs, state])
  expected, c_ref, h_ref = _np_lstm(x, values['masked_kernel'], values['bias'])
  np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(c, c_ref, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(h, h_ref, rtol=1e-10, atol=1e-12)


def test_basic_lstm_forget_bias_and_the_mask_matter():
  x = _inputs()
  cell = tf1prune.MaskedBasicLSTMCell(UNITS, forget_bias=0.25)
  outputs, _ = _run_rnn(cell, x, 'dynamic')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    got = sess.run(outputs)
  np.testing.assert_allclose(
      got, _np_lstm(x, values['masked_kernel'], values['bias'], 0.25)[0],
      rtol=1e-10, atol=1e-12)
  unmasked = _np_lstm(x, values['kernel'], values['bias'], 0.25)[0]
  assert np.abs(got - unmasked).max() > 1e-3


@pytest.mark.parametrize('kind', ['dynamic', 'static'])
@pytest.mark.parametrize('options', [
    {},
    {'use_peepholes': True},
    {'cell_clip': 0.3},
    {'num_proj': 4},
    {'num_proj': 4, 'proj_clip': 0.1},
    {'use_peepholes': True, 'cell_clip': 0.5, 'num_proj': 3,
     'forget_bias': 0.5},
])
def test_lstm_cell_equals_numpy_with_masked_kernel(kind, options):
  x = _inputs()
  cell = tf1prune.MaskedLSTMCell(UNITS, **options)
  outputs, state = _run_rnn(cell, x, kind)
  num_proj = options.get('num_proj')
  h_depth = num_proj or UNITS
  assert cell.output_size == h_depth
  assert cell.state_size == (UNITS, h_depth)
  mask, = tf1prune.get_masks()
  assert mask.shape.as_list() == [DEPTH + h_depth, 4 * UNITS]
  suffixes = set(_variables_by_suffix())
  expected_names = {'kernel', 'bias', 'mask', 'threshold'}
  if options.get('use_peepholes'):
    expected_names |= {'w_f_diag', 'w_i_diag', 'w_o_diag'}
  if num_proj:
    expected_names |= {'projection/kernel'}
  assert suffixes == expected_names
  # The projection is not masked: one mask, on the fused kernel.
  assert [w.op.name for w in tf1prune.get_weights()] == [
      'rnn/masked_lstm_cell/kernel']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    got, (c, h) = sess.run([outputs, state])
  peepholes = None
  if options.get('use_peepholes'):
    peepholes = (values['w_f_diag'], values['w_i_diag'], values['w_o_diag'])
  expected, c_ref, h_ref = _np_lstm(
      x, values['masked_kernel'], values['bias'],
      forget_bias=options.get('forget_bias', 1.0), peepholes=peepholes,
      cell_clip=options.get('cell_clip'),
      projection=values.get('projection/kernel'),
      proj_clip=options.get('proj_clip'))
  assert got.shape == (BATCH, TIME, h_depth)
  np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(c, c_ref, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(h, h_ref, rtol=1e-10, atol=1e-12)
  if options.get('cell_clip'):
    assert np.abs(c).max() <= options['cell_clip']


@pytest.mark.parametrize('cell_class', [tf1prune.MaskedBasicLSTMCell,
                                        tf1prune.MaskedLSTMCell])
@pytest.mark.parametrize('kind', ['dynamic', 'static'])
def test_state_is_tuple_false_concatenates_c_and_h(cell_class, kind):
  x = _inputs()
  cell = cell_class(UNITS, state_is_tuple=False)
  assert cell.state_size == 2 * UNITS
  outputs, state = _run_rnn(cell, x, kind)
  assert state.shape.as_list() == [BATCH, 2 * UNITS]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    got, final = sess.run([outputs, state])
  expected, c_ref, h_ref = _np_lstm(x, values['masked_kernel'], values['bias'])
  np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(final, np.concatenate([c_ref, h_ref], 1),
                             rtol=1e-10, atol=1e-12)


def test_initial_state_is_used():
  x = _inputs()
  cell = tf1prune.MaskedBasicLSTMCell(UNITS)
  zero = cell.zero_state(BATCH, tf.float64)
  assert isinstance(zero, tf1prune.LSTMStateTuple)
  assert zero.c.shape.as_list() == [BATCH, UNITS]
  start = tf1prune.LSTMStateTuple(tf.ones([BATCH, UNITS], tf.float64),
                                  tf.zeros([BATCH, UNITS], tf.float64))
  outputs, _ = _run_rnn(cell, x, 'dynamic', initial_state=start)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    got = sess.run(outputs)
  # Reference: first step from c = 1, h = 0.
  kernel, bias = values['masked_kernel'], values['bias']
  gates = np.concatenate([x[:, 0], np.zeros([BATCH, UNITS])], 1).dot(kernel)
  i, j, f, o = np.split(gates + bias, 4, axis=1)
  c = _sigmoid(f + 1.0) + _sigmoid(i) * np.tanh(j)
  np.testing.assert_allclose(got[:, 0], np.tanh(c) * _sigmoid(o), rtol=1e-10)


@pytest.mark.parametrize('cell_class', [tf1prune.MaskedBasicLSTMCell,
                                        tf1prune.MaskedLSTMCell])
def test_one_mask_per_cell_under_static_rnn_over_many_steps(cell_class):
  steps = [tf.zeros([2, DEPTH]) for _ in range(7)]
  cell = cell_class(UNITS)
  outputs, _ = tf.nn.static_rnn(cell, steps, dtype=tf.float32)
  assert len(outputs) == 7
  assert len(tf1prune.get_masks()) == 1
  assert len(tf1prune.get_thresholds()) == 1
  assert len(tf1prune.get_masked_weights()) == 1
  assert len(tf1prune.masked_weight_records()) == 1
  assert len([v for v in tf.global_variables()
              if v.op.name.endswith('/mask')]) == 1


def test_one_cell_reused_by_several_rnns_shares_one_set_of_variables():
  x = _inputs()
  cell = tf1prune.MaskedBasicLSTMCell(UNITS)
  first, _ = _run_rnn(cell, x, 'dynamic')
  second, _ = _run_rnn(cell, x[::-1], 'dynamic')
  third, _ = _run_rnn(cell, x, 'static')
  assert len(tf.global_variables()) == 4
  assert len(tf1prune.get_masks()) == 1
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    got = sess.run([first, second, third])
  kernel, bias = values['masked_kernel'], values['bias']
  for out, inputs in zip(got, [x, x[::-1], x]):
    np.testing.assert_allclose(out, _np_lstm(inputs, kernel, bias)[0],
                               rtol=1e-10, atol=1e-12)


def test_gradients_reach_the_kernel_only_where_the_mask_is_one():
  x = _inputs()
  cell = tf1prune.MaskedLSTMCell(UNITS, use_peepholes=True)
  outputs, _ = _run_rnn(cell, x, 'dynamic')
  kernel = _variables_by_suffix()['kernel']
  grad, = tf.gradients(tf.reduce_sum(outputs), [kernel])
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    g = sess.run(grad)
  assert np.all(g[values['mask'] == 0.0] == 0.0)
  assert np.all(g[values['mask'] == 1.0] != 0.0)


def test_two_cells_in_two_scopes_get_two_masks():
  x = tf.zeros([2, TIME, DEPTH])
  with tf.variable_scope('encoder'):
    encoded, _ = tf.nn.dynamic_rnn(tf1prune.MaskedBasicLSTMCell(UNITS), x,
                                   dtype=tf.float32)
  with tf.variable_scope('decoder'):
    tf.nn.dynamic_rnn(tf1prune.MaskedLSTMCell(3), encoded, dtype=tf.float32)
  assert [m.op.name for m in tf1prune.get_masks()] == [
      'encoder/rnn/masked_basic_lstm_cell/mask',
      'decoder/rnn/masked_lstm_cell/mask']
  shapes = [m.shape.as_list() for m in tf1prune.get_masks()]
  assert shapes == [[DEPTH + UNITS, 4 * UNITS], [UNITS + 3, 12]]


def test_bidirectional_dynamic_rnn_gets_one_mask_per_direction():
  x = _inputs()
  fw = tf1prune.MaskedBasicLSTMCell(UNITS)
  bw = tf1prune.MaskedLSTMCell(UNITS)
  (out_fw, out_bw), _ = tf.nn.bidirectional_dynamic_rnn(
      fw, bw, tf.constant(x), dtype=tf.float64)
  assert [m.op.name for m in tf1prune.get_masks()] == [
      'bidirectional_rnn/fw/masked_basic_lstm_cell/mask',
      'bidirectional_rnn/bw/masked_lstm_cell/mask']
  variables = {v.op.name: v for v in tf.global_variables()}
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = {}
    rs = np.random.RandomState(2)
    for name, var in variables.items():
      if not name.endswith('threshold'):
        values[name] = rs.randn(*var.shape.as_list()) * 0.5
        if name.endswith('mask'):
          values[name] = (values[name] > 0).astype(np.float64)
        sess.run(tf.assign(var, values[name]))
    got_fw, got_bw = sess.run([out_fw, out_bw])

  def reference(scope, inputs):
    prefix = 'bidirectional_rnn/%s/' % scope
    kernel = values[prefix + 'kernel'] * values[prefix + 'mask']
    return _np_lstm(inputs, kernel, values[prefix + 'bias'])[0]

  fw_scope = 'fw/masked_basic_lstm_cell'
  bw_scope = 'bw/masked_lstm_cell'
  np.testing.assert_allclose(got_fw, reference(fw_scope, x), rtol=1e-10,
                             atol=1e-12)
  np.testing.assert_allclose(got_bw, reference(bw_scope, x[:, ::-1])[:, ::-1],
                             rtol=1e-10, atol=1e-12)


def test_cell_called_directly_and_then_again():
  cell = tf1prune.MaskedBasicLSTMCell(UNITS, name='my_cell')
  state = cell.zero_state(2, tf.float32)
  out1, state = cell(tf.zeros([2, DEPTH]), state)
  out2, _ = cell(tf.ones([2, DEPTH]), state)
  assert out2.shape.as_list() == [2, UNITS]
  assert [m.op.name for m in tf1prune.get_masks()] == ['my_cell/mask']


def test_pruning_prunes_the_lstm_kernel():
  tf.train.get_or_create_global_step()
  cell = tf1prune.MaskedLSTMCell(UNITS, num_proj=4)
  tf.nn.dynamic_rnn(cell, tf.zeros([2, TIME, DEPTH]), dtype=tf.float32)
  hp = tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.75,sparsity_function_end_step=1')
  update = tf1prune.Pruning(hp).mask_update_op()
  mask, = tf1prune.get_masks()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(tf.train.get_global_step(), 5))
    sess.run(update)
    kept = sess.run(tf.reduce_sum(mask))
  assert kept == (DEPTH + 4) * 4 * UNITS // 4


@pytest.mark.parametrize('activation', ['relu', tf.nn.relu])
def test_activation_by_name_or_callable(activation):
  x = _inputs()
  cell = tf1prune.MaskedBasicLSTMCell(UNITS, activation=activation)
  outputs, _ = _run_rnn(cell, x, 'dynamic')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    values = _randomize_and_mask(sess)
    got = sess.run(outputs)
  kernel, bias = values['masked_kernel'], values['bias']
  c, h = np.zeros([BATCH, UNITS]), np.zeros([BATCH, UNITS])
  relu = lambda v: np.maximum(v, 0.0)
  for t in range(TIME):
    i, j, f, o = np.split(np.concatenate([x[:, t], h], 1).dot(kernel) + bias,
                          4, axis=1)
    c = c * _sigmoid(f + 1.0) + _sigmoid(i) * relu(j)
    h = relu(c) * _sigmoid(o)
    np.testing.assert_allclose(got[:, t], h, rtol=1e-10, atol=1e-12)


def test_unknown_activation_name_error():
  with pytest.raises(ValueError, match="activation must be None, a callable "
                     "or the name of a tf.nn / tf.math function such as "
                     "'tanh', got 'tanhh'"):
    tf1prune.MaskedLSTMCell(UNITS, activation='tanhh')


def test_num_units_error():
  with pytest.raises(ValueError, match='num_units must be a positive int, got 0'):
    tf1prune.MaskedBasicLSTMCell(0)


def test_unknown_input_depth_error():
  cell = tf1prune.MaskedBasicLSTMCell(UNITS)
  with pytest.raises(ValueError, match='needs inputs with a known last '
                     'dimension'):
    cell(tf.placeholder(tf.float32, [2, None]), cell.zero_state(2, tf.float32))
