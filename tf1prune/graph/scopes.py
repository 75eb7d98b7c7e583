"""Patch a model without rewriting it: mask (or lock) variables as they are made.

    >>> import tensorflow.compat.v1 as tf, tf_slim as slim, tf1prune
    >>> with tf.Graph().as_default():
    ...   images = tf.zeros([2, 8, 8, 3])
    ...   with tf1prune.pruning_scope():          # the model code is unchanged
    ...     net = slim.conv2d(images, 16, 3, scope='conv1')
    ...     net = slim.fully_connected(slim.flatten(net), 10, scope='logits')
    ...   [m.op.name for m in tf1prune.get_masks()]
    ['conv1/mask', 'logits/mask']

`pruning_scope()` opens a `variable_scope` with a custom getter: every
variable made by `tf.get_variable` inside it (directly, or by tf-slim layers,
which call it) whose name matches `pattern` and whose rank is at least
`min_rank` is passed through `apply_mask`, and the model receives
`mask * weight` instead of the variable. The raw variable is created exactly as
before (same name, initializer, regularizer, collections, trainable), so
optimizers train it, regularizers see it and old checkpoints restore; the new
`mask` and `threshold` variables sit next to it: `conv1/weights` gets
`conv1/mask`, the names `masked_conv2d` uses. The default pattern also takes
the pointwise kernels of separable convs (`slim.separable_conv2d`'s
`sep/pointwise_weights`, `tf.layers`' `pointwise_kernel`), so NASNet's and
MobileNet's 1x1 convs are masked with the rest. A weight not named `weights`
or `kernel` gets `<its name>/mask` (`w1` -> `w1/mask`,
`sep/pointwise_weights` -> `sep/pointwise_weights/mask`), so two matching
variables in one scope never share a mask.

`locking_scope({regex: lock arguments})` does the same with `lock`, so
`W_conv2[:, :, 29, 13]` can be pinned in a model built by layers:

    with tf1prune.locking_scope({'conv2/weights$': dict(index=np.s_[:, :, 29, 13],
                                                        value='zero')}):
      logits = model(images)

Only `tf.get_variable` is patched: variables made with `tf.Variable(...)` are
not seen. Under `reuse=True` the existing mask or lock is used again.
"""

import contextlib
import re
import threading

import tensorflow.compat.v1 as tf

from tf1prune.graph.locks import lock
from tf1prune.graph.masking import apply_mask

__all__ = ['DEFAULT_PATTERN', 'locking_scope', 'pruning_scope']

DEFAULT_PATTERN = (r'(^|/)(weights|kernel|pointwise_weights|'
                   r'pointwise_kernel)$')
_CONVENTIONAL = ('weights', 'kernel')
_busy = threading.local()


def _compile(argument, pattern):
  try:
    return re.compile(pattern)
  except (re.error, TypeError) as e:
    raise ValueError('%s must be a regex, got %r (%s)' % (argument, pattern, e))


def _relative(name):
  """`name` relative to the current variable scope (where get_variable ran)."""
  current = tf.get_variable_scope().name
  if current and name.startswith(current + '/'):
    return name[len(current) + 1:]
  return name


def _owner_scope(name):
  """The scope, relative to the current one, for the extra variables of `name`.

  `a/b/weights` -> `a/b` (contrib's layout: `a/b/mask`); `a/w1` -> `a/w1`.
  """
  relative = _relative(name)
  parent, _, base = relative.rpartition('/')
  return parent if base in _CONVENTIONAL else relative


@contextlib.contextmanager
def _at_scope(relative):
  """Enters `relative` below the current variable scope, reuse=AUTO_REUSE.

  The name scope is the variable scope's (absolute), whatever name scope the
  layer calling get_variable had open: the masked weight of `conv1/weights`
  is `conv1/weights/masked_weight`.
  """
  current = tf.get_variable_scope()
  with tf.variable_scope(current, reuse=tf.AUTO_REUSE,
                         auxiliary_name_scope=False):
    if relative:
      with tf.variable_scope(relative, reuse=tf.AUTO_REUSE,
                             auxiliary_name_scope=False) as scope:
        with tf.name_scope(scope.name + '/'):
          yield
    elif current.name:
      with tf.name_scope(current.name + '/'):
        yield
    else:
      yield


def _patched_getter(wrap, match):
  """A custom getter returning `wrap(variable)` for the variables `match` takes."""

  def custom_getter(getter, name, *args, **kwargs):
    var = getter(name, *args, **kwargs)
    if getattr(_busy, 'active', False) or not match(name, var, kwargs):
      return var
    _busy.active = True
    try:
      with _at_scope(_owner_scope(name)):
        return wrap(name, var)
    finally:
      _busy.active = False

  return custom_getter


