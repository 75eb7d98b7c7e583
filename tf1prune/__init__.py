"""tf1prune: TensorFlow 1.x graph-mode weight pruning, drop-in for contrib's
model_pruning, on TF 1.15 and TF 2.x (`tensorflow.compat.v1`).

    import tf1prune as pruning   # was: from tensorflow.contrib import model_pruning as pruning

    net = pruning.masked_conv2d(images, 64, 5, scope='conv1')
    ...
    p = pruning.Pruning(pruning.get_pruning_hparams().parse('target_sparsity=0.9'))
    hooks = [pruning.PruningHook(p)]       # or run p.conditional_mask_update_op()

Importing tf1prune changes nothing in TensorFlow's global state.
"""

import sys as _sys

try:
  import tensorflow as _tf  # pylint: disable=unused-import
except ImportError as _error:
  # tf1prune declares no TensorFlow dependency (tensorflow, tensorflow-cpu,
  # tensorflow-gpu, tensorflow-macos, ... all provide it), so it says what to
  # install instead of failing deep inside a submodule. A TensorFlow that is
  # installed but broken keeps its own error.
  if getattr(_error, 'name', None) != 'tensorflow':
    raise
  raise ImportError(
      'tf1prune needs TensorFlow 1.15 or 2.x and no TensorFlow is installed '
      'for this Python (%s, %s). tf1prune does not install one (so it never '
      'replaces the TensorFlow of an environment); install one of:\n'
      '  TensorFlow 2.x:  pip install tensorflow-cpu  (or tensorflow, or '
      'pip install "tf1prune[tf]")\n'
      '  TensorFlow 1.15, on Python 3.7:  pip install "tensorflow==1.15.5" '
      '"numpy<1.19" "protobuf<3.21"  (or tensorflow-gpu==1.15.5)'
      % (_sys.executable, _sys.version.split()[0])) from None
del _sys, _tf

from tf1prune import _moved
from tf1prune.channels.training_graph import (ChannelGroup, GroupMember,
                                              find_channel_groups,
                                              format_channel_groups)
from tf1prune.export import (ShrinkReport, StripReport, TrainingGraphError,
                             graph_def_from_checkpoint, inference_graph_def,
                             shrink_graph_def, shrink_pb, strip_checkpoint,
                             strip_pruning_vars_fn, write_inference_graph)
# tf1prune.slim_compat.use_tf1prune_batch_norm(): tf_slim.nets on TF 2.x.
from tf1prune.graph import slim_compat  # noqa: F401
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
from tf1prune.plan.hparams import HParams, get_pruning_hparams
from tf1prune.plan.schedule import PolynomialDecaySparsity, round_sparsity
from tf1prune.plan.spec import PruningSpec, WeightSpec
from tf1prune.training.hooks import PruningHook, train
from tf1prune.training.lottery import LotteryTicket
from tf1prune.training.preview import ShrinkPreviewHook, shrink_preview
from tf1prune.training.pruning import Pruning
from tf1prune.training.sensitivity import sensitivity

__version__ = '0.1.0'

_moved.install()

__all__ = [
    # contrib's model_pruning names (tf1prune.graph, .plan, .training,
    # .export).
    'MASK_COLLECTION', 'MASKED_WEIGHT_COLLECTION', 'MASKED_WEIGHT_NAME',
    'THRESHOLD_COLLECTION', 'WEIGHT_COLLECTION',
    'apply_mask', 'get_masked_weights', 'get_masks', 'get_thresholds',
    'get_weight_sparsity', 'get_weights',
    'masked_conv2d', 'masked_convolution', 'masked_fully_connected',
    'MaskedBasicLSTMCell', 'MaskedLSTMCell', 'get_pruning_hparams', 'Pruning',
    'train', 'graph_def_from_checkpoint', 'strip_pruning_vars_fn',
    # Records, hparams, the parsed spec and the schedule.
    'HParams', 'LSTMStateTuple', 'MaskedWeight', 'masked_weight_records',
    'PolynomialDecaySparsity', 'PruningSpec', 'WeightSpec',
    # Training loops (tf1prune.training).
    'PruningHook',
    # Stacking and wrapping RNN cells (tf1prune.graph.rnn_wrappers).
    'DropoutWrapper', 'MultiRNNCell', 'ResidualWrapper',
    # Batch normalization, slim-compatible (tf1prune.graph.batch_norm).
    'batch_norm',
    # Locks (tf1prune.graph.locks).
    'LOCK_COLLECTION', 'Lock', 'LockHook', 'bake_masks_op',
    'capture_lock_values_op', 'lock', 'lock_records',
    # Patching model code (tf1prune.graph.scopes).
    'locking_scope', 'pruning_scope',
    # Lottery tickets (tf1prune.training.lottery, tf1prune.plan.schedule).
    'LotteryTicket', 'round_sparsity',
    # Coupled channels (tf1prune.channels.training_graph).
    'ChannelGroup', 'GroupMember', 'find_channel_groups',
    'format_channel_groups',
    # Exporting, stripping and shrinking frozen graphs (tf1prune.export).
    'ShrinkReport', 'StripReport', 'shrink_graph_def', 'shrink_pb',
    # What the shrink would remove, during training (tf1prune.training).
    'ShrinkPreviewHook', 'shrink_preview',
    # A metric with part of each channel group removed (tf1prune.training).
    'sensitivity',
    'strip_checkpoint', 'TrainingGraphError', 'inference_graph_def',
    'write_inference_graph',
]
