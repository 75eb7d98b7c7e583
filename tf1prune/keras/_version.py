"""Which Keras a model belongs to, and whether tf1prune.keras supports it.

    >>> from tf1prune.keras._version import check_keras_version
    >>> check_keras_version('keras', '3.15.1')
    'keras'
    >>> check_keras_version('keras', '2.15.0')      # tf.keras of TF 2.15
    'keras'

tf1prune.keras works with the Keras a model was built with; nothing is chosen
at import time. Each function looks at the class of the model it is given:

* a class from the `keras` package: Keras 3 (`keras>=3`, TensorFlow backend)
  or Keras 2 (`keras` 2.x, which is what `tf.keras` is on TensorFlow 2.x up to
  2.15);
* a class from the `tf_keras` package: Keras 2 as TensorFlow 2.16+ ships it
  (`tf.keras` is tf_keras when `TF_USE_LEGACY_KERAS=1`).

Keras 2 is supported from `MIN_KERAS2` on (the `tf.keras` of TensorFlow
`MIN_TENSORFLOW`); older ones, TensorFlow's built-in `tensorflow.python.keras`
(TF <= 2.5) and Keras 3 on another backend raise ValueError naming the version
and the fix. Functions that get no model use `default_keras()`: the module
`tf.keras` stands for.
"""

import importlib
import os

import tensorflow as tf

__all__ = ['MIN_KERAS2', 'MIN_TENSORFLOW', 'check_keras_version',
           'check_tensorflow', 'default_keras', 'is_keras3', 'keras_of']

MIN_KERAS2 = (2, 10)
MIN_TENSORFLOW = '2.10'

_UNSUPPORTED = ('tf1prune.keras supports Keras 3 (keras>=3.0 with the '
                'TensorFlow backend) and Keras 2 from 2.10 on (tf.keras of '
                'TensorFlow 2.10 to 2.15, or tf_keras); got {name} {version}. '
                'Upgrade TensorFlow to 2.10 or later (pip install '
                '"tensorflow>=2.10"){tf_keras}')
# tf_keras is published from 2.14 on, one release per TensorFlow minor.
_TF_KERAS = (', or install tf_keras matching your TensorFlow (pip install '
             '"tf_keras~={tf}") and build the model with it.')
MIN_TF_KERAS = (2, 14)


def check_tensorflow(version=None):
  """Raises ImportError unless TensorFlow is 2.x.

  Args:
    version: the TensorFlow version string; default the installed one.
  """
  version = version or tf.__version__
  if int(version.split('.')[0]) < 2:
    raise ImportError(
        'tf1prune.keras needs TensorFlow 2.x with Keras 3 or tf_keras; this is '
        'TensorFlow %s. On TensorFlow 1.x use the graph-mode API '
        '(import tf1prune: apply_mask, Pruning, lock, LotteryTicket).' % version)


def _major_minor(version):
  parts = []
  for part in version.split('.')[:2]:
    digits = ''.join(c for c in part if c.isdigit())
    parts.append(int(digits) if digits else 0)
  return tuple(parts + [0, 0])[:2]


def check_keras_version(name, version, tf_version=None):
  """Returns `name` if that Keras is supported, else raises ValueError.

  Args:
    name: 'keras' (Keras 3, or Keras 2 up to 2.15) or 'tf_keras' (Keras 2).
    version: its version string, e.g. '3.15.1' or '2.15.0'.
    tf_version: the TensorFlow version for the advice; default the
      installed one (tf_keras is suggested only where it exists for it).
  """
  ok = (name in ('keras', 'tf_keras') and
        _major_minor(version) >= MIN_KERAS2)
  if not ok:
    tf_version = tf_version or tf.__version__
    tf_minor = '.'.join(tf_version.split('.')[:2])
    raise ValueError(_UNSUPPORTED.format(
        name=name, version=version, tf_keras=(
            _TF_KERAS.format(tf=tf_minor)
            if _major_minor(tf_version) >= MIN_TF_KERAS else '.')))
  return name


def is_keras3(keras):
  """True for the Keras 3 module, False for a Keras 2 one."""
  return _major_minor(keras.__version__) >= (3, 0)


def _module(name):
  module = importlib.import_module(name)
  check_keras_version(name, module.__version__)
  if is_keras3(module) and module.backend.backend() != 'tensorflow':
    raise ValueError('tf1prune.keras needs the TensorFlow backend of Keras 3; '
                     'KERAS_BACKEND is %r. Set KERAS_BACKEND=tensorflow before '
                     'importing keras.' % module.backend.backend())
  return module


def default_keras():
  """The Keras module `tf.keras` stands for: tf_keras, or keras (3 or 2).

  tf_keras when `TF_USE_LEGACY_KERAS` is 1/true (TensorFlow 2.16+'s switch),
  else the `keras` package: Keras 3 on TensorFlow 2.16+, Keras 2 before.
  """
  legacy = os.environ.get('TF_USE_LEGACY_KERAS', '').lower() in ('1', 'true')
  return _module('tf_keras' if legacy else 'keras')


def keras_of(obj):
  """Returns the Keras module (keras or tf_keras) that `obj`'s class is from.

  Raises:
    ValueError: `obj` is no Keras object, or its Keras is not supported.
  """
  for cls in type(obj).__mro__:
    module = cls.__module__
    root = module.split('.')[0]
    if root in ('keras', 'tf_keras'):
      return _module(root)
    if module.startswith('tensorflow.python.keras.'):
      raise ValueError(_UNSUPPORTED.format(
          name='tensorflow.python.keras (the Keras built into TensorFlow)',
          version=tf.__version__, tf='.'.join(tf.__version__.split('.')[:2])))
  raise ValueError('expected a Keras model or layer (Keras 3, Keras 2 or '
                   'tf_keras), got %r of type %s' % (obj, type(obj).__name__))
