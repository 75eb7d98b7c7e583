"""tf1prune.keras export: plain model, SavedModel, frozen .pb, report; example."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support.checkout import ROOT
from tests.support.keras_models import (
    bits, data, is_keras3, keras_module, skip_unless_usable, small_model)

skip_unless_usable()

import tf1prune.keras as tk  # noqa: E402

K = keras_module()

# Loads the three exports in a process where tf1prune cannot be imported.
_LOADER = r'''
import json, sys, numpy as np, tensorflow as tf
sys.path = [p for p in sys.path if 'tf1prune' not in p and p not in ('', '.')]
sys.modules['tf1prune'] = None          # importing it now fails
keras_path, saved, pb, inp, out, which = sys.argv[1:7]
x = np.load(inp)
if which == 'tf_keras':
  import tf_keras as keras
else:
  import keras
results = {'keras': keras.models.load_model(keras_path).predict(x, verbose=0)}
loaded = tf.saved_model.load(saved)
if which != 'keras3':
  fn = loaded.signatures['serving_default']
  results['saved'] = list(fn(tf.constant(x)).values())[0].numpy()
else:
  results['saved'] = loaded.serve(tf.constant(x)).numpy()
graph_def = tf.compat.v1.GraphDef()
graph_def.ParseFromString(open(pb, 'rb').read())
names = json.loads(out)
with tf.Graph().as_default() as g:
  tf.compat.v1.import_graph_def(graph_def, name='')
  with tf.compat.v1.Session(graph=g) as sess:
    results['pb'] = sess.run(names['output'] + ':0', {names['input'] + ':0': x})
np.savez(inp + '.out.npz', **results)
'''


def _pruned_locked_model(nested=False):
  """The small model, locked, pruned and trained; `nested`: inside a
  functional model with one more Dense layer."""
  model = small_model(K)
  first = model.layers[0]
  if nested:
    inputs = K.Input(model.input_shape[1:])
    model = K.Model(inputs, K.layers.Dense(model.output_shape[-1],
                                           name='head')(model(inputs)))
  model.compile(K.optimizers.Adam(0.05), 'mse')
  tk.lock(model, first, 'kernel', np.s_[0, :], value=0.25)
  pruner = tk.Pruner(model)
  pruner.update(sparsity=0.6)
  model.fit(*data(), batch_size=8, epochs=1, verbose=0)
  return model


@pytest.mark.parametrize('nested', [False, True])
def test_strip_model_folds_pins_and_keeps_outputs(nested):
  model = _pruned_locked_model(nested)
  plain = tk.strip_model(model)
  config = json.dumps(plain.get_config())
  assert 'tf1prune' not in config and 'Pin' not in config
  for a, b in zip(model.get_weights(), plain.get_weights()):
    assert bits(a) == bits(b)
  x = data()[0]
  np.testing.assert_array_equal(model.predict(x, verbose=0),
                                plain.predict(x, verbose=0))


@pytest.mark.parametrize('nested', [False, True])
def test_exports_load_and_run_without_tf1prune(tmp_path, nested):
  model = _pruned_locked_model(nested)
  keras_path = str(tmp_path / 'plain.keras')
  tk.strip_model(model).save(keras_path)
  saved = str(tmp_path / 'saved')
  saved_report = tk.export_saved_model(model, saved)
  size = sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(saved) for f in files)
  # A folder: its size, and no gzip size, dense reference or node count.
  assert saved_report.format_table().splitlines()[1] == 'output:     ' + saved
  assert saved_report.format_table().splitlines()[-1] == (
      'file size      {:,} B'.format(size))
  assert saved_report.to_dict()['file'] == {'bytes': size, 'gzip_bytes': None}
  pb = str(tmp_path / 'frozen.pb')
  report = tk.export_frozen_pb(model, pb)
  x = data()[0]
  inp = str(tmp_path / 'x.npy')
  np.save(inp, x)
  names = json.dumps({'input': report.input_nodes[0],
                      'output': report.output_nodes[0]})
  which = ('tf_keras' if K.__name__ == 'tf_keras' else
           'keras3' if K.__version__.startswith('3.') else 'keras2')
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH='')
  run = subprocess.run([sys.executable, '-c', _LOADER, keras_path, saved, pb,
                        inp, names, which], env=env, cwd=str(tmp_path),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
  assert run.returncode == 0, run.stderr[-3000:]
  results = np.load(inp + '.out.npz')
  expected = model.predict(x, verbose=0)
  np.testing.assert_array_equal(results['keras'], expected)
  np.testing.assert_allclose(results['saved'], expected, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(results['pb'], expected, rtol=1e-6, atol=1e-6)


def test_report_counts_the_folded_zeros(tmp_path):
  model = _pruned_locked_model()
  report = tk.export_frozen_pb(model, str(tmp_path / 'frozen.pb'))
  by_name = {layer.weight: layer for layer in report.layers}
  first = '%s/kernel' % model.layers[0].name
  kernel = model.layers[0].kernel.numpy()
  assert by_name[first].nonzeros == np.count_nonzero(kernel)
  assert by_name[first].size == 30
  assert report.file_bytes == os.path.getsize(str(tmp_path / 'frozen.pb'))
  assert report.file_bytes_gzip < report.dense_file_bytes_gzip
  assert 'total (2 masked)' in report.format_table()


def test_strip_model_of_a_subclassed_model_is_a_clear_error():

  class Net(K.Model):

    def __init__(self):
      super(Net, self).__init__()
      self.dense = K.layers.Dense(2)

    def call(self, x):
      return self.dense(x)

  net = Net()
  net(np.ones((1, 3), np.float32))
  with pytest.raises(ValueError) as e:
    tk.strip_model(net)
  assert str(e.value).startswith('strip_model needs a Sequential or '
                                 'functional model')


@pytest.mark.skipif(not is_keras3(K), reason="Keras 3's safe mode")
def test_strip_model_of_a_lambda_layer_in_safe_mode_gives_the_fix():
  inputs = K.Input((6,))
  hidden = K.layers.Lambda(lambda t: t * 2.0, name='lam')(
      K.layers.Dense(8)(inputs))
  model = K.Model(inputs, K.layers.Dense(2)(hidden), name='with_lambda')
  for strip in (tk.strip_model, tk.shrink_model):
    with pytest.raises(ValueError) as e:
      strip(model)
    text = str(e.value)
    assert text.startswith(
        "strip_model copies 'with_lambda' with keras.models.clone_model, "
        "which Keras 3's safe mode stops at a layer holding a Python function "
        '(Requested the deserialization of a `Lambda` layer'), text
    assert text.endswith('If you trust the model, call keras.config.'
                         'enable_unsafe_deserialization() first.'), text
    assert 'Build the model with' not in text


def test_the_example_runs_a_tiny_lottery(monkeypatch):
  sys.path.insert(0, os.path.join(ROOT, 'examples'))
  try:
    import keras_lottery_ticket as example
  finally:
    sys.path.pop(0)
  results = example.main(['--rounds', '2', '--epochs', '1'])
  assert [r[0] for r in results] == [0, 1, 2]
  assert [r[1] for r in results] == [0.0, 0.5, 0.75]
  for _, _, ticket, control in results:
    assert 0.0 <= ticket <= 1.0
    assert control is None or 0.0 <= control <= 1.0