def _is_candidate(var, kwargs, min_rank):
  shape = var.get_shape()
  trainable = kwargs.get('trainable')
  return (var.dtype.base_dtype.is_floating and shape.ndims is not None and
          shape.ndims >= min_rank and trainable is not False)


@contextlib.contextmanager
def pruning_scope(pattern=DEFAULT_PATTERN, exclude=None, min_rank=2):
  """Masks every matching variable that `tf.get_variable` creates inside.

  Args:
    pattern: regex searched in the variable's full name; default
      `DEFAULT_PATTERN`, `(^|/)(weights|kernel|pointwise_weights|
      pointwise_kernel)$`: the kernels of slim, contrib and tf.layers, and
      the 1x1 (pointwise) kernels of their separable convs. Depthwise
      kernels (`depthwise_weights`) are left dense: a channel goes where
      the pointwise filter that feeds it is empty.
    exclude: optional regex; matching names are left alone (e.g. 'logits').
    min_rank: only variables of at least this rank (2: no biases, no
      batch-norm scales). Non-float and `trainable=False` variables are never
      masked.

  Yields:
    A list that fills with the names of the masked variables.

  Raises:
    ValueError: `pattern` or `exclude` is not a valid regex, or `min_rank` is
      not an int >= 1.
  """
  regex = _compile('pattern', pattern)
  skip = _compile('exclude', exclude) if exclude is not None else None
  if not isinstance(min_rank, int) or isinstance(min_rank, bool) or min_rank < 1:
    raise ValueError('min_rank must be an int >= 1, got %r' % (min_rank,))
  masked = []

  def match(name, var, kwargs):
    return (regex.search(name) is not None and
            (skip is None or skip.search(name) is None) and
            _is_candidate(var, kwargs, min_rank))

  def wrap(name, var):
    masked.append(name)
    return apply_mask(var)

  with tf.variable_scope(tf.get_variable_scope(),
                         custom_getter=_patched_getter(wrap, match),
                         auxiliary_name_scope=False):
    yield masked


@contextlib.contextmanager
def locking_scope(locks):
  """Locks entries of the variables `tf.get_variable` creates inside.

  Args:
    locks: dict regex -> dict of `lock` keyword arguments (`index`, `mask`,
      `value`). A variable matched by two regexes is an error. The lock's
      variables go to `<scope>/lock_mask` etc. as for the masks of
      `pruning_scope`. Inside a `pruning_scope`, the lock wraps the masked
      weight (`lock(apply_mask(w))`).

  Yields:
    A list that fills with the names of the locked variables.

  Raises:
    ValueError: `locks` is not a dict of regex -> dict, an argument is not
      one of `lock`'s, or (while the model is built) a variable matches two
      regexes.
  """
  if not isinstance(locks, dict):
    raise ValueError('locks must be a dict regex -> lock arguments, got %r'
                     % (locks,))
  entries = []
  for pattern, arguments in sorted(locks.items()):
    if not isinstance(arguments, dict):
      raise ValueError('locks[%r] must be a dict of lock arguments (index=, '
                       'mask=, value=), got %r' % (pattern, arguments))
    unknown = sorted(set(arguments) - {'index', 'mask', 'value'})
    if unknown:
      raise ValueError('locks[%r] has unknown arguments %s; allowed: index, '
                       'mask, value' % (pattern, unknown))
    entries.append((_compile('locks key', pattern), arguments))
  locked, seen, used = [], [], set()

  def hits(name):
    found = [(r, a) for r, a in entries if r.search(name)]
    used.update(r.pattern for r, _ in found)
    if len(found) > 1:
      raise ValueError('variable %s matches several locking_scope regexes: %s; '
                       'make them exclusive' % (name, ', '.join(
                           r.pattern for r, _ in found)))
    return found

  def match(name, var, kwargs):
    seen.append(name)
    return bool(hits(name))

  def wrap(name, var):
    locked.append(name)
    return lock(var, **hits(name)[0][1])

  with tf.variable_scope(tf.get_variable_scope(),
                         custom_getter=_patched_getter(wrap, match),
                         auxiliary_name_scope=False):
    yield locked
  unused = sorted(r.pattern for r, _ in entries if r.pattern not in used)
  if unused:
    made = ', '.join(seen[:20]) + (
        ' and %d more' % (len(seen) - 20) if len(seen) > 20 else '')
    tf.logging.warning(
        'locking_scope regexes %s match no variable made inside it, so they '
        'lock nothing; the variables made were: %s', unused, made or 'none')
