"""The TF1 graph backend, building: masks, masked layers and cells, locks.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune import graph
    >>> with tf.Graph().as_default():
    ...   net = graph.masked_conv2d(tf.zeros([1, 8, 8, 3]), 4, 3, scope='conv1')
    ...   [m.op.name for m in graph.get_masks()]
    ['conv1/mask']

What a model script calls while it builds its graph, one concern a module:

- `masking`: `apply_mask`, the mask and threshold variables beside a weight,
  and contrib's collections (`get_masks`, ...; `masked_weight_records`);
- `layers`, `rnn_cells`, `rnn_wrappers`: tf-slim style masked conv and dense
  layers; masked LSTM cells; TF1's cell stacking and wrappers without Keras;
- `batch_norm`, `slim_compat`: slim-compatible batch normalization, and
  running `tf_slim.nets` with it on TF 2.x;
- `locks`: pinning slices of a weight, and writing masks into the weights;
- `scopes`: `pruning_scope` / `locking_scope`, masking or locking the
  variables of unmodified model code as they are made;
- `conditional`: `run_if`, a subgraph that runs only on the steps a
  predicate allows (the mask update, batch norm's moving averages).

The mask math is `tf1prune.masks`; what runs the updates during training is
`tf1prune.training`.
"""

from tf1prune.graph.batch_norm import batch_norm
from tf1prune.graph.layers import (masked_conv2d, masked_convolution,
                                   masked_fully_connected)
from tf1prune.graph.locks import (LOCK_COLLECTION, Lock, LockHook,
                                  bake_masks_op, capture_lock_values_op, lock,
                                  lock_records)
from tf1prune.graph.masking import (MASK_COLLECTION, MASKED_WEIGHT_COLLECTION,
                                    MASKED_WEIGHT_NAME, THRESHOLD_COLLECTION,
                                    WEIGHT_COLLECTION, MaskedWeight,
                                    apply_mask, get_masked_weights, get_masks,
                                    get_thresholds, get_weight_sparsity,
                                    get_weights, masked_weight_records)
from tf1prune.graph.rnn_cells import (LSTMStateTuple, MaskedBasicLSTMCell,
                                      MaskedLSTMCell)
from tf1prune.graph.rnn_wrappers import (DropoutWrapper, MultiRNNCell,
                                         ResidualWrapper)
from tf1prune.graph.scopes import locking_scope, pruning_scope

__all__ = [
    'MASK_COLLECTION', 'MASKED_WEIGHT_COLLECTION', 'MASKED_WEIGHT_NAME',
    'THRESHOLD_COLLECTION', 'WEIGHT_COLLECTION', 'MaskedWeight', 'apply_mask',
    'get_masked_weights', 'get_masks', 'get_thresholds',
    'get_weight_sparsity', 'get_weights', 'masked_weight_records',
    'masked_conv2d', 'masked_convolution', 'masked_fully_connected',
    'LSTMStateTuple', 'MaskedBasicLSTMCell', 'MaskedLSTMCell',
    'DropoutWrapper', 'MultiRNNCell', 'ResidualWrapper', 'batch_norm',
    'LOCK_COLLECTION', 'Lock', 'LockHook', 'bake_masks_op',
    'capture_lock_values_op', 'lock', 'lock_records', 'locking_scope',
    'pruning_scope',
]
