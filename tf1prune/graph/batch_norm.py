"""Batch normalization compatible with `slim.batch_norm`, on TF 1.15 and TF 2.x.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   x = tf.constant([[1.0, 2.0], [3.0, 6.0]])
    ...   y = tf1prune.batch_norm(x, scale=True, updates_collections=None)
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     print(sess.run(y).round(3).tolist())
    ...   [v.op.name for v in tf.global_variables()]
    [[-1.0, -1.0], [1.0, 1.0]]
    ['BatchNorm/beta', 'BatchNorm/gamma', 'BatchNorm/moving_mean', 'BatchNorm/moving_variance']

`batch_norm` takes the arguments of tf-slim 1.1.0's `slim.batch_norm`, with the
same defaults, and builds the same variables (`<scope>/beta`, `<scope>/gamma`,
`<scope>/moving_mean`, `<scope>/moving_variance`, model variables, moving
statistics not trainable), the same update ops (in `tf.GraphKeys.UPDATE_OPS`,
or run in place with `updates_collections=None`) and the same numbers, so
checkpoints move between the two in both directions. It is built on
`tf.nn.fused_batch_norm` (a `FusedBatchNormV3` op) or on `tf.nn.moments` +
`tf.nn.batch_normalization`, and on `tf.get_variable`; never on Keras, so it
also runs on TF 2.x with Keras 3, where `slim.batch_norm` cannot be built.

As in slim, the fused kernel updates `moving_variance` with the unbiased batch
variance (`n / (n - 1)` times the biased one) and the unfused path with the
biased one; normalization uses the biased variance in both.
"""

import tensorflow.compat.v1 as tf
import tf_slim as slim
from tf_slim.layers import utils as slim_utils

from tf1prune.graph import conditional

__all__ = ['batch_norm']

_FUSED_DTYPES = (tf.float16, tf.bfloat16, tf.float32)


def _static_value(pred):
  """The Python value of `pred`, or None when only known at run time."""
  if isinstance(pred, tf.Tensor):
    return tf.get_static_value(pred)
  if hasattr(pred, 'dtype') and hasattr(pred, 'op'):  # A variable.
    return None
  return pred


def _smart_cond(pred, true_fn, false_fn):
  """`true_fn()` or `false_fn()` when `pred` is static, else `tf.cond`."""
  value = _static_value(pred)
  if value is None:
    return tf.cond(tf.convert_to_tensor(pred), true_fn, false_fn)
  return true_fn() if value else false_fn()


def _param_dtype(dtype):
  """Variables are float32 for half-precision inputs, as in slim."""
  return tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype


def _collections(variables_collections, name):
  return slim_utils.get_variable_collections(variables_collections, name)


def _make_params(params_shape, dtype, center, scale, initializers,
                 regularizers, variables_collections, trainable, gamma_first):
  """Creates beta, gamma, moving_mean and moving_variance (or constants).

  Slim's default path (its Keras layer) creates gamma before beta; its other
  paths beta before gamma. The order is kept so variable lists compare equal.
  """
  def trainable_param(name, default_init):
    return slim.model_variable(
        name, shape=params_shape, dtype=dtype,
        initializer=initializers.get(name, default_init),
        regularizer=regularizers.get(name),
        collections=_collections(variables_collections, name),
        trainable=trainable)

  beta = gamma = None
  if gamma_first and scale:
    gamma = trainable_param('gamma', tf.ones_initializer())
  if center:
    beta = trainable_param('beta', tf.zeros_initializer())
  if scale and gamma is None:
    gamma = trainable_param('gamma', tf.ones_initializer())
  # The moving statistics are never partitioned (as in slim).
  with tf.variable_scope(tf.get_variable_scope()) as local_scope:
    local_scope.set_partitioner(None)
    moving = []
    for name, default_init in (('moving_mean', tf.zeros_initializer()),
                               ('moving_variance', tf.ones_initializer())):
      moving.append(slim.model_variable(
          name, shape=params_shape, dtype=dtype,
          initializer=initializers.get(name, default_init), trainable=False,
          collections=_collections(variables_collections, name)))
  return beta, gamma, moving[0], moving[1]


