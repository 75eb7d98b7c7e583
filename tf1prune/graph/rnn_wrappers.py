"""Stacking, dropout and residual cells of TF1 for the masked LSTMs, on any stack.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   cell = tf1prune.MultiRNNCell([tf1prune.MaskedBasicLSTMCell(8),
    ...                                 tf1prune.MaskedBasicLSTMCell(8)])
    ...   out, state = tf.nn.dynamic_rnn(cell, tf.zeros([2, 5, 3]), dtype=tf.float32)
    ...   out.shape.as_list(), [m.op.name for m in tf1prune.get_masks()]
    ([2, 5, 8], ['rnn/multi_rnn_cell/cell_0/masked_basic_lstm_cell/mask', 'rnn/multi_rnn_cell/cell_1/masked_basic_lstm_cell/mask'])

TF1's `MultiRNNCell`, `DropoutWrapper` and `ResidualWrapper` (of the
compat.v1 `rnn_cell` module) are Keras layers and raise under Keras 3 (TF
2.16+). These
are plain objects with the RNNCell protocol (`state_size`, `output_size`,
`zero_state`, `__call__`), built on `tf.nn` and `get_variable` only, with the
variable names and op names of TF1's: the cells of a `MultiRNNCell` live in
`<scope>/multi_rnn_cell/cell_<i>/`, so a TF 1.15 checkpoint of the same
stack restores. They work with `tf.compat.v1.nn.dynamic_rnn` and `static_rnn`
on TF 1.15 and TF 2.x, around the masked cells or around each other.
"""

import hashlib
import numbers

import tensorflow.compat.v1 as tf

from tf1prune.graph.rnn_cells import zeros_for

__all__ = ['DropoutWrapper', 'MultiRNNCell', 'ResidualWrapper']


def _flatten(structure):
  return tf.nest.flatten(structure)


def _is_lstm_state(value):
  """True for an (c, h) LSTM state tuple, ours or TF's."""
  return isinstance(value, tuple) and getattr(value, '_fields', None) == ('c', 'h')


class MultiRNNCell(object):
  """TF1's `MultiRNNCell`: runs `cells` one after the other at each step.

  Args:
    cells: a non-empty list of cells; cell `i` gets its variables in the
      variable scope `cell_<i>` (TF1's layout).
    state_is_tuple: True (default): the state is a tuple of the cells'
      states; False: their concatenation (every cell's state must then be
      a single int size).

  Raises:
    ValueError: `cells` is empty or not a list, or `state_is_tuple=False`
      with a cell whose state is a tuple.
  """

  def __init__(self, cells, state_is_tuple=True):
    if not isinstance(cells, (list, tuple)) or not cells:
      raise ValueError('cells must be a non-empty list of RNN cells, got %r'
                       % (cells,))
    self._cells = list(cells)
    self._state_is_tuple = state_is_tuple
    if not state_is_tuple:
      nested = [c for c in self._cells
                if not isinstance(c.state_size, numbers.Integral)]
      if nested:
        raise ValueError('MultiRNNCell(state_is_tuple=False) needs cells whose '
                         'state_size is an int; %s has %r. Pass '
                         'state_is_tuple=False to the cells too, or keep '
                         'state_is_tuple=True.' % (type(nested[0]).__name__,
                                                   nested[0].state_size))
    self._scope = None
    self._graph = None

  @property
  def state_size(self):
    if self._state_is_tuple:
      return tuple(cell.state_size for cell in self._cells)
    return sum(cell.state_size for cell in self._cells)

  @property
  def output_size(self):
    return self._cells[-1].output_size

  def zero_state(self, batch_size, dtype):
    """Returns the zero state of every cell (tuple or concatenated)."""
    with tf.name_scope(type(self).__name__ + 'ZeroState'):
      if self._state_is_tuple:
        return tuple(cell.zero_state(batch_size, dtype) for cell in self._cells)
      with tf.name_scope(type(self).__name__ + 'ZeroState'):  # TF1: twice
        return zeros_for(batch_size, self.state_size, dtype)

  def _enter_scope(self, scope):
    """The variable scope, fixed at the first call in a graph as TF1 did."""
    with tf.init_scope():
      graph = tf.get_default_graph()
    if self._graph is not graph:
      with tf.variable_scope(scope, default_name='multi_rnn_cell') as entered:
        self._scope = entered
      self._graph = graph
    return self._scope

  def __call__(self, inputs, state, scope=None):
    """Runs every cell for one step: returns (last output, new state)."""
    if scope is None:
      # TF1's RNNCell re-entered the caller's variable scope (a name scope).
      with tf.variable_scope(tf.get_variable_scope()):
        return self._call(inputs, state, None)
    return self._call(inputs, state, scope)

  def _call(self, inputs, state, scope):
    var_scope = self._enter_scope(scope)
    if self._state_is_tuple and (not isinstance(state, (list, tuple)) or
                                 len(state) != len(self._cells)):
      raise ValueError('Expected state to be a tuple of length %d, but '
                       'received: %s' % (len(self._cells), state))
    with tf.variable_scope(var_scope, auxiliary_name_scope=False):
      with tf.name_scope(var_scope.original_name_scope):
        position = 0
        output = inputs
        new_states = []
        for i, cell in enumerate(self._cells):
          with tf.variable_scope('cell_%d' % i):
            if self._state_is_tuple:
              cell_state = state[i]
            else:
              cell_state = tf.slice(state, [0, position], [-1, cell.state_size])
              position += cell.state_size
            output, new_state = cell(output, cell_state)
            new_states.append(new_state)
        if self._state_is_tuple:
          return output, tuple(new_states)
        return output, tf.concat(new_states, 1)


