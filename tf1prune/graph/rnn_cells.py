"""LSTM cells whose fused kernel is masked, for `dynamic_rnn` and `static_rnn`.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   cell = tf1prune.MaskedBasicLSTMCell(8)
    ...   out, state = tf.nn.dynamic_rnn(cell, tf.zeros([2, 5, 3]), dtype=tf.float32)
    ...   out.shape.as_list(), tf1prune.get_masks()[0].shape.as_list()
    ([2, 5, 8], [11, 32])

The math and variable names are those of TF1's `BasicLSTMCell` and `LSTMCell`
(`kernel`, `bias`, `w_f_diag`, `w_i_diag`, `w_o_diag`, `projection/kernel`);
the kernel `[input_depth + h_depth, 4 * num_units]` goes through `apply_mask`
(`mask`, `threshold` beside it). The cells are plain objects with the RNNCell
protocol (`state_size`, `output_size`, `zero_state`, `__call__`), so they run
where the Keras-backed `tf.compat.v1.nn.rnn_cell` classes raise under Keras 3.
Variables and the masked kernel are built once per graph, outside any loop.
"""

import collections

import tensorflow.compat.v1 as tf

from tf1prune.graph.masking import apply_mask

__all__ = ['LSTMStateTuple', 'MaskedBasicLSTMCell', 'MaskedLSTMCell',
           'zeros_for']


class LSTMStateTuple(collections.namedtuple('LSTMStateTuple', ('c', 'h'))):
  """The (cell state, output) pair, the layout of TF1's `LSTMStateTuple`."""

  @property
  def dtype(self):
    return self.c.dtype


def zeros_for(batch_size, size, dtype):
  """Returns zeros `[batch_size, size]`, made by the ops of TF1's zero_state.

  TF1's RNN cells build the shape through a helper that also makes two
  unused constants; they are made here too, so every later op name matches.

  Args:
    batch_size: int, or an int32 scalar or vector tensor.
    size: int, the state size.
    dtype: the dtype of the zeros.
  """
  if isinstance(batch_size, tf.Tensor):
    prefix = (tf.expand_dims(batch_size, 0) if batch_size.shape.ndims == 0
              else batch_size)
    static_batch = tf.get_static_value(batch_size)
    static_batch = (None if static_batch is None
                    else int(static_batch.reshape([-1])[0]))
  else:
    prefix = tf.constant([batch_size], dtype=tf.int32)
    static_batch = batch_size
  suffix = tf.constant([size], dtype=tf.int32)
  zeros = tf.zeros(tf.concat((prefix, suffix), 0), dtype=dtype)
  if not isinstance(batch_size, tf.Tensor):
    tf.constant([batch_size], dtype=tf.int32)  # TF1's static-shape constants
  tf.constant([size], dtype=tf.int32)
  zeros.set_shape([static_batch, size])
  return zeros


def _activation_fn(activation):
  """Returns the callable for `activation`: None (tanh), a callable or a name.

  Names, as TF1's cells accept them ('tanh', 'relu', ...), are looked up in
  `tf.nn` and `tf.math`.
  """
  if activation is None:
    return tf.tanh
  if callable(activation):
    return activation
  if isinstance(activation, str):
    fn = getattr(tf.nn, activation, None) or getattr(tf.math, activation, None)
    if callable(fn):
      return fn
  raise ValueError('activation must be None, a callable or the name of a '
                   'tf.nn / tf.math function such as \'tanh\', got %r' %
                   (activation,))