def _zero_debias_variables(moving_mean):
  """The `biased` and `local_step` variables slim's zero-debiasing makes.

  Their names, `<scope>/<moving_mean name>/biased` and `.../local_step`, are
  the ones `assign_moving_average(zero_debias=True)` gives them.
  """
  with tf.variable_scope(moving_mean.op.name):
    biased = tf.get_variable(
        'biased', shape=moving_mean.get_shape(),
        dtype=moving_mean.dtype.base_dtype,
        initializer=tf.zeros_initializer(), trainable=False)
    local_step = tf.get_variable(
        'local_step', shape=[], dtype=moving_mean.dtype.base_dtype,
        initializer=tf.zeros_initializer(), trainable=False)
  return biased, local_step


def _assign_moving_average(variable, value, decay, debias=None,
                           decay_in_float32=False):
  """`variable -= (variable - value) * (1 - decay)`, slim's update.

  With `debias=(biased, local_step)` the average is kept in `biased` and
  `variable` receives `biased / (1 - decay ** local_step)`. `1 - decay` is
  computed in Python, or, with `decay_in_float32` (slim's default path, its
  Keras layer), in float32 from `float32(decay)`: the results differ in the
  last bit, and so would the moving averages.
  """
  with tf.name_scope(None, 'AssignMovingAvg', [variable, value]) as scope:
    dtype = variable.dtype.base_dtype
    if decay_in_float32:
      one_minus_decay = tf.subtract(
          1.0, tf.convert_to_tensor(decay, dtype=tf.float32), name='decay')
    else:
      one_minus_decay = tf.convert_to_tensor(1.0 - decay, name='decay')
    one_minus_decay = tf.cast(one_minus_decay, dtype)
    value = tf.cast(value, dtype)
    if debias is None:
      return tf.assign_sub(variable, (variable - value) * one_minus_decay,
                           name=scope)
    biased, local_step = debias
    new_biased = tf.assign_sub(biased, (biased - value) * one_minus_decay)
    new_step = tf.assign_add(local_step, 1.0)
    bias_factor = 1.0 - tf.pow(1.0 - one_minus_decay, new_step)
    return tf.assign(variable, new_biased / bias_factor, name=scope)


def _as_4d(inputs, data_format):
  channels = inputs.get_shape().as_list()[-1]
  shape = [-1, channels, 1, 1] if data_format == 'NCHW' else [-1, 1, 1, channels]
  return tf.reshape(inputs, shape)


def _check_arguments(inputs, data_format, renorm, batch_weights):
  if data_format not in ('NHWC', 'NCHW'):
    raise ValueError("data_format must be 'NHWC' or 'NCHW', got %r" %
                     (data_format,))
  if renorm:
    raise NotImplementedError(
        'batch_norm(renorm=True) is not supported by tf1prune.batch_norm, got '
        'renorm=%r; use renorm=False (batch renormalization changes only '
        'training, the inference graph is the same).' % (renorm,))
  rank = inputs.get_shape().ndims
  if rank is None or rank < 2:
    raise ValueError('batch_norm needs an input of known rank >= 2, got shape '
                     '%s for %s' % (inputs.get_shape(), inputs.name))
  axis = 1 if data_format == 'NCHW' else rank - 1
  channels = inputs.get_shape().as_list()[axis]
  if channels is None:
    raise ValueError('batch_norm needs a known channel dimension (axis %d for '
                     '%s), got shape %s for %s' % (axis, data_format,
                                                   inputs.get_shape(),
                                                   inputs.name))
  if batch_weights is not None:
    inputs.get_shape()[0:1].assert_is_compatible_with(
        tf.convert_to_tensor(batch_weights).get_shape())
  return rank, axis, channels


def _fused_statistics(inputs, gamma, beta, moving_mean, moving_variance,
                      epsilon, data_format, is_training):
  """FusedBatchNormV3 in training and/or inference mode."""
  def training():
    return tf.nn.fused_batch_norm(inputs, gamma, beta, epsilon=epsilon,
                                  data_format=data_format)

  def inference():
    return tf.nn.fused_batch_norm(inputs, gamma, beta, mean=moving_mean,
                                  variance=moving_variance, epsilon=epsilon,
                                  is_training=False, data_format=data_format)

  return _smart_cond(is_training, training, inference)


def _batch_moments(inputs, axis, batch_weights, stats_dtype):
  """Biased batch mean and variance over every axis but `axis`, shape [C]."""
  rank = inputs.get_shape().ndims
  axes = [i for i in range(rank) if i != axis]
  x = tf.cast(inputs, stats_dtype)
  if batch_weights is None:
    mean, variance = tf.nn.moments(x, axes, keep_dims=True)
  else:
    weights = tf.reshape(tf.cast(batch_weights, stats_dtype),
                         [-1] + [1] * (rank - 1))
    mean, variance = tf.nn.weighted_moments(x, axes, weights, keep_dims=True)
  return tf.reshape(mean, [-1]), tf.reshape(variance, [-1])


