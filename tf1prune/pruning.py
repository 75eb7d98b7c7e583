"""contrib's `model_pruning.python.pruning` module, under its own name.

    >>> # was: from tensorflow.contrib.model_pruning.python import pruning
    >>> from tf1prune import pruning
    >>> sorted(pruning.__all__)[:3], pruning.get_pruning_hparams().nbins
    (['Pruning', 'apply_mask', 'get_masked_weights'], 256)

Scripts that imported contrib's module rather than the package keep working
with that one import line changed: it holds the public names contrib's
module held. The package itself (`import tf1prune as pruning`) holds them
too, with the rest of the API.
"""

from tf1prune.graph.masking import (apply_mask, get_masked_weights, get_masks,
                                    get_thresholds, get_weight_sparsity,
                                    get_weights)
from tf1prune.plan.hparams import get_pruning_hparams
from tf1prune.training.pruning import Pruning

__all__ = ['Pruning', 'apply_mask', 'get_masked_weights', 'get_masks',
           'get_pruning_hparams', 'get_thresholds', 'get_weight_sparsity',
           'get_weights']
