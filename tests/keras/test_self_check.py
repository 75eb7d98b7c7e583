"""shrink_model checks itself: both models on random inputs, the largest
difference in the report, and a shrunk model that differs refused, with
the outputs, the difference and `check=False` named."""

import numpy as np
import pytest

from tests.support.keras_models import keras_module, skip_unless_usable

skip_unless_usable()

import tf1prune.keras as tk  # noqa: E402
from tf1prune.export.same_outputs import (EPS32, RTOL, ULPS,  # noqa: E402
                                          compare_outputs, tolerance)
from tf1prune.keras.shrink import check as check_module  # noqa: E402
from tf1prune.keras.shrink import model as model_module  # noqa: E402

K = keras_module()
L = K.layers


def _model(shape=(6,)):
  K.utils.set_random_seed(0)
  x = K.Input(shape, name='x')
  h = L.Dense(8, activation='relu', name='h')(x)
  model = K.Model(x, L.Dense(3, name='y')(h))
  kernel = model.get_layer('h').kernel
  kernel.assign(kernel.numpy() * (np.arange(8) % 2))
  return model


def test_the_report_holds_the_largest_difference_of_each_output():
  model = _model()
  small, report = tk.shrink_model(model)
  row, = report.check
  assert (row.name, row.ok) == ('y', True)
  inputs = check_module.check_inputs(model)
  assert [a.shape for a in inputs] == [(2, 6)]
  y = np.asarray(model(inputs[0]))
  assert row.largest == float(np.abs(y).max())
  assert row.difference == float(np.abs(y - np.asarray(small(inputs[0])))
                                 .max())
  assert row.difference <= row.tolerance
  assert report.max_difference == row.difference
  assert report.to_dict()['check'] == [dict(
      name='y', difference=row.difference, largest=row.largest,
      tolerance=row.tolerance)]
  # The scale of y's sums: sum |h| x |w| + |b| of its Dense, from the run.
  dense = model.get_layer('y')
  hidden = K.Model(model.inputs[0], dense.input)(inputs[0])
  scale = float((np.abs(hidden) @ np.abs(dense.kernel.numpy()) +
                 np.abs(dense.bias.numpy())).max())
  assert row.scale == pytest.approx(scale, rel=1e-6)
  assert row.tolerance == tolerance(row.largest, row.scale)


def test_a_shrunk_model_that_differs_is_refused(monkeypatch):
  model = _model()
  rebuild = model_module.rebuild

  def broken(*args, **kwargs):   # a bug: one kept weight of y changed
    small, pairs = rebuild(*args, **kwargs)
    kernel = small.get_layer('y').kernel
    kernel.assign(kernel.numpy() + 0.5)
    return small, pairs

  monkeypatch.setattr(model_module, 'rebuild', broken)
  with pytest.raises(check_module.ShrinkCheckError) as e:
    tk.shrink_model(model)
  message = str(e.value)
  assert message.startswith(
      "shrink_model made a model whose outputs differ from the model's on "
      "random inputs: output 'y' by ")
  assert message.endswith(
      '. This is a bug of the shrink; please report it with the model. '
      'shrink_model(model, check=False) returns the model without this '
      'check.')
  assert isinstance(e.value, ValueError)
  small, report = tk.shrink_model(model, check=False)
  assert report.check == [] and report.max_difference is None
  assert small.get_layer('h').units == 4
  with pytest.raises(check_module.ShrinkCheckError):
    tk.strip_model(model, shrink=True)


def test_unknown_dimensions_come_from_check_dims():
  K.utils.set_random_seed(0)
  x = K.Input((None, None, 3))
  h = L.Conv2D(6, 3, activation='relu', name='c1')(x)
  model = K.Model(x, L.Conv2D(4, 5, name='c2')(h))
  kernel = model.get_layer('c1').kernel
  kernel.assign(kernel.numpy() * (np.arange(6) % 2))
  _, report = tk.shrink_model(model)
  assert report.check[0].ok
  assert [a.shape for a in check_module.check_inputs(model)] == [
      (2, 16, 16, 3)]
  assert [a.shape for a in check_module.check_inputs(model, [(9, 7, 3)])] \
      == [(2, 9, 7, 3)]
  _, report = tk.shrink_model(model, check_dims=[(9, 7, 3)])
  assert report.check[0].ok
  with pytest.raises(ValueError) as e:
    tk.shrink_model(model, check_dims=0)
  assert str(e.value) == ('check_dims must be an int > 0 (the size of every '
                          'unknown dimension) or one shape per input, got 0')
  with pytest.raises(ValueError) as e:
    tk.shrink_model(model, check_dims=[(9, 7, 3), (9, 7, 3)])
  assert str(e.value) == (
      'check_dims must be an int (the size of every unknown dimension) or '
      'one shape per input (1, without the batch), got [(9, 7, 3), (9, 7, '
      '3)]')
  with pytest.raises(TypeError) as e:
    tk.shrink_model(model, check='yes')
  assert str(e.value) == "check must be True or False, got 'yes'"


def test_the_rule_allows_float32_steps_of_the_sums():
  y = np.array([[1.0, -2.0], [0.5, 4.0]])
  assert tolerance(4.0) == RTOL * 4.0 + ULPS * EPS32 * 4.0
  assert tolerance(4.0, 1e6) == RTOL * 4.0 + ULPS * EPS32 * 1e6
  within, = compare_outputs(['a'], [y], [y + 1e-4], [None])
  assert not within.ok        # 1e-4 > 1e-5 x 4 + 64 steps of 4 (7.05e-5)
  within, = compare_outputs(['a'], [y], [y + 1e-4], [1e3])
  assert within.ok and within.scale == 1e3
  moved = y.copy()
  moved[0, 0] = np.nan
  row, = compare_outputs(['a'], [y], [moved])
  assert (row.difference, row.ok) == (float('inf'), False)
  row, = compare_outputs(['a'], [moved], [moved])
  assert (row.difference, row.ok) == (0.0, True)
  row, = compare_outputs(['a'], [y], [y[:1]])
  assert not row.ok
