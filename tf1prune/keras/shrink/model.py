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
`tf1prune.keras.shrink.layers`), removes every channel whose filters are
all zero in every layer that writes it, and folds what such a channel still
carries (its bias, a batch norm's shift, the activation of that constant)
into the next layer's bias, so the outputs stay the same
(`tf1prune.keras.shrink.plan`, `_shrink_build`). It returns the new
functional model and a `KerasShrinkReport`: parameters and FLOPs per layer
before and after, and the stops (empty filters that had to stay, and why).
`strip_model(model, shrink=True)` returns the model alone.
"""

from tf1prune.keras import _export
from tf1prune.keras.shrink.rebuild import rebuild
from tf1prune.keras.shrink.plan import plan
from tf1prune.keras.shrink.report import KerasShrinkReport, layer_row

__all__ = ['shrink_model', 'shrink_plain']


def shrink_plain(model, fold_borders=True):
  """`shrink_model` of a model that carries no pins (already stripped)."""
  p = plan(model, fold_borders)
  small, pairs = rebuild(model, p)
  calls = dict((c.output, c) for c in p.view.trace.calls)
  rows = []
  for old, new, call, new_out, helpers in pairs:
    first = call.inputs[0]
    row = layer_row(old, new, call, calls[first].shape,
                    int(p.kept(p.view.keys[first]).sum()), new_out, helpers)
    if row is not None:
      rows.append(row)
  outputs = [calls[p.view.trace.resolve(t)].name for t in model.outputs]
  return small, KerasShrinkReport(rows, p.stops, outputs)


def shrink_model(model, fold_borders=True):
  """Returns (a smaller copy of `model`, its `KerasShrinkReport`).

  Args:
    model: a built Sequential or functional Keras model (Keras 3 or
      tf_keras), pruned or not; it is not changed.
    fold_borders: a Conv2D that pads with zeros and reads removed channels
      that are nonzero constants gets one extra input channel of ones
      (see `_shrink_build`); False: such channels stay (report stops).

  Returns:
    (a functional Keras model with the same inputs and outputs and the
    emptied channels removed, a `KerasShrinkReport`).

  Raises:
    TypeError: `fold_borders` is not a bool.
    ValueError: `model` is subclassed, shares a layer between two calls,
      nests a model, or has a layer with several outputs.
  """
  if not isinstance(fold_borders, bool):
    raise TypeError('fold_borders must be True or False, got %r'
                    % (fold_borders,))
  return shrink_plain(_export.strip_model(model), fold_borders)