def _adjusted(inputs, gamma, beta, adjustment, is_training):
  """Applies slim's `adjustment(shape) -> (scale, bias)` in training only."""
  adj_scale, adj_bias = adjustment(tf.shape(inputs))
  adj_scale = _smart_cond(is_training, lambda: adj_scale,
                                    lambda: tf.ones_like(adj_scale))
  adj_bias = _smart_cond(is_training, lambda: adj_bias,
                                   lambda: tf.zeros_like(adj_bias))
  if gamma is not None:
    adj_scale, adj_bias = adj_scale * gamma, adj_bias * gamma
  if beta is not None:
    adj_bias += beta
  return adj_scale, adj_bias


@slim.add_arg_scope
def batch_norm(inputs, decay=0.999, center=True, scale=False, epsilon=0.001,
               activation_fn=None, param_initializers=None,
               param_regularizers=None,
               updates_collections=tf.GraphKeys.UPDATE_OPS, is_training=True,
               reuse=None, variables_collections=None, outputs_collections=None,
               trainable=True, batch_weights=None, fused=None,
               data_format='NHWC', zero_debias_moving_mean=False, scope=None,
               renorm=False, renorm_clipping=None, renorm_decay=0.99,
               adjustment=None):
  """Batch normalization (Ioffe & Szegedy, 2015), a drop-in `slim.batch_norm`.

  In training the input is normalized with the batch statistics and
  `moving_mean`/`moving_variance` are updated by
  `moving -= (moving - batch_stat) * (1 - decay)`; in inference the moving
  statistics are used. The update ops go to `updates_collections` (run them
  with the train op: `tf.control_dependencies(tf.get_collection(
  tf.GraphKeys.UPDATE_OPS))`), or, with `updates_collections=None`, run before
  the output is returned.

  Args:
    inputs: float tensor of rank >= 2, first dimension the batch; channels are
      the last dimension (NHWC) or the second (NCHW) and must be known.
    decay: moving-average decay, e.g. 0.999, 0.99 or 0.9.
    center: add a trainable offset `beta` (else no offset).
    scale: multiply by a trainable `gamma` (else no scale).
    epsilon: added to the variance before the square root.
    activation_fn: applied to the output, or None.
    param_initializers: optional dict of initializers for `beta`, `gamma`,
      `moving_mean`, `moving_variance` (defaults: zeros, ones, zeros, ones).
    param_regularizers: optional dict of regularizers for `beta` and `gamma`.
    updates_collections: collections for the two update ops, or None to run
      the updates in place (a control dependency of the output).
    is_training: Python bool, or a bool tensor/variable to decide at run time.
    reuse: reuse the variables of `scope`.
    variables_collections: extra collections for the variables: a list, or a
      dict keyed by `beta`, `gamma`, `moving_mean`, `moving_variance`.
    outputs_collections: collections the output is added to.
    trainable: whether `beta` and `gamma` are trainable.
    batch_weights: optional `[batch]` tensor of example weights for the batch
      statistics (unfused path, `tf.nn.weighted_moments`).
    fused: None or True: use the fused kernel when possible (rank 2 or 4,
      float16/bfloat16/float32, no `batch_weights`, no `adjustment`);
      False: use `tf.nn.moments` + `tf.nn.batch_normalization`.
    data_format: 'NHWC' or 'NCHW'.
    zero_debias_moving_mean: keep `moving_mean` zero-debiased (adds the
      variables `.../moving_mean/biased` and `.../moving_mean/local_step`).
    scope: variable scope, default 'BatchNorm'.
    renorm: only False is supported.
    renorm_clipping, renorm_decay: accepted and ignored (renorm is False).
    adjustment: optional `fn(input_shape) -> (scale, bias)` applied to the
      normalized values, before gamma and beta, in training only.

  Returns:
    A tensor with the shape and dtype of `inputs`.

  Raises:
    ValueError: `data_format` is not NHWC/NCHW, or the rank or the channel
      dimension of `inputs` is unknown.
    NotImplementedError: `renorm=True`.
  """
  del renorm_clipping, renorm_decay  # Only used by renorm.
  inputs = tf.convert_to_tensor(inputs)
  rank, axis, channels = _check_arguments(inputs, data_format, renorm,
                                          batch_weights)
  use_fused = (fused is None or bool(fused)) and (
      rank in (2, 4) and batch_weights is None and adjustment is None and
      inputs.dtype.base_dtype in _FUSED_DTYPES)
  # Which path slim itself takes decides the creation order of gamma/beta.
  slim_keras_path = (
      batch_weights is None and not zero_debias_moving_mean and
      updates_collections is tf.GraphKeys.UPDATE_OPS and
      not ((fused is None or fused) and rank == 2 and adjustment is None))
  with tf.variable_scope(scope, 'BatchNorm', [inputs], reuse=reuse) as sc:
    dtype = _param_dtype(inputs.dtype.base_dtype)
    beta, gamma, moving_mean, moving_variance = _make_params(
        [channels], dtype, center, scale, param_initializers or {},
        param_regularizers or {}, variables_collections, trainable,
        gamma_first=slim_keras_path)
    training_value = _static_value(is_training)
    need_updates = training_value is None or bool(training_value)
    debias = None
    if need_updates and zero_debias_moving_mean:
      debias = _zero_debias_variables(moving_mean)

    def updates(mean, variance):
      return (_assign_moving_average(moving_mean, mean, decay, debias,
                                     slim_keras_path),
              _assign_moving_average(moving_variance, variance, decay,
                                     decay_in_float32=slim_keras_path))

    # A tensor `is_training` makes conds that assign to the moving statistics.
    with conditional.conds_assigning([moving_mean, moving_variance]):
      if use_fused:
        x = _as_4d(inputs, data_format) if rank == 2 else inputs
        outputs, mean, variance = _fused_statistics(
            x, tf.ones([channels], dtype) if gamma is None else gamma,
            tf.zeros([channels], dtype) if beta is None else beta,
            moving_mean, moving_variance, epsilon, data_format, is_training)
        if need_updates and updates_collections is None:
          def forced():
            with tf.control_dependencies(updates(mean, variance)):
              return tf.identity(outputs)
          outputs = _smart_cond(is_training, forced, lambda: outputs)
        elif need_updates:
          update_mean, update_variance = _smart_cond(
              is_training, lambda: updates(mean, variance),
              lambda: (moving_mean, moving_variance))
          tf.add_to_collections(updates_collections, update_mean)
          tf.add_to_collections(updates_collections, update_variance)
        if rank == 2:
          outputs = tf.reshape(outputs, [-1, channels])
        outputs.set_shape(inputs.get_shape())
      else:
        outputs = _unfused(inputs, axis, rank, channels, gamma, beta,
                           moving_mean, moving_variance, epsilon, is_training,
                           need_updates, updates_collections, updates,
                           batch_weights, adjustment, dtype)
    if activation_fn is not None:
      outputs = activation_fn(outputs)
    return slim_utils.collect_named_outputs(outputs_collections, sc.name,
                                            outputs)


