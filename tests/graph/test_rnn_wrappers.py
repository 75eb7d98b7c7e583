"""MultiRNNCell, DropoutWrapper and ResidualWrapper: TF1's names, on both stacks."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune


def _contrib_rnn():
  try:
    from tensorflow.contrib.model_pruning.python.layers import rnn_cells  # pylint: disable=g-import-not-at-top
  except ImportError:
    pytest.skip('contrib exists only on TF 1.15: the TF 2.x run checks our side')
  return rnn_cells


def _two_layers(lib, wrappers, state_is_tuple=True):
  return wrappers.MultiRNNCell(
      [lib.MaskedBasicLSTMCell(4, state_is_tuple=state_is_tuple),
       lib.MaskedLSTMCell(4, state_is_tuple=state_is_tuple)],
      state_is_tuple=state_is_tuple)


def _numpy_lstm(x, c, h, kernel, bias):
  z = np.concatenate([x, h], 1).dot(kernel) + bias
  i, j, f, o = np.split(z, 4, axis=1)
  sig = lambda v: 1 / (1 + np.exp(-v))
  c = c * sig(f + 1.0) + sig(i) * np.tanh(j)
  return np.tanh(c) * sig(o), c


@pytest.mark.parametrize('kind', ['dynamic', 'static'])
def test_two_layer_masked_lstm_names_values_and_one_training_step(kind):
  cell = _two_layers(tf1prune, tf1prune)
  x = tf.constant(np.linspace(-1, 1, 2 * 3 * 3).reshape(2, 3, 3), tf.float32)
  if kind == 'dynamic':
    out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    last = out[:, -1]
  else:
    outs, _ = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
    last = outs[-1]
  names = [v.op.name for v in tf.global_variables()]
  prefix = 'rnn/multi_rnn_cell/cell_%d/%s/'
  assert names == [prefix % (0, 'masked_basic_lstm_cell') + n
                   for n in ('kernel', 'bias', 'mask', 'threshold')] + [
                       prefix % (1, 'masked_lstm_cell') + n
                       for n in ('kernel', 'bias', 'mask', 'threshold')]
  step = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(last))
  masks = tf1prune.get_masks()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    half = np.ones([7, 16], np.float32)
    half[::2] = 0
    sess.run(masks[0].assign(half))
    k0, b0, k1, b1 = sess.run([v for v in tf.global_variables()
                               if v.op.name.endswith(('kernel', 'bias'))])
    got = sess.run(last)
    sess.run(step)
    k0_after = sess.run(tf.global_variables()[0])
  sess_x = np.linspace(-1, 1, 18).reshape(2, 3, 3).astype(np.float32)
  states = [[np.zeros([2, 4])] * 2, [np.zeros([2, 4])] * 2]
  for t in range(3):
    h0, c0 = _numpy_lstm(sess_x[:, t], states[0][0], states[0][1], k0 * half, b0)
    h1, c1 = _numpy_lstm(h0, states[1][0], states[1][1], k1, b1)
    states = [[c0, h0], [c1, h1]]
  np.testing.assert_allclose(got, h1, rtol=1e-5, atol=1e-6)
  # Training moves only the kept entries of the masked kernel.
  moved = k0_after != k0
  assert moved.any() and not moved[half == 0].any()


def test_state_is_tuple_false_concatenates_the_layers_states():
  cell = _two_layers(tf1prune, tf1prune, state_is_tuple=False)
  assert cell.state_size == 16
  _, state = tf.nn.dynamic_rnn(cell, tf.ones([2, 3, 3]), dtype=tf.float32)
  assert state.shape.as_list() == [2, 16]
  tuple_cell = tf1prune.MultiRNNCell([tf1prune.MaskedBasicLSTMCell(4, name='t')])
  with pytest.raises(ValueError, match='state_size is an int'):
    tf1prune.MultiRNNCell([tf1prune.MaskedBasicLSTMCell(4)],
                          state_is_tuple=False)
  assert tuple_cell.state_size == (tf1prune.LSTMStateTuple(4, 4),)


def test_residual_adds_the_input_and_dropout_drops_h_but_not_c():
  x_value = np.linspace(-1, 1, 8).reshape(2, 4).astype(np.float32)
  x = tf.constant(x_value)
  cell = tf1prune.MaskedBasicLSTMCell(4)
  zero = cell.zero_state(2, tf.float32)
  plain_out, plain_state = cell(x, zero)
  residual = tf1prune.ResidualWrapper(cell)
  res_out, _ = residual(x, residual.zero_state(2, tf.float32))
  dropped = tf1prune.DropoutWrapper(cell, state_keep_prob=0.5, seed=1)
  d_out, d_state = dropped(x, dropped.zero_state(2, tf.float32))
  assert len(tf1prune.get_masks()) == 1  # one cell object, one set of variables
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    out, c, h, res, d_o, d_c, d_h = sess.run(
        [plain_out, plain_state.c, plain_state.h, res_out, d_out, d_state.c,
         d_state.h])
  np.testing.assert_array_equal(res, out + x_value)
  np.testing.assert_array_equal(d_o, out)   # output_keep_prob=1.0: untouched
  np.testing.assert_array_equal(d_c, c)     # TF1's default: c is never dropped
  kept = d_h != 0
  np.testing.assert_allclose(d_h[kept], 2 * h[kept], rtol=1e-6)
  assert 0 < kept.sum() < kept.size


def test_dropout_and_multi_errors_name_the_fix():
  cell = tf1prune.MaskedBasicLSTMCell(4)
  with pytest.raises(ValueError, match=r'output_keep_prob must be in \(0, 1\]'):
    tf1prune.DropoutWrapper(cell, output_keep_prob=1.5)
  with pytest.raises(ValueError, match='variational_recurrent=False'):
    tf1prune.DropoutWrapper(cell, variational_recurrent=True)
  with pytest.raises(ValueError, match='non-empty list'):
    tf1prune.MultiRNNCell([])
  with pytest.raises(ValueError, match='output shaped like its input'):
    tf1prune.ResidualWrapper(tf1prune.MaskedBasicLSTMCell(5, name='r'))(
        tf.ones([2, 3]), tf1prune.LSTMStateTuple(tf.zeros([2, 5]),
                                                 tf.zeros([2, 5])))


@pytest.mark.parametrize('kind', ['dynamic', 'static', 'concat'])
def test_op_and_variable_names_are_tf1_multi_rnn_cells(kind):
  contrib = _contrib_rnn()
  graphs = []
  for lib, wrappers in ((contrib, tf.nn.rnn_cell), (tf1prune, tf1prune)):
    with tf.Graph().as_default() as graph:
      if kind == 'concat':
        cell = _two_layers(lib, wrappers, state_is_tuple=False)
      else:
        cell = wrappers.MultiRNNCell([
            wrappers.DropoutWrapper(lib.MaskedBasicLSTMCell(3),
                                    input_keep_prob=0.9, output_keep_prob=0.5,
                                    state_keep_prob=0.7, seed=3),
            wrappers.ResidualWrapper(lib.MaskedLSTMCell(3, use_peepholes=True))])
      x = tf.zeros([2, 5, 3])
      if kind == 'static':
        tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
      else:
        tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    graphs.append(graph)

  def names(graph):
    # tf1prune computes the masked kernel once outside the while loop; the
    # loop's Enter plumbing is the only difference.
    return ({(o.name, o.type) for o in graph.get_operations()
             if o.type != 'Enter'},
            [v.op.name for v in graph.get_collection('variables')])

  assert names(graphs[0]) == names(graphs[1])


def test_a_tf1_multi_rnn_cell_checkpoint_restores(tmp_path):
  contrib = _contrib_rnn()
  x = np.linspace(-1, 1, 2 * 3 * 3).reshape(2, 3, 3).astype(np.float32)
  results = []
  for lib, wrappers in ((contrib, tf.nn.rnn_cell), (tf1prune, tf1prune)):
    with tf.Graph().as_default():
      out, _ = tf.nn.dynamic_rnn(_two_layers(lib, wrappers), tf.constant(x),
                                 dtype=tf.float32)
      saver = tf.train.Saver()
      with tf.Session() as sess:
        if lib is contrib:
          sess.run(tf.global_variables_initializer())
          mask = tf.get_collection('masks')[1]
          sess.run(mask.assign(np.tril(np.ones(mask.shape.as_list()))))
          saver.save(sess, str(tmp_path / 'model'))
        else:
          saver.restore(sess, str(tmp_path / 'model'))
        results.append(sess.run(out))
  np.testing.assert_array_equal(results[0], results[1])
