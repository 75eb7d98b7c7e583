"""tf-slim style conv and fully connected layers whose weights are masked.

    >>> import tensorflow.compat.v1 as tf, tf_slim as slim, tf1prune
    >>> with tf.Graph().as_default():
    ...   images = tf.zeros([2, 8, 8, 3])
    ...   with slim.arg_scope([tf1prune.masked_conv2d], padding='VALID'):
    ...     net = tf1prune.masked_conv2d(images, 16, 3, scope='conv1')
    ...   net.shape.as_list(), [v.op.name for v in tf.global_variables()]
    ([2, 6, 6, 16], ['conv1/weights', 'conv1/mask', 'conv1/threshold', 'conv1/biases'])

Both layers take the arguments of `slim.conv2d` / `slim.fully_connected` and
create `<scope>/weights`, `<scope>/biases`, `<scope>/mask` and
`<scope>/threshold`; the kernel used is `apply_mask(weights)`. Built on
`get_variable` (through `slim.model_variable`) and `tf.nn`, never on Keras.
"""

import numbers

import tensorflow.compat.v1 as tf
import tf_slim as slim
from tf_slim.layers import utils as slim_utils

from tf1prune.graph.masking import apply_mask

__all__ = ['masked_conv2d', 'masked_convolution', 'masked_fully_connected']