class _MaskedLSTM(object):
  """Shared protocol: state layout, zero state, once-per-graph variables."""

  _default_name = None

  def __init__(self, num_units, forget_bias, state_is_tuple, activation, reuse,
               name, dtype, h_depth):
    if not isinstance(num_units, int) or num_units < 1:
      raise ValueError('num_units must be a positive int, got %r' % (num_units,))
    self._num_units = num_units
    self._forget_bias = forget_bias
    self._state_is_tuple = state_is_tuple
    self._activation = _activation_fn(activation)
    self._reuse = reuse
    self._name = name or self._default_name
    self._dtype = dtype
    self._h_depth = h_depth
    self._graph = None

  @property
  def state_size(self):
    if self._state_is_tuple:
      return LSTMStateTuple(self._num_units, self._h_depth)
    return self._num_units + self._h_depth

  @property
  def output_size(self):
    return self._h_depth

  def zero_state(self, batch_size, dtype):
    """Returns the all-zero state for `batch_size` sequences (TF1's op names)."""
    with tf.name_scope(type(self).__name__ + 'ZeroState'):
      c = zeros_for(batch_size, self._num_units, dtype)
      h = zeros_for(batch_size, self._h_depth, dtype)
      return LSTMStateTuple(c, h) if self._state_is_tuple else tf.concat([c, h], 1)

  def _split_state(self, state):
    if self._state_is_tuple:
      return state
    return state[:, :self._num_units], state[:, self._num_units:]

  def _join_state(self, c, h):
    return LSTMStateTuple(c, h) if self._state_is_tuple else tf.concat([c, h], 1)

  def _variables(self, inputs, scope):
    """Creates (once per graph) and returns this cell's variables.

    The first call in a graph also fixes the name scope of the cell's ops,
    as TF1's layers did: `<name scope of that call>/<cell name>/`, reused by
    every later call (static_rnn's steps get `MatMul`, `MatMul_1`, ...).
    """
    # The outermost graph: under TF 2.x control flow v2, dynamic_rnn calls the
    # cell inside a new function graph for each loop it builds.
    with tf.init_scope():
      graph = tf.get_default_graph()
    if self._graph is not graph:
      depth = inputs.get_shape().as_list()[-1]
      if depth is None:
        raise ValueError('%s needs inputs with a known last dimension, got '
                         'shape %s' % (type(self).__name__, inputs.get_shape()))
      dtype = self._dtype or inputs.dtype.base_dtype
      if scope is not None or self._reuse:
        entered = tf.variable_scope(scope or self._name, reuse=self._reuse)
      else:
        entered = tf.variable_scope(None, default_name=self._name)
      with entered as var_scope:
        self._name_scope = var_scope.original_name_scope
      with tf.init_scope(), tf.variable_scope(var_scope,
                                              auxiliary_name_scope=False):
        with tf.name_scope(self._name_scope):
          kernel = tf.get_variable(
              'kernel', [depth + self._h_depth, 4 * self._num_units], dtype,
              initializer=getattr(self, '_initializer', None))
          bias = tf.get_variable('bias', [4 * self._num_units], dtype,
                                 initializer=tf.zeros_initializer())
          self._vars = self._extra_variables(dtype)
          # Contrib's variable order: TF1's cell's, then mask and threshold.
          self._vars.update(masked_kernel=apply_mask(kernel), bias=bias)
      self._graph = graph
    return self._vars

  def _extra_variables(self, dtype):
    return {}

  def _gate_inputs(self, inputs, h, variables):
    return tf.nn.bias_add(
        tf.matmul(tf.concat([inputs, h], 1), variables['masked_kernel']),
        variables['bias'])


class MaskedBasicLSTMCell(_MaskedLSTM):
  """TF1's `BasicLSTMCell` with a masked kernel.

  Args:
    num_units: int, the number of units.
    forget_bias: float added to the forget gate's pre-activation.
    state_is_tuple: True for an `LSTMStateTuple(c, h)` state, False for the
      concatenation `[c, h]`.
    activation: the inner activation: a callable, or a name such as 'relu'
      (looked up in tf.nn and tf.math); default `tf.tanh`.
    reuse: reuse the variables of an existing cell of the same scope.
    name: the variable scope, default 'masked_basic_lstm_cell'.
    dtype: the variables' dtype, default the input's.
  """

  _default_name = 'masked_basic_lstm_cell'

  def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True,
               activation=None, reuse=None, name=None, dtype=None):
    super(MaskedBasicLSTMCell, self).__init__(
        num_units, forget_bias, state_is_tuple, activation, reuse, name, dtype,
        h_depth=num_units)

  def __call__(self, inputs, state, scope=None):
    """Runs one step: returns (h, new_state) for `inputs` `[batch, depth]`."""
    variables = self._variables(inputs, scope)
    # The ops, and their order, of TF1's BasicLSTMCell: the same op names.
    with tf.name_scope(self._name_scope):
      one = tf.constant(1, dtype=tf.int32)
      if self._state_is_tuple:
        c, h = state
      else:
        c, h = tf.split(value=state, num_or_size_splits=2, axis=one)
      gate_inputs = self._gate_inputs(inputs, h, variables)
      i, j, f, o = tf.split(value=gate_inputs, num_or_size_splits=4, axis=one)
      forget_bias = tf.constant(self._forget_bias, dtype=f.dtype)
      new_c = tf.add(tf.multiply(c, tf.sigmoid(tf.add(f, forget_bias))),
                     tf.multiply(tf.sigmoid(i), self._activation(j)))
      new_h = tf.multiply(self._activation(new_c), tf.sigmoid(o))
      return new_h, self._join_state(new_c, new_h)


