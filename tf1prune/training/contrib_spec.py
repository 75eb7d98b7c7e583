"""contrib's `Pruning._spec`: the hparams, read and set by attribute.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   _ = tf.train.get_or_create_global_step()
    ...   p = tf1prune.Pruning(tf1prune.get_pruning_hparams())
    ...   p._spec.threshold_decay = 0.5          # as contrib's tests do
    ...   p._spec.sparsity_function_end_step, p.pruning_spec.threshold_decay
    (100, 0.5)

In contrib, `Pruning._spec` was the `tf.HParams` object itself, and contrib's
tests (and code written after them) read hparams from it and set them before
building the update ops. tf1prune parses the hparams once into a
`tf1prune.PruningSpec`; `HParamsView` gives the old access on top of it:
every hparam name reads its parsed value, a set is checked like a parse
(`reparse`) and handed to the owner, which derives its spec again. Other
attribute names read the `PruningSpec`'s (`schedule`, `weight(...)`, ...).
"""

from tf1prune.plan.hparams import HParams
from tf1prune.plan.spec import PruningSpec

__all__ = ['HParamsView', 'reparse']


def reparse(parsed, name, value):
  """Returns the `PruningSpec` of `parsed`'s hparams with `name` set to `value`.

  Raises:
    ValueError: `name` is no hparam, or the value fails the checks of
      `PruningSpec.from_hparams` (the message names the hparam).
  """
  values = parsed.values()
  if name not in values:
    raise ValueError('unknown hparam %s (set on Pruning._spec to %r); the '
                     'hparams are those of get_pruning_hparams(): %s'
                     % (name, value, ', '.join(sorted(values))))
  values[name] = list(value) if isinstance(value, (list, tuple)) else value
  return PruningSpec.from_hparams(HParams(**values))


class HParamsView(object):
  """The hparams of a `PruningSpec`, by attribute; sets go to `setter`.

  Args:
    parsed: `parsed()` returns the current `PruningSpec`.
    setter: `setter(name, value)`, called for every attribute set.
  """

  def __init__(self, parsed, setter):
    object.__setattr__(self, '_parsed', parsed)
    object.__setattr__(self, '_setter', setter)

  def __getattr__(self, name):
    parsed = self._parsed()
    values = parsed.values()
    if name in values:
      return values[name]
    return getattr(parsed, name)

  def __setattr__(self, name, value):
    self._setter(name, value)

  def set_hparam(self, name, value):
    """As `HParams.set_hparam`: the same as setting the attribute."""
    self._setter(name, value)

  def __contains__(self, name):
    return name in self._parsed().values()

  def __repr__(self):
    return 'HParams(%s)' % ', '.join(
        '%s=%r' % item for item in sorted(self._parsed().values().items()))
