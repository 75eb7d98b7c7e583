"""Setup of the Keras tests: eager mode, a cleared Keras session per test.

The Keras tests need eager execution: unlike the other folders of tests/,
this one imports no tests/support/graph_mode.py. Eager mode cannot be
turned back on in a process that ran graph-mode code, so these tests run in
a pytest process of their own (`pytest tests/keras`; bin/run_tests does it);
in a process where graph-mode tests ran first, they skip.
"""

import gc

import pytest
import tensorflow as tf

from tests.support import keras_models


@pytest.fixture(autouse=True)
def keras_session():
  """A new Keras session for each test (TF 2.x).

  What the earlier tests left alive (TensorFlow's and Keras' caches of
  their models and functions) is frozen out of the garbage collector once
  their garbage is collected: otherwise every later collection, Keras 3's
  `clear_session()` and the automatic ones while a model is built, walks
  all of it again, and the tests at the end of the run take several times
  as long as they do alone."""
  if keras_models.TF2:
    if not tf.executing_eagerly():
      pytest.skip(keras_models.REASON_GRAPH)
    keras_models.keras_module().backend.clear_session()
    gc.collect()
    gc.freeze()
  yield
