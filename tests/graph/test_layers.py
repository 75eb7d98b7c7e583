"""masked_conv2d / masked_convolution / masked_fully_connected against NumPy."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

import tf1prune


def _np_conv2d(x, kernel, stride=(1, 1), padding='SAME', rate=(1, 1)):
  """NHWC convolution (cross-correlation, as tf.nn.conv2d) in float64."""
  batch, height, width, _ = x.shape
  kh, kw, _, out = kernel.shape
  eh, ew = (kh - 1) * rate[0] + 1, (kw - 1) * rate[1] + 1
  if padding == 'SAME':
    oh, ow = -(-height // stride[0]), -(-width // stride[1])
    ph = max((oh - 1) * stride[0] + eh - height, 0)
    pw = max((ow - 1) * stride[1] + ew - width, 0)
    x = np.pad(x, [(0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2),
                   (0, 0)])
  else:
    oh = (height - eh) // stride[0] + 1
    ow = (width - ew) // stride[1] + 1
  y = np.zeros([batch, oh, ow, out])
  for i in range(oh):
    for j in range(ow):
      patch = x[:, i * stride[0]:i * stride[0] + eh:rate[0],
                j * stride[1]:j * stride[1] + ew:rate[1], :]
      y[:, i, j, :] = np.tensordot(patch, kernel, axes=([1, 2, 3], [0, 1, 2]))
  return y


def _mask_half(shape, seed):
  """A deterministic 0/1 mask of `shape` with both values present."""
  mask = (np.random.RandomState(seed).rand(*shape) > 0.5).astype(np.float32)
  mask.flat[0], mask.flat[1] = 0.0, 1.0
  return mask


def _run_with_mask(outputs, mask_value, feed=None):
  """Initializes, sets the one mask to `mask_value`, returns outputs and vars."""
  mask, = tf1prune.get_masks()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(mask, mask_value))
    return sess.run(outputs, feed)


def _var_names():
  return [v.op.name for v in tf.global_variables()]


def test_masked_convolution_is_masked_conv2d():
  assert tf1prune.masked_convolution is tf1prune.masked_conv2d


def test_conv2d_variable_names_shapes_and_collections():
  images = tf.zeros([2, 8, 8, 3])
  net = tf1prune.masked_conv2d(images, 16, [3, 5], scope='conv1')
  assert net.shape.as_list() == [2, 8, 8, 16]
  assert _var_names() == ['conv1/weights', 'conv1/mask', 'conv1/threshold',
                          'conv1/biases']
  shapes = {v.op.name: v.shape.as_list() for v in tf.global_variables()}
  assert shapes['conv1/weights'] == [3, 5, 3, 16]
  assert shapes['conv1/mask'] == [3, 5, 3, 16]
  assert shapes['conv1/threshold'] == []
  assert shapes['conv1/biases'] == [16]
  assert [v.op.name for v in tf.trainable_variables()] == ['conv1/weights',
                                                           'conv1/biases']
  assert [v.op.name for v in tf.model_variables()] == ['conv1/weights',
                                                       'conv1/biases']
  assert [w.op.name for w in tf1prune.get_weights()] == ['conv1/weights']
  assert [m.op.name for m in tf1prune.get_masked_weights()] == [
      'conv1/weights/masked_weight']
  assert net.op.name == 'conv1/Relu'


def test_default_scope_names_are_uniquified():
  images = tf.zeros([1, 4, 4, 2])
  tf1prune.masked_conv2d(images, 2, 1)
  tf1prune.masked_conv2d(images, 2, 1)
  tf1prune.masked_fully_connected(tf.zeros([1, 2]), 3)
  assert [m.op.name for m in tf1prune.get_masks()] == [
      'Conv/mask', 'Conv_1/mask', 'fully_connected/mask']


@pytest.mark.parametrize('stride,padding,rate', [
    (1, 'SAME', 1), (2, 'SAME', 1), (1, 'VALID', 1), ([2, 1], 'VALID', 1),
    (1, 'SAME', 2), (1, 'VALID', [2, 1])])
def test_conv2d_output_equals_numpy_conv_with_masked_kernel(stride, padding,
                                                            rate):
  rs = np.random.RandomState(0)
  x = rs.randn(2, 7, 6, 3)
  kernel = rs.randn(3, 3, 3, 4)
  biases = rs.randn(4)
  mask = _mask_half(kernel.shape, 1).astype(np.float64)
  net = tf1prune.masked_conv2d(
      tf.constant(x), 4, 3, stride=stride, padding=padding, rate=rate,
      activation_fn=None, weights_initializer=tf.constant_initializer(kernel),
      biases_initializer=tf.constant_initializer(biases), scope='conv')
  got = _run_with_mask(net, mask)
  strides = [stride] * 2 if isinstance(stride, int) else stride
  rates = [rate] * 2 if isinstance(rate, int) else rate
  expected = _np_conv2d(x, kernel * mask, strides, padding, rates) + biases
  assert got.shape == expected.shape
  np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_conv2d_relu_default_and_zero_mask_gives_relu_of_bias():
  x = np.ones([1, 3, 3, 2], np.float32)
  net = tf1prune.masked_conv2d(
      tf.constant(x), 2, 3, biases_initializer=tf.constant_initializer(
          [-1.0, 2.0]), scope='conv')
  got = _run_with_mask(net, np.zeros([3, 3, 2, 2], np.float32))
  np.testing.assert_array_equal(got[0, :, :, 0], np.zeros([3, 3]))
  np.testing.assert_array_equal(got[0, :, :, 1], np.full([3, 3], 2.0))


def test_conv2d_inside_slim_arg_scope():
  x = np.random.RandomState(2).randn(1, 5, 5, 2)
  kernel = np.random.RandomState(3).randn(3, 3, 2, 3)
  with slim.arg_scope([tf1prune.masked_conv2d], padding='VALID',
                      activation_fn=None,
                      weights_initializer=tf.constant_initializer(kernel),
                      biases_initializer=None):
    net = tf1prune.masked_conv2d(tf.constant(x), 3, 3, scope='conv1')
  assert net.shape.as_list() == [1, 3, 3, 3]
  assert _var_names() == ['conv1/weights', 'conv1/mask', 'conv1/threshold']
  mask = _mask_half(kernel.shape, 4).astype(np.float64)
  got = _run_with_mask(net, mask)
  np.testing.assert_allclose(got, _np_conv2d(x, kernel * mask, padding='VALID'),
                             rtol=1e-10, atol=1e-10)


def test_masked_convolution_inside_slim_arg_scope_of_masked_conv2d():
  with slim.arg_scope([tf1prune.masked_conv2d], padding='VALID'):
    net = tf1prune.masked_convolution(tf.zeros([1, 5, 5, 1]), 2, 3)
  assert net.shape.as_list() == [1, 3, 3, 2]


@pytest.mark.parametrize('shape', [[2, 8, 3], [2, 4, 4, 4, 3], [8]])
def test_conv2d_needs_a_rank_4_input(shape):
  with pytest.raises(ValueError, match='masked_conv2d needs a rank-4 input'):
    tf1prune.masked_conv2d(tf.zeros(shape), 4, 3)


def test_conv2d_argument_errors():
  x = tf.zeros([1, 4, 4, 1])
  with pytest.raises(ValueError, match="data_format must be None, 'NHWC' or "
                     "'NCHW', got 'NDHWC'"):
    tf1prune.masked_conv2d(x, 2, 3, data_format='NDHWC')
  with pytest.raises(ValueError, match=r'kernel_size must be a positive int '
                     r'or a pair of them, got \[3, 3, 3\]'):
    tf1prune.masked_conv2d(x, 2, [3, 3, 3])
  with pytest.raises(ValueError, match='stride must be 1 when rate > 1'):
    tf1prune.masked_conv2d(x, 2, 3, stride=2, rate=2)
  with pytest.raises(ValueError, match='stride must be a positive int or a '
                     'pair of them, got 1.5'):
    tf1prune.masked_conv2d(x, 2, 3, stride=1.5)
  with pytest.raises(ValueError, match=r'rate must be a positive int or a '
                     r'pair of them, got \[0, 1\]'):
    tf1prune.masked_conv2d(x, 2, 3, rate=[0, 1])


def test_conv2d_accepts_numpy_ints_and_tuples():
  net = tf1prune.masked_conv2d(tf.zeros([1, 6, 6, 1]), 2,
                               (np.int64(3), np.int32(1)),
                               stride=np.int64(2), padding='VALID', scope='c')
  assert net.shape.as_list() == [1, 2, 3, 2]
  assert tf1prune.get_masks()[0].shape.as_list() == [3, 1, 1, 2]


def _nchw_conv_runs_on_this_cpu():
  with tf.Graph().as_default():
    y = tf.nn.conv2d(tf.zeros([1, 1, 3, 3]), tf.zeros([1, 1, 1, 1]),
                     [1, 1, 1, 1], 'SAME', data_format='NCHW')
    try:
      with tf.Session() as sess:
        sess.run(y)
      return True
    except (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError):
      return False


def test_conv2d_nchw():
  x = np.random.RandomState(5).randn(2, 3, 6, 6).astype(np.float32)
  kernel = np.random.RandomState(6).randn(3, 3, 3, 4).astype(np.float32)
  net = tf1prune.masked_conv2d(
      tf.constant(x), 4, 3, data_format='NCHW', activation_fn=None,
      weights_initializer=tf.constant_initializer(kernel),
      biases_initializer=tf.constant_initializer([1.0, 2.0, 3.0, 4.0]),
      scope='conv')
  assert net.shape.as_list() == [2, 4, 6, 6]
  assert tf1prune.get_masks()[0].shape.as_list() == [3, 3, 3, 4]
  if not _nchw_conv_runs_on_this_cpu():
    pytest.skip('this TensorFlow build has no NCHW Conv2D kernel on CPU: the '
                'graph builds, but cannot run here')
  mask = _mask_half(kernel.shape, 7)
  got = _run_with_mask(net, mask)
  nhwc = _np_conv2d(x.transpose(0, 2, 3, 1).astype(np.float64),
                    (kernel * mask).astype(np.float64))
  expected = nhwc.transpose(0, 3, 1, 2) + np.array([1., 2., 3., 4.])[:, None, None]
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_regularizers_add_to_regularization_losses():
  reg = slim.l2_regularizer(0.5)
  kernel = np.full([1, 1, 2, 2], 2.0, np.float32)
  tf1prune.masked_conv2d(tf.zeros([1, 2, 2, 2]), 2, 1,
                         weights_initializer=tf.constant_initializer(kernel),
                         weights_regularizer=reg, biases_regularizer=reg,
                         biases_initializer=tf.constant_initializer(1.0),
                         scope='conv')
  tf1prune.masked_fully_connected(tf.zeros([1, 3]), 2,
                                  weights_initializer=tf.ones_initializer(),
                                  weights_regularizer=reg, scope='fc')
  losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
  assert len(losses) == 3
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got = sess.run(losses)
  # l2: 0.5 * sum(w ** 2) / 2.
  assert sorted(got) == pytest.approx(sorted([0.5 * 16.0 / 2, 0.5 * 2.0 / 2,
                                              0.5 * 6.0 / 2]))


def test_normalizer_fn_replaces_the_biases():
  calls = []

  def normalizer(x, scale=1.0):
    calls.append(scale)
    return x * scale

  x = np.random.RandomState(8).randn(3, 4)
  w = np.random.RandomState(9).randn(4, 5)
  net = tf1prune.masked_fully_connected(
      tf.constant(x), 5, activation_fn=None, normalizer_fn=normalizer,
      normalizer_params={'scale': 3.0},
      weights_initializer=tf.constant_initializer(w), scope='fc')
  assert calls == [3.0]
  assert _var_names() == ['fc/weights', 'fc/mask', 'fc/threshold']
  mask = _mask_half(w.shape, 10).astype(np.float64)
  np.testing.assert_allclose(_run_with_mask(net, mask), 3.0 * x.dot(w * mask),
                             rtol=1e-12)


def test_normalizer_variables_live_in_the_layer_scope():
  # slim.batch_norm is Keras-backed on TF 2.x; any normalizer_fn that calls
  # get_variable shows the same scoping.
  def normalizer(x):
    gamma = tf.get_variable('Norm/gamma', [x.shape[-1]], x.dtype,
                            initializer=tf.constant_initializer(2.0))
    return x * gamma

  x = np.ones([2, 4, 4, 3])
  net = tf1prune.masked_conv2d(
      tf.constant(x), 5, 1, normalizer_fn=normalizer, activation_fn=None,
      weights_initializer=tf.ones_initializer(), scope='conv')
  assert _var_names() == ['conv/weights', 'conv/mask', 'conv/threshold',
                          'conv/Norm/gamma']
  mask = np.zeros([1, 1, 3, 5])
  mask[0, 0, :2, :] = 1.0
  np.testing.assert_array_equal(_run_with_mask(net, mask),
                                np.full([2, 4, 4, 5], 4.0))


def test_fully_connected_names_and_output_equal_numpy():
  x = np.random.RandomState(11).randn(4, 6)
  w = np.random.RandomState(12).randn(6, 3)
  b = np.array([0.5, -0.5, 1.0])
  net = tf1prune.masked_fully_connected(
      tf.constant(x), 3, weights_initializer=tf.constant_initializer(w),
      biases_initializer=tf.constant_initializer(b), scope='fc1')
  assert _var_names() == ['fc1/weights', 'fc1/mask', 'fc1/threshold',
                          'fc1/biases']
  assert tf1prune.get_masks()[0].shape.as_list() == [6, 3]
  assert tf1prune.get_masked_weights()[0].op.name == 'fc1/weights/masked_weight'
  mask = _mask_half(w.shape, 13).astype(np.float64)
  got = _run_with_mask(net, mask)
  np.testing.assert_allclose(got, np.maximum(x.dot(w * mask) + b, 0.0),
                             rtol=1e-12)


def test_fully_connected_rank_3_input_multiplies_the_last_axis():
  x = np.random.RandomState(14).randn(2, 5, 4)
  w = np.random.RandomState(15).randn(4, 3)
  placeholder = tf.placeholder(tf.float64, [None, 5, 4])
  net = tf1prune.masked_fully_connected(
      placeholder, 3, activation_fn=None,
      weights_initializer=tf.constant_initializer(w), biases_initializer=None,
      scope='fc')
  assert net.shape.as_list() == [None, 5, 3]
  mask = _mask_half(w.shape, 16).astype(np.float64)
  got = _run_with_mask(net, mask, {placeholder: x})
  np.testing.assert_allclose(got, np.einsum('bti,io->bto', x, w * mask),
                             rtol=1e-12)


def test_fully_connected_inside_slim_arg_scope():
  with slim.arg_scope([tf1prune.masked_fully_connected], num_outputs=7,
                      activation_fn=None, biases_initializer=None):
    net = tf1prune.masked_fully_connected(tf.zeros([2, 3]), scope='fc')
  assert net.shape.as_list() == [2, 7]
  assert _var_names() == ['fc/weights', 'fc/mask', 'fc/threshold']


@pytest.mark.parametrize('shape', [[5], [None, None]])
def test_fully_connected_input_errors(shape):
  with pytest.raises(ValueError, match='masked_fully_connected needs an input '
                     'of rank >= 2 with a known last dimension'):
    tf1prune.masked_fully_connected(tf.placeholder(tf.float32, shape), 3)


def test_reuse_shares_weights_and_mask():
  x = tf.zeros([1, 3])
  first = tf1prune.masked_fully_connected(x, 2, scope='fc')
  second = tf1prune.masked_fully_connected(x, 2, scope='fc', reuse=True)
  assert _var_names() == ['fc/weights', 'fc/mask', 'fc/threshold',
                          'fc/biases']
  assert len(tf1prune.get_masks()) == 1
  assert first is not second


def test_variables_and_outputs_collections():
  net = tf1prune.masked_fully_connected(
      tf.zeros([1, 3]), 2, variables_collections=['my_vars'],
      outputs_collections='my_outputs', scope='fc')
  assert [v.op.name for v in tf.get_collection('my_vars')] == ['fc/weights',
                                                               'fc/biases']
  assert tf.get_collection('my_outputs') == [net]


def test_trainable_false():
  tf1prune.masked_conv2d(tf.zeros([1, 3, 3, 1]), 2, 3, trainable=False,
                         scope='conv')
  assert tf.trainable_variables() == []


def test_training_changes_weights_but_not_the_mask():
  x = np.random.RandomState(17).randn(8, 4).astype(np.float32)
  net = tf1prune.masked_fully_connected(tf.constant(x), 1, activation_fn=None,
                                        scope='fc')
  loss = tf.reduce_mean(tf.square(net - 1.0))
  train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
  mask, = tf1prune.get_masks()
  weights = tf.global_variables()[0]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(mask, [[0.0], [1.0], [1.0], [0.0]]))
    before = sess.run(weights)
    sess.run(train)
    after, m = sess.run([weights, mask])
  assert m.ravel().tolist() == [0.0, 1.0, 1.0, 0.0]
  # Masked entries get no gradient; the others move.
  assert after[0, 0] == before[0, 0] and after[3, 0] == before[3, 0]
  assert after[1, 0] != before[1, 0] and after[2, 0] != before[2, 0]
