"""Which Keras a model belongs to, and whether tf1prune.keras supports it.

    >>> from tf1prune.keras._version import check_keras_version
    >>> check_keras_version('keras', '3.15.1')
    'keras'

tf1prune.keras works with the Keras a model was built with: Keras 3 (the
`keras` package, TensorFlow backend), or tf_keras (Keras 2, the package
TensorFlow 2.16+ uses when `TF_USE_LEGACY_KERAS=1`). Nothing is chosen at
import time: each model is looked at through its class. Functions that get no
model use `default_keras()`: tf_keras when `TF_USE_LEGACY_KERAS` is 1/true,
else Keras 3, as `tf.keras` itself does.
"""

import importlib
import os

import tensorflow as tf

__all__ = ['check_keras_version', 'check_tensorflow', 'default_keras',
           'keras_of']

_UNSUPPORTED = ('tf1prune.keras supports Keras 3 (keras>=3.0 with the '
                'TensorFlow backend) and tf_keras>=2.13; got {name} {version}. '
                'Install keras>=3 or tf_keras matching your TensorFlow '
                '(pip install "tf_keras~={tf}") and build the model with it.')


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


def check_keras_version(name, version):
  """Returns `name` if that Keras is supported, else raises ValueError.

  Args:
    name: 'keras' (Keras 3) or 'tf_keras' (Keras 2).
    version: its version string, e.g. '3.15.1'.
  """
  parts = [int(p) for p in version.split('.')[:2] if p.isdigit()]
  major_minor = tuple(parts + [0, 0])[:2]
  ok = ((name == 'keras' and major_minor >= (3, 0)) or
        (name == 'tf_keras' and major_minor >= (2, 13)))
  if not ok:
    raise ValueError(_UNSUPPORTED.format(
        name=name, version=version,
        tf='.'.join(tf.__version__.split('.')[:2])))
  return name


def _module(name):
  module = importlib.import_module(name)
  check_keras_version(name, module.__version__)
  if name == 'keras' and module.backend.backend() != 'tensorflow':
    raise ValueError('tf1prune.keras needs the TensorFlow backend of Keras 3; '
                     'KERAS_BACKEND is %r. Set KERAS_BACKEND=tensorflow before '
                     'importing keras.' % module.backend.backend())
  return module


def default_keras():
  """The Keras module `tf.keras` stands for: tf_keras or keras (Keras 3)."""
  legacy = os.environ.get('TF_USE_LEGACY_KERAS', '').lower() in ('1', 'true')
  return _module('tf_keras' if legacy else 'keras')


def keras_of(obj):
  """Returns the Keras module (keras or tf_keras) that `obj`'s class is from.

  Raises:
    ValueError: `obj` is no Keras object, or its Keras is not supported.
  """
  for cls in type(obj).__mro__:
    root = cls.__module__.split('.')[0]
    if root in ('keras', 'tf_keras'):
      return _module(root)
  raise ValueError('expected a Keras model or layer (Keras 3 or tf_keras), got '
                   '%r of type %s' % (obj, type(obj).__name__))