class MaskedLSTMCell(_MaskedLSTM):
  """TF1's `LSTMCell` (peepholes, clipping, projection) with a masked kernel.

  The projection matrix is not masked. Args as TF1's `LSTMCell`:
  num_units, use_peepholes, cell_clip, initializer, num_proj, proj_clip,
  num_unit_shards and num_proj_shards (accepted, unused: the kernel is one
  variable), forget_bias, state_is_tuple, activation, reuse, name, dtype.
  """

  _default_name = 'masked_lstm_cell'

  def __init__(self, num_units, use_peepholes=False, cell_clip=None,
               initializer=None, num_proj=None, proj_clip=None,
               num_unit_shards=None, num_proj_shards=None, forget_bias=1.0,
               state_is_tuple=True, activation=None, reuse=None, name=None,
               dtype=None):
    del num_unit_shards, num_proj_shards
    super(MaskedLSTMCell, self).__init__(
        num_units, forget_bias, state_is_tuple, activation, reuse, name, dtype,
        h_depth=num_proj or num_units)
    self._use_peepholes = use_peepholes
    self._cell_clip = cell_clip
    self._initializer = initializer
    self._num_proj = num_proj
    self._proj_clip = proj_clip

  def _extra_variables(self, dtype):
    extra = {}
    if self._use_peepholes:
      for name in ('w_f_diag', 'w_i_diag', 'w_o_diag'):
        extra[name] = tf.get_variable(name, [self._num_units], dtype,
                                      initializer=self._initializer)
    if self._num_proj is not None:
      with tf.variable_scope('projection'):
        extra['projection'] = tf.get_variable(
            'kernel', [self._num_units, self._num_proj], dtype,
            initializer=self._initializer)
    return extra

  def __call__(self, inputs, state, scope=None):
    """Runs one step: returns (m, new_state) for `inputs` `[batch, depth]`."""
    variables = self._variables(inputs, scope)
    sigmoid = tf.sigmoid
    # The ops, and their order, of TF1's LSTMCell: the same op names.
    with tf.name_scope(self._name_scope):
      if self._state_is_tuple:
        c_prev, m_prev = state
      else:
        c_prev = tf.slice(state, [0, 0], [-1, self._num_units])
        m_prev = tf.slice(state, [0, self._num_units], [-1, self._h_depth])
      lstm_matrix = self._gate_inputs(inputs, m_prev, variables)
      i, j, f, o = tf.split(value=lstm_matrix, num_or_size_splits=4, axis=1)
      if self._use_peepholes:
        c = (sigmoid(f + self._forget_bias + variables['w_f_diag'] * c_prev) *
             c_prev + sigmoid(i + variables['w_i_diag'] * c_prev) *
             self._activation(j))
      else:
        c = (sigmoid(f + self._forget_bias) * c_prev +
             sigmoid(i) * self._activation(j))
      if self._cell_clip is not None:
        c = tf.clip_by_value(c, -self._cell_clip, self._cell_clip)
      if self._use_peepholes:
        m = sigmoid(o + variables['w_o_diag'] * c) * self._activation(c)
      else:
        m = sigmoid(o) * self._activation(c)
      if self._num_proj is not None:
        m = tf.matmul(m, variables['projection'])
        if self._proj_clip is not None:
          m = tf.clip_by_value(m, -self._proj_clip, self._proj_clip)
      return m, self._join_state(c, m)
