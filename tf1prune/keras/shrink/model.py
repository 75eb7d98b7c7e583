"""A physically smaller Keras model: pruned filters and units removed.

    >>> import numpy as np, keras, tf1prune.keras as tk
    >>> x = keras.Input((6,))
    >>> h = keras.layers.Dense(8, activation='relu', name='h')(x)
    >>> model = keras.Model(x, keras.layers.Dense(3, name='y')(h))
    >>> kernel = model.get_layer('h').kernel
    >>> _ = kernel.assign(kernel * (np.arange(8) % 2))     # 4 empty filters
    >>> small, report = tk.shrink_model(model)
    >>> small.get_layer('h').units, report.params_before, report.params_after
    (4, 83, 43)
    >>> data = np.random.RandomState(0).randn(4, 6).astype('float32')
    >>> float(np.abs(small(data) - model(data)).max()) < 1e-6
    True

`shrink_model(model)` strips the model (`strip_model`: masks and locks
folded into the weights), finds which channels go together (residual adds,
concats, depthwise convs and squeeze-and-excitation gates couple channels:
the one channel walk of `tf1prune.channels` over the model's layers,
`tf1prune.keras.shrink.layer_view`), removes every channel whose filters
are all zero in every layer that writes it, and gives the layers that read
such a channel what it still carried (its bias, a batch norm's shift, the
activation of that constant), so the outputs stay the same
(`tf1prune.keras.shrink.plan`, `tf1prune.keras.shrink.rebuild`). Then it
runs both models on random inputs and refuses a shrunk model whose outputs
differ (`tf1prune.keras.shrink.check`). It returns the new, flat,
functional model and a `KerasShrinkReport`: parameters and FLOPs per layer
before and after, the stops (empty filters that had to stay, and why) and
the check. `strip_model(model, shrink=True)` returns the model alone.
"""

from tf1prune.keras._strip import plain_copy
from tf1prune.keras.shrink.check import check_outputs, refuse
from tf1prune.keras.shrink.rebuild import rebuild
from tf1prune.keras.shrink.plan import plan
from tf1prune.keras.shrink.report import KerasShrinkReport, layer_row

__all__ = ['shrink_model', 'shrink_plain']


def input_names(model):
  """The names of the input layers of `model`."""
  history = [t._keras_history for t in model.inputs]  # pylint: disable=W0212
  return [h[0].name for h in history]


def shrink_plain(model, fold_borders=True, check=True, check_dims=16,
                 names=None):
  """`shrink_model` of a model that carries no pins (already stripped);
  `names`: the input layers' names (default: `model`'s; Keras 3's
  `clone_model` names a copy's inputs after their tensors)."""
  p = plan(model, fold_borders)
  small, pairs = rebuild(model, p, names)
  calls = dict((c.output, c) for c in p.view.trace.calls)
  rows = []
  for old, new, call, new_out, helpers in pairs:
    first = call.inputs[0]
    row = layer_row(old, new, call, calls[first].shape,
                    int(p.kept(p.view.keys[first]).sum()), new_out, helpers)
    if row is not None:
      rows.append(row)
  outputs = [calls[p.view.trace.resolve(t)].name for t in model.outputs]
  report = KerasShrinkReport(rows, p.stops, outputs)
  if check:
    report.check = check_outputs(model, small, check_dims)
    refuse(report.check)
  return small, report


def shrink_model(model, fold_borders=True, check=True, check_dims=16):
  """Returns (a smaller copy of `model`, its `KerasShrinkReport`).

  Args:
    model: a built Sequential or functional Keras model (Keras 3 or
      tf_keras; nested Sequential and functional models are followed),
      pruned or not; it is not changed.
    fold_borders: a conv that pads with zeros and reads removed channels
      that are nonzero constants gets one extra input channel of ones, and
      a layer reading a map that zero padding made of a removed constant
      gets the map added (see `tf1prune.keras.shrink.plan`); False: such
      channels stay (report stops).
    check: run the model and the shrunk one on random inputs and refuse a
      shrunk model whose outputs differ beyond the tolerance of
      `tf1prune.export.same_outputs` (`report.check` lists them).
    check_dims: the size of every dimension the model's inputs leave
      unknown (an int), or one shape per input (without the batch), for
      the check's random inputs.

  Returns:
    (a functional Keras model with the same inputs and outputs and the
    emptied channels removed, a `KerasShrinkReport`).

  Raises:
    TypeError: `fold_borders` or `check` is not a bool.
    ValueError: `model` is subclassed or shares a layer between two calls,
      a layer has several outputs, or `check_dims` is neither an int > 0
      nor one shape per input.
    tf1prune.keras.shrink.check.ShrinkCheckError (a ValueError): the shrunk
      model's outputs differ from the model's (a bug: please report it;
      `check=False` skips the check).
  """
  if not isinstance(fold_borders, bool):
    raise TypeError('fold_borders must be True or False, got %r'
                    % (fold_borders,))
  if not isinstance(check, bool):
    raise TypeError('check must be True or False, got %r' % (check,))
  return shrink_plain(plain_copy(model), fold_borders, check, check_dims,
                      input_names(model))