def _is_int(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _pair(name, value):
  """Returns `value` as a list of two positive ints, or raises ValueError.

  NumPy integers count as ints, as in slim.
  """
  pair = [value, value] if _is_int(value) else value
  if (not isinstance(pair, (list, tuple)) or len(pair) != 2 or
      not all(_is_int(v) and v >= 1 for v in pair)):
    raise ValueError('%s must be a positive int or a pair of them, got %r' %
                     (name, value))
  return [int(v) for v in pair]


def _collections(variables_collections, name):
  if isinstance(variables_collections, dict):
    return variables_collections.get(name)
  return variables_collections


def _finish(outputs, sc, num_outputs, biases_initializer, biases_regularizer,
            normalizer_fn, normalizer_params, activation_fn,
            variables_collections, outputs_collections, trainable, data_format):
  """Adds bias or normalizer, then activation; collects the output."""
  if normalizer_fn is not None:
    outputs = normalizer_fn(outputs, **(normalizer_params or {}))
  elif biases_initializer is not None:
    biases = slim.model_variable(
        'biases', shape=[num_outputs], dtype=outputs.dtype.base_dtype,
        initializer=biases_initializer, regularizer=biases_regularizer,
        collections=_collections(variables_collections, 'biases'),
        trainable=trainable)
    outputs = tf.nn.bias_add(outputs, biases, data_format=data_format)
  if activation_fn is not None:
    outputs = activation_fn(outputs)
  return slim_utils.collect_named_outputs(outputs_collections, sc.name, outputs)


def _masked_weights(shape, dtype, initializer, regularizer, collections,
                    trainable):
  weights = slim.model_variable(
      'weights', shape=shape, dtype=dtype, initializer=initializer,
      regularizer=regularizer, collections=collections, trainable=trainable)
  return apply_mask(weights)


@slim.add_arg_scope
def masked_conv2d(inputs, num_outputs, kernel_size, stride=1, padding='SAME',
                  data_format=None, rate=1, activation_fn=tf.nn.relu,
                  normalizer_fn=None, normalizer_params=None,
                  weights_initializer=tf.glorot_uniform_initializer(),
                  weights_regularizer=None,
                  biases_initializer=tf.zeros_initializer(),
                  biases_regularizer=None, reuse=None,
                  variables_collections=None, outputs_collections=None,
                  trainable=True, scope=None):
  """A 2-D convolution with a pruning mask on its kernel.

  Args:
    inputs: 4-D float tensor, `[batch, height, width, channels]` (NHWC) or
      `[batch, channels, height, width]` (NCHW).
    num_outputs: number of output channels.
    kernel_size: int or `[kh, kw]`; the kernel is `[kh, kw, in, num_outputs]`.
    stride: int or `[sh, sw]`.
    padding: 'SAME' or 'VALID'.
    data_format: None or 'NHWC', or 'NCHW'.
    rate: int or `[rh, rw]` dilation; with rate > 1 the stride must be 1.
    activation_fn, normalizer_fn, normalizer_params, weights_initializer,
    weights_regularizer, biases_initializer, biases_regularizer, reuse,
    variables_collections, outputs_collections, trainable, scope: as in
      `slim.conv2d`.

  Returns:
    The output tensor, `[batch, out_h, out_w, num_outputs]` for NHWC.

  Raises:
    ValueError: `inputs` is not rank 4, or an argument is out of range.
  """
  if data_format not in (None, 'NHWC', 'NCHW'):
    raise ValueError("data_format must be None, 'NHWC' or 'NCHW', got %r" %
                     (data_format,))
  kernel = _pair('kernel_size', kernel_size)
  strides = _pair('stride', stride)
  rates = _pair('rate', rate)
  if max(rates) > 1 and max(strides) > 1:
    raise ValueError('stride must be 1 when rate > 1, got stride=%r, rate=%r' %
                     (stride, rate))
  with tf.variable_scope(scope, 'Conv', [inputs], reuse=reuse) as sc:
    inputs = tf.convert_to_tensor(inputs)
    if inputs.get_shape().ndims != 4:
      raise ValueError('masked_conv2d needs a rank-4 input, got shape %s; '
                       'reshape it to [batch, height, width, channels].' %
                       inputs.get_shape())
    channel_axis = 1 if data_format == 'NCHW' else 3
    in_channels = inputs.get_shape().as_list()[channel_axis]
    if in_channels is None:
      raise ValueError('masked_conv2d needs a known number of input channels, '
                       'got input shape %s' % inputs.get_shape())
    kernel_var = _masked_weights(
        kernel + [in_channels, num_outputs], inputs.dtype.base_dtype,
        weights_initializer, weights_regularizer,
        _collections(variables_collections, 'weights'), trainable)
    outputs = tf.nn.convolution(
        inputs, kernel_var, padding=padding, strides=strides,
        dilation_rate=rates, data_format=data_format or 'NHWC')
    return _finish(outputs, sc, num_outputs, biases_initializer,
                   biases_regularizer, normalizer_fn, normalizer_params,
                   activation_fn, variables_collections, outputs_collections,
                   trainable, data_format or 'NHWC')


masked_convolution = masked_conv2d


@slim.add_arg_scope
def masked_fully_connected(inputs, num_outputs, activation_fn=tf.nn.relu,
                           normalizer_fn=None, normalizer_params=None,
                           weights_initializer=tf.glorot_uniform_initializer(),
                           weights_regularizer=None,
                           biases_initializer=tf.zeros_initializer(),
                           biases_regularizer=None, reuse=None,
                           variables_collections=None, outputs_collections=None,
                           trainable=True, scope=None):
  """A fully connected layer with a pruning mask on its weights.

  Args:
    inputs: float tensor of rank >= 2 with a known last dimension `in`; rank > 2
      inputs are multiplied along their last axis.
    num_outputs: output size; the weights are `[in, num_outputs]`.
    Other arguments: as in `slim.fully_connected`.

  Returns:
    A tensor shaped like `inputs` with the last dimension `num_outputs`.

  Raises:
    ValueError: `inputs` has rank < 2 or an unknown last dimension.
  """
  with tf.variable_scope(scope, 'fully_connected', [inputs], reuse=reuse) as sc:
    inputs = tf.convert_to_tensor(inputs)
    shape = inputs.get_shape()
    if shape.ndims is None or shape.ndims < 2 or shape.as_list()[-1] is None:
      raise ValueError('masked_fully_connected needs an input of rank >= 2 with '
                       'a known last dimension, got shape %s' % shape)
    in_size = shape.as_list()[-1]
    weights = _masked_weights(
        [in_size, num_outputs], inputs.dtype.base_dtype, weights_initializer,
        weights_regularizer, _collections(variables_collections, 'weights'),
        trainable)
    if shape.ndims == 2:
      outputs = tf.matmul(inputs, weights)
    else:  # as contrib: a tensordot over the last axis (its op names)
      outputs = tf.tensordot(inputs, weights, [[shape.ndims - 1], [0]])
      outputs.set_shape(shape[:-1].concatenate([num_outputs]))
    return _finish(outputs, sc, num_outputs, biases_initializer,
                   biases_regularizer, normalizer_fn, normalizer_params,
                   activation_fn, variables_collections, outputs_collections,
                   trainable, 'NHWC')