def _check_keep_prob(name, value):
  if isinstance(value, numbers.Real) and not isinstance(value, bool):
    if not 0.0 < value <= 1.0:
      raise ValueError('%s must be in (0, 1], got %r' % (name, value))
  elif not isinstance(value, (tf.Tensor, tf.Variable)):
    raise ValueError('%s must be a float in (0, 1] or a scalar tensor, got %r'
                     % (name, value))


def _default_state_filter(substate):
  """TF1's default: no dropout on an LSTM's cell state `c`, only on `h`."""
  if _is_lstm_state(substate):
    return type(substate)(c=False, h=True)
  return True


class _Wrapper(object):
  """Passes the protocol through to the wrapped cell."""

  def __init__(self, cell):
    if not callable(cell) or not hasattr(cell, 'state_size'):
      raise ValueError('cell must be an RNN cell (with state_size, '
                       'output_size, zero_state and __call__), got %r'
                       % (cell,))
    self._cell = cell

  @property
  def wrapped_cell(self):
    return self._cell

  @property
  def state_size(self):
    return self._cell.state_size

  @property
  def output_size(self):
    return self._cell.output_size

  def zero_state(self, batch_size, dtype):
    """The wrapped cell's zero state, in TF1's name scope."""
    with tf.name_scope(type(self).__name__ + 'ZeroState'):
      return self._cell.zero_state(batch_size, dtype)


