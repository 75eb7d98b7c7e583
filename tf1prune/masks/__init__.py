"""Mask math: pure functions of tensors, `scores, sparsity -> mask`.

Nothing here creates a variable or reads a collection, so every piece can be
checked against a NumPy reference and reused outside graphs (the Keras
integration uses the same functions).

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks import magnitude_mask
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   mask, threshold = sess.run(
    ...       magnitude_mask(tf.constant(np.arange(1., 101.)), 0.5))
    >>> int(mask.sum()), float(mask[49]), float(mask[50]), float(threshold)
    (50, 0.0, 1.0, 51.0)

A granularity decides which entries share one score and one keep/drop
decision: `Element` (each weight), `Block` (rank-2 blocks), the structured
`Kernel`, `Filter`, `InputChannel`, `ChannelBlock`, `NM` (N of every M), and
`CoupledFilter` (filters of coupled channels,
`tf1prune.channels.training_graph`).
Each is a small class with one method, `compute_mask(weight, sparsity,
select)`.
"""

from tf1prune.masks._budget import budget_masks, group_floors, minimum_keep
from tf1prune.masks._coupled import (REDUCTIONS, CoupledFilter, CoupledUnits,
                                     coupled_filter_masks, unit_keep_count)
from tf1prune.masks._global import global_masks
from tf1prune.masks._granularity import Block, Element, Granularity
from tf1prune.masks._index import index_mask
from tf1prune.masks._select import (histogram_threshold, keep_count,
                                    magnitude_mask)
from tf1prune.masks._structured import (IMPORTANCES, NM, ChannelBlock, Filter,
                                        InputChannel, Kernel)

__all__ = ['Block', 'ChannelBlock', 'CoupledFilter', 'CoupledUnits', 'Element',
           'Filter', 'Granularity', 'budget_masks', 'group_floors',
           'IMPORTANCES', 'InputChannel', 'Kernel', 'NM', 'REDUCTIONS',
           'coupled_filter_masks', 'global_masks', 'histogram_threshold',
           'index_mask', 'keep_count', 'magnitude_mask', 'minimum_keep',
           'unit_keep_count']
