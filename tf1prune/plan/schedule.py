"""The gradual sparsity schedule of Zhu & Gupta (2017), as used by model_pruning.

    >>> from tf1prune.plan.schedule import PolynomialDecaySparsity
    >>> schedule = PolynomialDecaySparsity(0.0, 0.9, begin_step=0, end_step=100)
    >>> schedule.sparsity_at(50)
    0.7875

At step t, with p = clip((t - begin) / (end - begin), 0, 1),
`s = target + (initial - target) * (1 - p) ** exponent`: the sparsity rises fast
at first and flattens as it nears the target.

A schedule is any callable `schedule(step) -> sparsity`: `step` is the global
step as a scalar int64 tensor, the result a float scalar tensor in [0, 1].
`Pruning(spec, schedule=...)` takes one in place of the hparams' schedule, so
any other shape (constant, steps, cosine, ...) is a small class or a lambda.
A schedule may also have `with_target(target) -> schedule`, the same curve
ending at another target, for the weights of `weight_sparsity_map`; without
it they get `schedule(step) * target / target_sparsity`.
`PolynomialDecaySparsity` is the hparams' schedule; `sparsity_at` is its
pure-Python reference and `sparsity_tensor` builds the formula into the graph.
"""

import math
import numbers

import tensorflow.compat.v1 as tf

__all__ = ['PolynomialDecaySparsity', 'round_sparsity', 'sparsity_at',
           'sparsity_tensor']

# The names the checks use in their messages: the constructor's arguments, or
# the hparams they come from (`PolynomialDecaySparsity.from_hparams`).
_ARGUMENT_NAMES = ('initial_sparsity', 'target_sparsity', 'begin_step',
                   'end_step', 'exponent')
_HPARAM_NAMES = ('initial_sparsity', 'target_sparsity',
                 'sparsity_function_begin_step', 'sparsity_function_end_step',
                 'sparsity_function_exponent')


def sparsity_at(step, initial, target, begin, end, exponent):
  """Returns the scheduled sparsity at `step` as a Python float."""
  p = min(max(float(step - begin) / float(end - begin), 0.0), 1.0)
  return target + (initial - target) * (1.0 - p) ** exponent


def sparsity_tensor(step, initial, target, begin, end, exponent, name=None):
  """Returns the scheduled sparsity at the scalar int tensor `step`, float32."""
  with tf.name_scope(name, 'sparsity_schedule', [step]):
    p = tf.clip_by_value(
        tf.cast(step - begin, tf.float32) / float(end - begin), 0.0, 1.0)
    return tf.add(float(target), (float(initial) - float(target)) *
                  tf.pow(1.0 - p, float(exponent)), name='sparsity')


def _is_int(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check(names, initial, target, begin, end, exponent):
  """Raises ValueError naming the first bad value (by `names`)."""
  initial_name, target_name, begin_name, end_name, exponent_name = names
  for name, value in ((initial_name, initial), (target_name, target)):
    if not (isinstance(value, numbers.Real) and 0.0 <= value < 1.0):
      raise ValueError('%s must be in [0, 1), got %r' % (name, value))
  for name, value in ((begin_name, begin), (end_name, end)):
    if not _is_int(value):
      raise ValueError('%s must be an int, got %r' % (name, value))
  if not end > begin:
    raise ValueError('%s must be > %s=%d, got %d' %
                     (end_name, begin_name, begin, end))
  if not isinstance(exponent, numbers.Real):
    raise ValueError('%s must be a number, got %r' % (exponent_name, exponent))
  if not exponent < math.inf:
    raise ValueError('%s must be finite, got %r' % (exponent_name, exponent))
  if not exponent > 0:
    raise ValueError('%s must be > 0, got %r' % (exponent_name, exponent))


class PolynomialDecaySparsity(object):
  """Sparsity rising from `initial_sparsity` to `target_sparsity` polynomially.

  `schedule(step)` is `initial` before `begin_step`, `target` from `end_step`
  on, and in between `target + (initial - target) * (1 - p) ** exponent` with
  `p = (step - begin_step) / (end_step - begin_step)`.

  Args:
    initial_sparsity: float in [0, 1), the sparsity up to `begin_step`.
    target_sparsity: float in [0, 1), the sparsity from `end_step` on.
    begin_step, end_step: ints, `begin_step < end_step`.
    exponent: float > 0 and finite; 3 rises fast first, 1 is linear.

  Raises:
    ValueError: a value is out of range; the message names it.
  """

  def __init__(self, initial_sparsity=0.0, target_sparsity=0.5, begin_step=0,
               end_step=100, exponent=3.0):
    _check(_ARGUMENT_NAMES, initial_sparsity, target_sparsity, begin_step,
           end_step, exponent)
    self._args = (initial_sparsity, target_sparsity, begin_step, end_step,
                  exponent)

  @classmethod
  def from_hparams(cls, hparams, target_sparsity=None):
    """Returns the schedule of the `sparsity_function_*` hparams.

    Args:
      hparams: an object with `initial_sparsity`, `target_sparsity`,
        `sparsity_function_begin_step`, `sparsity_function_end_step` and
        `sparsity_function_exponent`.
      target_sparsity: optional, replaces `hparams.target_sparsity`.

    Raises:
      ValueError: a value is out of range; the message names the hparam.
    """
    if target_sparsity is None:
      target_sparsity = hparams.target_sparsity
    args = (hparams.initial_sparsity, target_sparsity,
            hparams.sparsity_function_begin_step,
            hparams.sparsity_function_end_step,
            hparams.sparsity_function_exponent)
    _check(_HPARAM_NAMES, *args)
    return cls(*args)

  @property
  def initial_sparsity(self):
    return self._args[0]

  @property
  def target_sparsity(self):
    return self._args[1]

  @property
  def begin_step(self):
    return self._args[2]

  @property
  def end_step(self):
    return self._args[3]

  @property
  def exponent(self):
    return self._args[4]

  def with_target(self, target_sparsity):
    """Returns the same schedule ending at `target_sparsity` instead.

    `Pruning` uses it for the weights of `weight_sparsity_map`.
    """
    initial, _, begin, end, exponent = self._args
    return type(self)(initial, target_sparsity, begin, end, exponent)

  def sparsity_at(self, step):
    """Returns the sparsity at the int `step` as a Python float."""
    return sparsity_at(step, *self._args)

  def __call__(self, step):
    """Returns the sparsity at the scalar int tensor `step`, float32."""
    return sparsity_tensor(step, *self._args)

  def __eq__(self, other):
    return type(other) is type(self) and other._args == self._args

  def __ne__(self, other):
    return not self == other

  def __hash__(self):
    return hash(self._args)

  def __repr__(self):
    return ('PolynomialDecaySparsity(initial_sparsity=%r, target_sparsity=%r, '
            'begin_step=%r, end_step=%r, exponent=%r)' % self._args)


def round_sparsity(round_index, rate):
  """Returns the sparsity after `round_index` rounds pruning `rate` of the rest.

  `1 - (1 - rate) ** round_index`: rate 0.2 gives 0.2, 0.36, 0.488, ...

  Raises:
    ValueError: `rate` is not in [0, 1) or `round_index` is negative.
  """
  if not 0.0 <= rate < 1.0:
    raise ValueError('rate must be in [0, 1), got %r' % (rate,))
  if round_index < 0:
    raise ValueError('round_index must be >= 0, got %r' % (round_index,))
  return 1.0 - (1.0 - rate) ** round_index
