"""Offline GraphDef pipeline: checkpoint -> frozen, stripped, shrunk `.pb`.

Nothing here touches a training graph: it reads checkpoints and GraphDefs and
writes files, so it runs in a process of its own (`strip_pruning_vars`,
`prune_checkpoint`) or after training.

    >>> from tf1prune import export
    >>> sorted(export.__all__)[:3]
    ['CheckpointPruneError', 'LayerShrink', 'LayerStats']

- `strip_checkpoint`: latest checkpoint -> frozen `.pb` whose masked weights are
  constants `weight * mask`, with a `StripReport`.
- `graph_def_from_checkpoint`, `strip_pruning_vars_fn`: the same in two steps,
  in memory (contrib's names).
- `shrink_graph_def`, `shrink_pb`: remove output channels whose filters are all
  zero, and the inputs that read them (`ShrinkReport`).
- `prune_checkpoint`: one-shot pruning of a saved checkpoint.
- `write_tflite`: a TFLite model of a frozen graph (TF 2.x), sparse-encoded
  when that is smaller.
- `write_atomically`: a file appears whole or not at all.

Inside (private modules, one concern each), in the order `strip_checkpoint`
uses them: `_names` (output and input names), `_checkpoint` (prefix, meta
graph, variable values), `_graph_index` (nodes by name, consumers),
`_lazy_graph` (a GraphDef whose constants are read when written; pruning),
`_freeze` and `_resources` (variables become constants), `_fold` (masks into
weights), `_attrs` (attributes at their default), `_stream` and `_atomic`
(writing), `_report` and `_table` (what was written). Shrinking: `_shrink`,
`_shrink_graph`, `_shrink_border`, `_shrink_report`. Checkpoint pruning:
`_checkpoint_prune`. `_graph_io` keeps the old `tf1prune.graph_io` names.
"""

from tf1prune.export._checkpoint_prune import CheckpointPruneError, prune_checkpoint
from tf1prune.export._graph_io import write_atomically
from tf1prune.export._report import LayerStats, StripReport
from tf1prune.export._shrink import (LayerShrink, ShrinkReport, ShrinkStop,
                                     shrink_graph_def, shrink_pb)
from tf1prune.export._strip import (graph_def_from_checkpoint, strip_checkpoint,
                                    strip_pruning_vars_fn)
from tf1prune.export._tflite import TFLiteReport, write_tflite

__all__ = ['CheckpointPruneError', 'LayerShrink', 'LayerStats', 'ShrinkReport',
           'ShrinkStop', 'StripReport', 'graph_def_from_checkpoint',
           'prune_checkpoint', 'shrink_graph_def', 'shrink_pb',
           'strip_checkpoint', 'strip_pruning_vars_fn', 'TFLiteReport',
           'write_atomically', 'write_tflite']
