"""Keras (TF 2.x) integration: locks, magnitude pruning, lottery tickets, export.

    >>> import numpy as np, keras, tf1prune.keras as tk
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> _ = model.layers[0].kernel.assign(np.arange(1., 13.).reshape(4, 3))
    >>> pruner = tk.Pruner(model, 'target_sparsity=0.5')
    >>> _ = pruner.update(sparsity=0.5)      # exact top-k, as tf1prune.Pruning
    >>> int(np.count_nonzero(model.layers[0].kernel))
    6

Works with Keras 3 (the `keras` package, TensorFlow backend) and tf_keras
(Keras 2; TensorFlow's `tf.keras` is tf_keras when `TF_USE_LEGACY_KERAS=1`):
each function looks at the model it gets. Importing `tf1prune` never imports
this package or Keras; importing this package imports the Keras `tf.keras`
stands for and registers tf1prune's pin class with it, so locked models
load with `load_model`. On TensorFlow 1.x importing it raises ImportError.
docs/keras.md has the guide.
"""

from tf1prune.keras._version import check_tensorflow as _check_tensorflow

_check_tensorflow()

# These modules import no Keras at import time either: each function gets
# the Keras module from the model it is given (tf1prune.keras._version).
from tf1prune.keras._export import (export_frozen_pb, export_saved_model,  # noqa: E402
                                    strip_model, strip_report)
from tf1prune.keras._locks import apply_pins, lock, locked_entries, unlock  # noqa: E402
from tf1prune.keras._lottery import LotteryTicket, round_sparsity  # noqa: E402
from tf1prune.keras._pruning import Pruner, PruningCallback  # noqa: E402
from tf1prune.keras.shrink.model import shrink_model  # noqa: E402
from tf1prune.keras import _pin as _pin_module, _version as _version_module  # noqa: E402,I100


def _register_default_keras():
  """Pins load with `load_model` of the Keras `tf.keras` stands for."""
  try:
    _pin_module.register(_version_module.default_keras())
  except (ImportError, ValueError):
    pass   # no supported Keras installed: each function says so when called


_register_default_keras()

__all__ = ['LotteryTicket', 'Pruner', 'PruningCallback', 'apply_pins',
           'export_frozen_pb', 'export_saved_model', 'lock', 'locked_entries',
           'round_sparsity', 'shrink_model', 'strip_model', 'strip_report',
           'unlock']
