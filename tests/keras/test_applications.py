"""keras.applications CNNs through the user flow of docs/keras.md: a Pruner
with `coupled_filter` at 50%, two `fit` steps with its callback, then
`shrink_model`. The shrunk model reaches within 5% of the ideal FLOPs of the
coupled mask (`flops_reference.ideal_flops`: counted from the masks, not from
the shrink), its outputs are the model's (the rule of
`tf1prune.export.same_outputs`), the report's FLOPs are an independent count
of both models, and it saves and loads as plain Keras (no tf1prune class in
it). Built with `weights=None` at 32x32 (71 and 75 where Keras asks for
more); the models beyond the seven of `_DEFAULT` are slow tests."""

import os

import numpy as np
import pytest

from tests.support.keras_models import keras_module, skip_unless_usable

skip_unless_usable()

from tests.keras import flops_reference  # noqa: E402
import tf1prune.keras as tk  # noqa: E402
from tf1prune.keras.shrink.check import check_outputs  # noqa: E402

K = keras_module()
_KERAS3 = K.__version__.startswith('3.')
HPARAMS = ('target_sparsity=0.5,sparsity_function_end_step=1,'
           'pruning_frequency=1,granularity_map=[.*:coupled_filter]')

_DEFAULT = ['ResNet50', 'MobileNetV2', 'MobileNetV3Small', 'EfficientNetB0',
            'DenseNet121', 'NASNetMobile', 'ConvNeXtTiny']
_SLOW = ['VGG16', 'MobileNet', 'ResNet50V2', 'Xception', 'InceptionV3',
         'InceptionResNetV2', 'EfficientNetV2B0', 'MobileNetV3Large',
         'DenseNet169']
_KERAS2_ONLY = ['ResNetRS50', 'RegNetX002']     # Keras 3 has none of them
_SIZES = {'Xception': 71, 'InceptionV3': 75, 'InceptionResNetV2': 75}
# Grouped convolutions of more than one channel per group are stops: the
# channels they read stay (the coupled mask prunes them).
_GAPS = {'RegNetX002': 'grouped Conv2D (groups < channels) is a stop'}


# Keras 2 builds and clones a model several times slower than Keras 3 (3 to
# 6 minutes for each of these on 2 cores): there they are slow tests, and
# the default run of Keras 2 takes the other four.
_SLOW_ON_KERAS2 = ['ResNet50', 'DenseNet121', 'NASNetMobile']


def _cases():
  cases = [pytest.param(n, id=n, marks=[pytest.mark.slow]
                        if n in _SLOW_ON_KERAS2 and not _KERAS3 else [])
           for n in _DEFAULT]
  cases += [pytest.param(n, id=n, marks=pytest.mark.slow) for n in _SLOW]
  for name in _KERAS2_ONLY:
    marks = [pytest.mark.slow, pytest.mark.skipif(
        _KERAS3, reason='keras.applications of Keras 3 has no %s' % name)]
    if name in _GAPS:
      marks.append(pytest.mark.xfail(strict=True, reason=_GAPS[name]))
    cases.append(pytest.param(name, id=name, marks=marks))
  return cases


def _pruned_and_fitted(name):
  size = _SIZES.get(name, 32)
  K.utils.set_random_seed(0)
  model = getattr(K.applications, name)(
      weights=None, input_shape=(size, size, 3), classes=4,
      classifier_activation=None)
  pruner = tk.Pruner(model, HPARAMS)
  # Eager steps: tracing the train step of these models costs more than the
  # two steps themselves; the callback prunes the same either way.
  kwargs = {'run_eagerly': True}
  model.compile(K.optimizers.SGD(1e-3, clipnorm=1.0),
                'categorical_crossentropy', **kwargs)
  rng = np.random.RandomState(1)
  x = rng.uniform(0, 255, (4, size, size, 3)).astype('float32')
  y = K.utils.to_categorical(rng.randint(0, 4, 4), 4)
  model.fit(x, y, batch_size=2, epochs=1, verbose=0,
            callbacks=[tk.PruningCallback(pruner)])
  assert pruner.last_update_step == 2
  return model, size


def _custom_objects(model):
  """The layer classes keras.applications defines itself (ConvNeXt's
  LayerScale, InceptionResNetV2's CustomScaleLayer): the model needs them
  to load as much as the shrunk one."""
  out = {}
  for layer in flops_reference.layers_of(model):
    if '.applications.' in type(layer).__module__:
      out[type(layer).__name__] = type(layer)
  return out


@pytest.mark.parametrize('name', _cases())
def test_keras_applications_reach_the_ideal_flops_of_the_coupled_mask(
    name, tmp_path):
  model, size = _pruned_and_fitted(name)
  small, report = tk.shrink_model(model)
  rng = np.random.RandomState(2)
  positive = rng.uniform(200, 255, (2, size, size, 3)).astype('float32')
  before = flops_reference.flops(model, positive)
  after = flops_reference.flops(small, positive)
  ideal = flops_reference.ideal_flops(model, positive)
  assert (report.flops_before, report.flops_after) == (before, after)
  assert report.params_after == small.count_params()
  assert ideal < 0.75 * before
  assert after <= 1.05 * ideal, (after / before, ideal / before)
  # The outputs: the shrink's own check passed, and again on images.
  assert report.check and all(row.ok for row in report.check)
  images = rng.uniform(0, 255, (2, size, size, 3)).astype('float32')
  y_small = np.asarray(small(images))
  row, = check_outputs(model, small, inputs=[images])
  assert row.ok, row
  print('%s: FLOPs x%.3f after the shrink, ideal x%.3f, %d stops, max diff '
        '%.1e x max|y|' % (name, after / before, ideal / before,
                           sum(s.channels for s in report.stops),
                           row.difference / row.largest))
  # Plain Keras: saved and loaded without tf1prune.
  assert not [l for l in small.layers
              if type(l).__module__.startswith('tf1prune')]
  path = os.path.join(str(tmp_path), 'small.keras')
  small.save(path)
  loaded = K.models.load_model(path, custom_objects=_custom_objects(model),
                               compile=False)
  np.testing.assert_array_equal(np.asarray(loaded(images)), y_small)
