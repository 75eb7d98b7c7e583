"""tf1prune.keras: docstring and docs examples run; TF 1.x gets a clear error.

The ```python blocks of the docs pages marked as eager (docs_pages.EAGER, e.g.
docs/keras.md) run here, in order in one fresh process, on the Keras that
tf.keras stands for; tests/package/test_docs.py leaves those pages out.
"""

import doctest
import importlib
import os
import pkgutil
import subprocess
import sys

import pytest
import tensorflow as tf

from tests.support.checkout import ROOT
from tests.support.docs_pages import EAGER, PAGES, read, run_blocks, runnable
from tests.support.keras_models import TF2, keras_module

_VERSION = 'tf1prune.keras._version'


@pytest.mark.skipif(TF2, reason='checks the TF 1.x error; this is TF 2.x')
def test_import_on_tf1_raises_a_clear_import_error():
  with pytest.raises(ImportError) as e:
    importlib.import_module('tf1prune.keras')
  assert str(e.value) == (
      'tf1prune.keras needs TensorFlow 2.x with Keras 3 or tf_keras; this is '
      'TensorFlow %s. On TensorFlow 1.x use the graph-mode API (import '
      'tf1prune: apply_mask, Pruning, lock, LotteryTicket).' % tf.__version__)


def test_importing_tf1prune_imports_no_keras():
  """Nothing Keras beyond what `import tensorflow` itself loads."""
  code = ('import sys, tensorflow.compat.v1\n'
          'def keras(): return set(m for m in sys.modules if m == "keras" or '
          'm.startswith(("keras.", "tf_keras", "tf1prune.keras")))\n'
          'before = keras()\nimport tf1prune\nprint(sorted(keras() - before))')
  out = subprocess.run([sys.executable, '-c', code], stdout=subprocess.PIPE,
                       universal_newlines=True, timeout=300).stdout
  assert out.strip().splitlines()[-1] == '[]'


def test_unsupported_keras_version_message():
  if not TF2:
    pytest.skip('tf1prune.keras needs TensorFlow 2.x; this is TensorFlow %s'
                % tf.__version__)
  from tf1prune.keras._version import check_keras_version
  head = ('tf1prune.keras supports Keras 3 (keras>=3.0 with the TensorFlow '
          'backend) and Keras 2 from 2.10 on (tf.keras of TensorFlow 2.10 to '
          '2.15, or tf_keras); got keras 2.9.0. Upgrade TensorFlow to 2.10 or '
          'later (pip install "tensorflow>=2.10")')
  with pytest.raises(ValueError) as e:
    check_keras_version('keras', '2.9.0', tf_version='2.16.2')
  assert str(e.value) == head + (
      ', or install tf_keras matching your TensorFlow (pip install '
      '"tf_keras~=2.16") and build the model with it.')
  # tf_keras is published from 2.14 on: no such advice for TensorFlow 2.9.
  with pytest.raises(ValueError) as e:
    check_keras_version('keras', '2.9.0', tf_version='2.9.3')
  assert str(e.value) == head + '.'
  assert check_keras_version('tf_keras', '2.21.0') == 'tf_keras'
  assert check_keras_version('keras', '2.15.0') == 'keras'
  assert check_keras_version('keras', '2.10.0') == 'keras'


def _modules():
  if not TF2:
    return []
  import tf1prune.keras
  return ['tf1prune.keras'] + sorted(
      name for _, name, _ in pkgutil.walk_packages(tf1prune.keras.__path__,
                                                   'tf1prune.keras.'))


@pytest.mark.skipif(not TF2 or not tf.executing_eagerly(),
                    reason='tf1prune.keras needs TF 2.x in an eager process')
@pytest.mark.parametrize('name', _modules())
def test_module_examples_run(name):
  if keras_module().__name__ != 'keras':
    pytest.skip('the docstring examples use Keras 3 (import keras)')
  module = importlib.import_module(name)
  assert '>>>' in (module.__doc__ or ''), name
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
  assert result.failed == 0, '%d of %d examples in %s failed' % (
      result.failed, result.attempted, name)


def _eager_pages():
  return [p for p in PAGES if EAGER in read(p) and runnable(p)]


@pytest.mark.skipif(not TF2 or not tf.executing_eagerly(),
                    reason='the eager pages need TF 2.x with Keras, in an eager '
                    'process')
@pytest.mark.parametrize('page', _eager_pages())
def test_python_blocks_of_eager_page_run(page, tmp_path):
  run = run_blocks(page, tmp_path)
  assert run.returncode == 0, run.stderr[-4000:]


def _errors_table():
  """{cause: message} of the Errors table of docs/keras.md."""
  text = open(os.path.join(ROOT, 'docs', 'keras.md')).read()
  table = text.split('\n## Errors\n', 1)[1].split('\n## ', 1)[0]
  rows = {}
  for line in table.splitlines():
    cells = line.split(' | ')
    if len(cells) == 2 and cells[1].startswith('`'):
      rows[cells[0].lstrip('| ')] = cells[1].split('`')[1]
  return rows


def test_the_docs_error_table_quotes_the_real_messages():
  if not TF2:
    pytest.skip('tf1prune.keras needs TensorFlow 2.x; this is TensorFlow %s'
                % tf.__version__)
  import numpy as np
  import tf1prune.keras as tk
  k = keras_module()
  model = k.Sequential([k.Input((6,)), k.layers.Dense(5, name='dense'),
                        k.layers.BatchNormalization(name='bn')])
  calls = {
      'index out of range': lambda: tk.lock(model, 'dense', 'kernel',
                                            np.s_[6, 0]),
      'mask of wrong shape': lambda: tk.lock(model, 'dense', 'kernel',
                                             mask=np.ones((5, 6), bool)),
      'unknown weight': lambda: tk.lock(model, 'dense', 'gamma', ...),
      'a weight its layer updates itself': lambda: tk.lock(
          model, 'bn', 'moving_mean', ..., value='zero'),
  }
  table = _errors_table()
  for cause, call in calls.items():
    with pytest.raises(ValueError) as e:
      call()
    assert table[cause] == str(e.value), cause