class DropoutWrapper(_Wrapper):
  """TF1's `DropoutWrapper`: dropout on the inputs, outputs and new state.

  Args:
    cell: the wrapped cell.
    input_keep_prob, output_keep_prob, state_keep_prob: float in (0, 1] or a
      scalar tensor; a float 1.0 adds no dropout op. The state is dropped
      where `dropout_state_filter_visitor` says (default: an LSTM state's `h`
      but not its `c`, as TF1).
    variational_recurrent: only False is supported (see Raises).
    input_size, dtype: accepted for TF1's signature (used by TF1 only for
      variational dropout).
    seed: optional int; each dropout op gets a seed derived from it as TF1's.
    dropout_state_filter_visitor: optional callable, substate -> bool or a
      structure of bools, as in TF1.

  Raises:
    ValueError: a keep probability outside (0, 1], or
      `variational_recurrent=True` (not provided: use
      `tf.nn.dropout` with a fixed `noise_shape` in the model instead).
  """

  def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0,
               state_keep_prob=1.0, variational_recurrent=False,
               input_size=None, dtype=None, seed=None,
               dropout_state_filter_visitor=None):
    super(DropoutWrapper, self).__init__(cell)
    del input_size, dtype
    if variational_recurrent:
      raise ValueError('DropoutWrapper(variational_recurrent=True) is not '
                       'provided by tf1prune; use variational_recurrent=False, '
                       'or tf.nn.dropout with a noise_shape in the model')
    probs = {}
    # TF1 made these constants (op names), and took a constant tensor as a
    # float.
    with tf.name_scope('DropoutWrapperInit'):
      for name, value in (('input_keep_prob', input_keep_prob),
                          ('output_keep_prob', output_keep_prob),
                          ('state_keep_prob', state_keep_prob)):
        _check_keep_prob(name, value)
        constant = tf.get_static_value(tf.convert_to_tensor(value))
        probs[name] = value if constant is None else float(constant)
        _check_keep_prob(name, probs[name])
    if (dropout_state_filter_visitor is not None and
        not callable(dropout_state_filter_visitor)):
      raise ValueError('dropout_state_filter_visitor must be callable, got %r'
                       % (dropout_state_filter_visitor,))
    self._input_keep_prob = probs['input_keep_prob']
    self._output_keep_prob = probs['output_keep_prob']
    self._state_keep_prob = probs['state_keep_prob']
    self._seed = seed
    self._state_filter = dropout_state_filter_visitor or _default_state_filter

  def _gen_seed(self, salt_prefix, index):
    if self._seed is None:
      return None
    text = (str(self._seed) + '%s_%d' % (salt_prefix, index)).encode('utf-8')
    return int(hashlib.md5(text).hexdigest()[:8], 16) & 0x7FFFFFFF

  def _dropout(self, values, salt_prefix, keep_prob, keep=None):
    flat = _flatten(values)
    flags = [True] * len(flat) if keep is None else keep
    dropped = []
    for i, (value, flag) in enumerate(zip(flat, flags)):
      if flag:
        value = tf.nn.dropout(value, rate=1.0 - keep_prob,
                              seed=self._gen_seed(salt_prefix, i))
      dropped.append(value)
    return tf.nest.pack_sequence_as(values, dropped)

  def _state_flags(self, state):
    """One bool per flat tensor of `state`: drop it or not."""
    flags = []

    def visit(substate):
      decision = self._state_filter(substate)
      if isinstance(decision, bool):
        flags.extend([decision] * len(_flatten(substate)))
      elif _is_lstm_state(substate) or isinstance(substate, (list, tuple)):
        for part, part_decision in zip(substate, decision):
          if isinstance(part_decision, bool):
            flags.extend([part_decision] * len(_flatten(part)))
          else:
            visit(part)
      else:
        flags.append(bool(decision))

    visit(state)
    return flags

  def __call__(self, inputs, state, scope=None):
    """Runs the wrapped cell with dropout: returns (output, new_state)."""

    def active(keep_prob):
      return not isinstance(keep_prob, float) or keep_prob < 1

    if active(self._input_keep_prob):
      inputs = self._dropout(inputs, 'input', self._input_keep_prob)
    output, new_state = self._cell(inputs, state, scope=scope)
    if active(self._state_keep_prob):
      new_state = self._dropout(new_state, 'state', self._state_keep_prob,
                                self._state_flags(new_state))
    if active(self._output_keep_prob):
      output = self._dropout(output, 'output', self._output_keep_prob)
    return output, new_state


class ResidualWrapper(_Wrapper):
  """TF1's `ResidualWrapper`: the output is `inputs + cell output`.

  Args:
    cell: the wrapped cell; its output must have the inputs' shape.
    residual_fn: optional `(inputs, outputs) -> outputs`, default the sum.
  """

  def __init__(self, cell, residual_fn=None):
    super(ResidualWrapper, self).__init__(cell)
    self._residual_fn = residual_fn

  def __call__(self, inputs, state, scope=None):
    """Runs the wrapped cell: returns (inputs + output, new_state)."""
    output, new_state = self._cell(inputs, state, scope=scope)
    if self._residual_fn is not None:
      return self._residual_fn(inputs, output), new_state
    tf.nest.assert_same_structure(inputs, output)
    for x, y in zip(_flatten(inputs), _flatten(output)):
      if not x.get_shape().is_compatible_with(y.get_shape()):
        raise ValueError('ResidualWrapper needs the cell output shaped like '
                         'its input, got %s and %s; make the cell\'s '
                         'num_units the input depth' % (x.get_shape(),
                                                        y.get_shape()))
    return tf.nest.map_structure(lambda x, y: x + y, inputs, output), new_state