def _unfused(inputs, axis, rank, channels, gamma, beta, moving_mean,
             moving_variance, epsilon, is_training, need_updates,
             updates_collections, updates, batch_weights, adjustment, dtype):
  """`tf.nn.moments` + `tf.nn.batch_normalization`, with slim's updates."""
  moving = lambda: (tf.convert_to_tensor(moving_mean),
                    tf.convert_to_tensor(moving_variance))
  if need_updates:
    mean, variance = _batch_moments(inputs, axis, batch_weights, dtype)
    if updates_collections is None:
      def forced():
        with tf.control_dependencies(updates(mean, variance)):
          return tf.identity(mean), tf.identity(variance)
      mean, variance = _smart_cond(is_training, forced, moving)
    else:
      update_mean, update_variance = _smart_cond(
          is_training, lambda: updates(mean, variance),
          lambda: (moving_mean, moving_variance))
      tf.add_to_collections(updates_collections, update_mean)
      tf.add_to_collections(updates_collections, update_variance)
      mean, variance = _smart_cond(
          is_training, lambda: (mean, variance), moving)
  else:
    mean, variance = moving()
  if adjustment is not None:
    gamma, beta = _adjusted(inputs, gamma, beta, adjustment, is_training)
  broadcast = [1] * rank
  broadcast[axis] = channels

  def shaped(t):
    if t is None:
      return None
    t = tf.cast(t, inputs.dtype.base_dtype)
    return tf.reshape(t, broadcast) if axis != rank - 1 else t

  outputs = tf.nn.batch_normalization(inputs, shaped(mean), shaped(variance),
                                      shaped(beta), shaped(gamma), epsilon)
  outputs.set_shape(inputs.get_shape())
  return outputs
