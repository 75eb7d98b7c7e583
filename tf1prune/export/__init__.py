"""Offline GraphDef pipeline: checkpoint -> frozen, stripped, shrunk `.pb`.

Nothing here touches a training graph: it reads checkpoints and GraphDefs and
writes files, so it runs in a process of its own (`strip_pruning_vars`,
`prune_checkpoint`) or after training.

    >>> from tf1prune import export
    >>> sorted(export.__all__)[:3]
    ['CheckpointPruneError', 'Comparison', 'LayerShrink']

- `write_pb`: the whole export `strip_pruning_vars` runs: strip, shrink,
  TFLite and the JSON report, every file whole or not at all.
- `strip_checkpoint`: latest checkpoint -> frozen `.pb` whose masked weights are
  constants `weight * mask`, with a `StripReport`.
- `graph_def_from_checkpoint`, `strip_pruning_vars_fn`: the same in two steps,
  in memory (contrib's names).
- `inference_graph_def`, `write_inference_graph`: the model rebuilt for
  inference (`is_training=False`) frozen with a training checkpoint; a
  training graph is refused (`TrainingGraphError`, `training_ops`).
- `shrink_graph_def`, `shrink_pb`: remove output channels whose filters are all
  zero, and the inputs that read them (`ShrinkReport`).
- `compare_graph_defs`: two frozen graphs on the same random inputs
  (`Comparison`); every shrink checks itself with it, and refuses a graph
  whose outputs differ (`OutputsDiffer`).
- `prune_checkpoint`: one-shot pruning of a saved checkpoint.
- `write_tflite`: a TFLite model of a frozen graph (TF 2.x), sparse-encoded
  when that is smaller.
- `write_atomically`: a file appears whole or not at all.

Inside, one concern each, in the order `strip_checkpoint` uses them:
`names` (output and input names), `_checkpoint` (prefix, meta graph,
variable values), `graph_index` (nodes by name, consumers), `_lazy_graph` (a
GraphDef whose constants are read when written; pruning), `_freeze` and
`resources` (variables become constants), `_fold` (masks into weights),
`attrs` (attributes at their default), `stream` and `atomic` (writing),
`_report` and `table` (what was written), `training_ops` (no training-mode
ops frozen by accident), `inference` (rebuilt models), `verify` (two graphs
compared), `progress` (a
callback, and the console scripts' terminal line). The shrink is the subpackage
`tf1prune.export.shrink`; checkpoint pruning is `checkpoint_prune`;
`graph_io` keeps the old `tf1prune.graph_io` names. Modules without a
leading underscore are imported by other subpackages too.
"""

from tf1prune.export.checkpoint_prune import CheckpointPruneError, prune_checkpoint
from tf1prune.export.graph_io import write_atomically
from tf1prune.export._report import LayerStats, StripReport
from tf1prune.export.shrink import (LayerShrink, ShrinkReport, ShrinkStop,
                                    shrink_graph_def, shrink_pb)
from tf1prune.export._strip import (graph_def_from_checkpoint, strip_checkpoint,
                                    strip_pruning_vars_fn)
from tf1prune.export.inference import inference_graph_def, write_inference_graph
from tf1prune.export.training_ops import TrainingGraphError
from tf1prune.export._tflite import TFLiteReport, write_tflite
from tf1prune.export.pipeline import write_pb
from tf1prune.export.verify import Comparison, OutputsDiffer, compare_graph_defs

__all__ = ['CheckpointPruneError', 'Comparison', 'LayerShrink', 'LayerStats',
           'OutputsDiffer', 'ShrinkReport', 'ShrinkStop', 'StripReport',
           'TrainingGraphError', 'compare_graph_defs',
           'graph_def_from_checkpoint', 'inference_graph_def',
           'prune_checkpoint', 'shrink_graph_def', 'shrink_pb',
           'strip_checkpoint', 'strip_pruning_vars_fn', 'TFLiteReport',
           'write_atomically', 'write_inference_graph', 'write_pb',
           'write_tflite']
