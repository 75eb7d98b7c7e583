"""The shrink: a frozen graph without the channels pruning emptied.

    >>> from tf1prune.export import shrink
    >>> shrink.shrink_graph_def is shrink.rounds.shrink_graph_def
    True

One module per step, in the order `shrink_graph_def` runs them:

- `prepare`: constant sub-graphs evaluated, batch norms folded into scales.
- `frozen_graph`: the mutable view of the GraphDef the steps share.
- `regions`: which tensors' channels go together: one `channels.Forward`
  walk of the graph per round (`RegionWalk`), a region per emptied layer.
- `removed_values`: what a removed channel is at each tensor of a region.
- `padding`: what a zero-padded conv or pool makes of a constant channel.
- `border_maps`: what those position-dependent values give a conv's output,
  as one constant map added with its bias.
- `extra_channels`: those values as extra input channels, where a map is not
  used.
- `rewrite`: removes a region's channels and folds what they gave.
- `report`: parameters, FLOPs and stops (`ShrinkReport`).
- `rounds`: the steps above, round after round until nothing changes:
  `shrink_graph_def`, `shrink_pb`.
"""

from tf1prune.export.shrink.report import LayerShrink, ShrinkReport, ShrinkStop
from tf1prune.export.shrink.rounds import shrink_graph_def, shrink_pb

__all__ = ['LayerShrink', 'ShrinkReport', 'ShrinkStop', 'shrink_graph_def',
           'shrink_pb']
