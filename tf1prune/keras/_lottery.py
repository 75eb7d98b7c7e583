"""Lottery tickets for Keras models: snapshot, prune by rounds, rewind.

    >>> import numpy as np, keras, tf1prune.keras as tk
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    >>> _ = model.layers[0].kernel.assign([[1., 2.], [3., 4.]])
    >>> ticket = tk.LotteryTicket(model)
    >>> ticket.snapshot()                               # the rewind point
    >>> _ = model.layers[0].kernel.assign([[-9., 8.], [7., 6.]])   # "training"
    >>> ticket.prune(0.5)                               # keep the 2 largest
    >>> ticket.rewind()
    >>> np.asarray(model.layers[0].kernel).tolist()
    [[1.0, 2.0], [0.0, 0.0]]

As `tf1prune.LotteryTicket` for graphs (Frankle & Carbin, 2019): `snapshot()`
at initialization (or at step k, for late rewinding), train, `prune(
round_sparsity(r, rate))`, `rewind()`, train again. `prune` ranks
`|mask * w|` with `tf1prune.masks.magnitude_mask` (exact counts, ties in
row-major order), so entries pruned in an earlier round score 0 and stay
pruned: masks only shrink. `rewind` writes every model weight back to its
snapshot (biases and normalization statistics too), with pruned entries at
+0.0 and locked entries at their lock values, and restores the optimizer's
variables (moments, accumulators, `iterations`) to their snapshot; an
optimizer that was not built at `snapshot()` is built then, so its initial
state is what `rewind` restores.
"""

import numpy as np
import tensorflow as tf

from tf1prune.keras import _pin, _version
from tf1prune.keras._pruning import Pruner
from tf1prune.plan.schedule import round_sparsity
from tf1prune.masks import Element, global_masks, magnitude_mask

__all__ = ['LotteryTicket', 'round_sparsity']


def _optimizer_variables(optimizer):
  variables = optimizer.variables
  return list(variables() if callable(variables) else variables)


def _build_optimizer(optimizer, variables):
  """Creates the optimizer's slot variables (moments, accumulators) now."""
  if hasattr(optimizer, 'build'):
    optimizer.build(variables)
  else:
    # Keras 2's OptimizerV2 (the default optimizers before Keras 2.11, the
    # `legacy` ones after) has no public build; this is what its
    # apply_gradients calls first.
    optimizer._create_all_weights(variables)  # pylint: disable=protected-access


class LotteryTicket(object):
  """Snapshots of a Keras model's weights and optimizer, and the workflow.

  Args:
    model: a built Keras model (Keras 3 or tf_keras).
    weights: the weights to prune: None (every kernel-like weight, as
      `Pruner`), or a list of (layer or layer name, weight name) pairs.
    optimizer: the optimizer whose state `rewind` restores; default
      `model.optimizer` at `snapshot()` time (None if not compiled).
  """

  def __init__(self, model, weights=None, optimizer=None):
    _version.keras_of(model)
    self.model = model
    self._pruner = Pruner(model, weights=weights)
    self._optimizer = optimizer
    self._weights = None
    self._optimizer_state = None

  @property
  def weight_names(self):
    return self._pruner.weight_names

  def masks(self):
    """Returns {name: bool ndarray, True where kept}."""
    return self._pruner.masks()

  def apply_masks(self, masks):
    """Sets the masks (e.g. another ticket's) and zeroes the pruned entries.

    Args:
      masks: {name: bool array} or a list of bool arrays in `weight_names`
        order (True where kept).

    Raises:
      ValueError: a mask is missing or has the wrong shape.
    """
    records = self._pruner._records
    if isinstance(masks, dict):
      missing = [r.name for r in records if r.name not in masks]
      if missing:
        raise ValueError('apply_masks: no mask for %s (got %s)'
                         % (missing, sorted(masks)))
      masks = [masks[r.name] for r in records]
    masks = list(masks)
    if len(masks) != len(records):
      raise ValueError('apply_masks: %d masks for %d weights %s'
                       % (len(masks), len(records), self.weight_names))
    for record, mask in zip(records, masks):
      mask = np.asarray(mask)
      if mask.shape != record.pin.shape:
        raise ValueError('mask for weight %s must have shape %s, got %s'
                         % (record.name, list(record.pin.shape),
                            list(mask.shape)))
      record.pin.set_mask(mask.astype(bool))
      record.pin.apply()

  def _optimizer_now(self):
    return self._optimizer or getattr(self.model, 'optimizer', None)

  def snapshot(self):
    """Remembers the current weights and optimizer state as the rewind point."""
    self._weights = [np.array(v) for v in self.model.weights]
    optimizer = self._optimizer_now()
    self._optimizer_state = None
    if optimizer is not None:
      if not getattr(optimizer, 'built', True) or not _optimizer_variables(
          optimizer)[1:]:
        _build_optimizer(optimizer, self.model.trainable_variables)
      _pin.hook_optimizer(optimizer, self.model)
      self._optimizer_state = (optimizer, [
          np.array(v) for v in _optimizer_variables(optimizer)])

  def prune(self, sparsity, global_pruning=False):
    """Sets each mask to the top `|mask * w|` at `sparsity`, zeroes the rest.

    Args:
      sparsity: float in [0, 1): the fraction of each weight (with
        `global_pruning`, of all of them together) pruned afterwards.
      global_pruning: one threshold over all the weights.
    """
    if not 0.0 <= sparsity < 1.0:
      raise ValueError('sparsity must be in [0, 1), got %r' % (sparsity,))
    records = self._pruner._records
    scores = [tf.abs(tf.where(r.pin.mask, tf.convert_to_tensor(r.variable),
                              tf.zeros(r.pin.shape, r.pin.dtype)))
              for r in records]
    if global_pruning:
      masks = global_masks([(s, Element()) for s in scores], sparsity,
                           magnitude_mask)
    else:
      masks = [magnitude_mask(s, sparsity) for s in scores]
    for record, (mask, threshold) in zip(records, masks):
      keep = np.asarray(mask) > 0
      record.pin.set_mask(np.where(record.pin.locked, record.pin.mask, keep))
      record.pin.apply()
      self._pruner.thresholds[record.name] = np.float32(threshold)

  def rewind(self):
    """Resets weights (masked, locks applied) and optimizer state.

    Raises:
      ValueError: `snapshot()` never ran.
    """
    if self._weights is None:
      raise ValueError('LotteryTicket.rewind: no snapshot yet; call snapshot() '
                       'after building the model (or at the rewind step)')
    for variable, value in zip(self.model.weights, self._weights):
      variable.assign(value)
    for _, _, variable, pin in _pin.pins(self.model):
      variable.assign(pin(variable))
    if self._optimizer_state is not None:
      optimizer, values = self._optimizer_state
      for variable, value in zip(_optimizer_variables(optimizer), values):
        variable.assign(value)
