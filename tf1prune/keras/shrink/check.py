"""The shrink checks itself: the small model against the model, on random
inputs.

    >>> import numpy as np, keras
    >>> from tf1prune.keras.shrink.check import check_outputs
    >>> x = keras.Input((4,))
    >>> model = keras.Model(x, keras.layers.Dense(3, name='y')(x))
    >>> rows = check_outputs(model, model)
    >>> [(r.name, r.difference, r.ok) for r in rows]
    [('y', 0.0, True)]

`check_outputs(model, small)` runs both models on a few random inputs
(standard normal floats, 0 or 1 for integer inputs; shapes from the model's
inputs, a batch of 2, unknown dimensions `unknown_dims`) and compares every
output by the rule of `tf1prune.export.same_outputs`: at most `1e-5 x
max|y|`, plus 64 float32 steps of the largest sum of absolute terms of the
output's last Dense or conv layer (the shrink changes the order of float32
sums). Two forward passes and one of the last layer: little beside the
shrink. `shrink_model` refuses a model that fails it (`ShrinkCheckError`),
and reports the differences (`KerasShrinkReport.check`).
"""

import numpy as np
import tensorflow as tf

from tf1prune.export.same_outputs import compare_outputs

__all__ = ['ShrinkCheckError', 'check_inputs', 'check_outputs', 'refuse']

_PASS = ('Activation', 'ReLU', 'Softmax', 'LeakyReLU', 'ELU', 'Dropout',
         'Identity')


class ShrinkCheckError(ValueError):
  """The shrunk model does not give the model's outputs."""


def check_inputs(model, unknown_dims=16, batch=2, seed=0):
  """Random inputs for `model`: a list of arrays, one per input.

  Args:
    model: a Keras model with symbolic inputs.
    unknown_dims: the size of every dimension the model leaves unknown (an
      int), or a list with one shape per input (without the batch).
    batch: the batch size.
    seed: NumPy's seed.

  Raises:
    ValueError: `unknown_dims` is neither an int > 0 nor one shape per
      input.
  """
  rng = np.random.RandomState(seed)
  inputs = list(model.inputs)
  if isinstance(unknown_dims, (list, tuple)):
    if len(unknown_dims) != len(inputs) or not all(
        isinstance(s, (list, tuple)) for s in unknown_dims):
      raise ValueError('check_dims must be an int (the size of every unknown '
                       'dimension) or one shape per input (%d, without the '
                       'batch), got %r' % (len(inputs), unknown_dims))
    shapes = [(batch,) + tuple(s) for s in unknown_dims]
  else:
    if isinstance(unknown_dims, bool) or int(unknown_dims) != unknown_dims \
        or unknown_dims < 1:
      raise ValueError('check_dims must be an int > 0 (the size of every '
                       'unknown dimension) or one shape per input, got %r'
                       % (unknown_dims,))
    shapes = [(batch,) + tuple(unknown_dims if d is None else int(d)
                               for d in tuple(t.shape)[1:]) for t in inputs]
  arrays = []
  for tensor, shape in zip(inputs, shapes):
    dtype = np.dtype(getattr(tensor.dtype, 'name', tensor.dtype) or 'float32')
    if dtype.kind == 'f':
      arrays.append(rng.standard_normal(shape).astype(dtype))
    else:
      arrays.append(rng.randint(0, 2, shape).astype(dtype))
  return arrays


def _producer(tensor):
  return tensor._keras_history[0]  # pylint: disable=protected-access


def _calls(layer):
  return len(layer._inbound_nodes)  # pylint: disable=protected-access


def _names(model):
  names = getattr(model, 'output_names', None)
  if names and len(names) == len(model.outputs):
    return list(names)
  return [_producer(t).name for t in model.outputs]


def _scale(model, tensor, inputs):
  """The largest `sum |a x w| + |b|` of the Dense or conv layer that gives
  `tensor` (through activations), or None."""
  layer = _producer(tensor)
  while type(layer).__name__ in _PASS and _calls(layer) == 1:
    tensor = layer.input
    layer = _producer(tensor)
  name = type(layer).__name__
  config = layer.get_config()
  if name not in ('Dense', 'Conv1D', 'Conv2D') or config.get(
      'groups', 1) != 1 or _calls(layer) != 1:
    return None
  from tf1prune.keras import _version
  keras = _version.keras_of(model)
  try:
    inputs_ = model.inputs if len(model.inputs) > 1 else model.inputs[0]
    reads = keras.Model(inputs_, layer.input)(inputs, training=False)
  except (ValueError, TypeError, KeyError, AttributeError):
    return None                    # e.g. a layer of a nested model
  config = dict(config, activation='linear', name=layer.name + '_check')
  absolute = type(layer).from_config(config)
  absolute.build(tuple(reads.shape))
  absolute.set_weights([np.abs(w) for w in layer.get_weights()])
  return float(np.max(np.asarray(absolute(tf.abs(reads)))))


def check_outputs(model, small, unknown_dims=16, inputs=None):
  """`tf1prune.export.same_outputs.OutputDifference` of each output of
  `model` and `small` on `inputs` (a list of arrays, one per input; default
  `check_inputs(model, unknown_dims)`)."""
  if inputs is None:
    inputs = check_inputs(model, unknown_dims)
  feed = inputs if len(inputs) > 1 else inputs[0]
  expected = tf.nest.flatten(model(feed, training=False))
  got = tf.nest.flatten(small(feed, training=False))
  scales = [_scale(model, t, feed) for t in model.outputs]
  return compare_outputs(_names(model), [np.asarray(y) for y in expected],
                         [np.asarray(y) for y in got], scales)


def refuse(rows):
  """Raises `ShrinkCheckError` naming the outputs that differ, if any."""
  bad = [r for r in rows if not r.ok]
  if not bad:
    return
  raise ShrinkCheckError(
      'shrink_model made a model whose outputs differ from the model\'s on '
      'random inputs: %s. This is a bug of the shrink; please report it '
      'with the model. shrink_model(model, check=False) returns the model '
      'without this check.' % '; '.join(
          'output %r by %.3g (max |y| %.3g, tolerance %.3g)' % (
              r.name, r.difference, r.largest, r.tolerance) for r in bad))
