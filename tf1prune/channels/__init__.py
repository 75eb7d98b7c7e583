"""Which channels go together: one op table, one union-find, one propagation.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.channels import GraphView, classify, rule_of
    >>> rule_of('Sigmoid').kind, rule_of('Softmax').why
    ('elementwise', 'softmax mixes all channels')

Training (`tf1prune.find_channel_groups`, `coupled_filter` pruning) and
export (the shrink, `tf1prune.export.shrink`) ask the same questions of a
graph: which output channels of which layers must be removed together, and
what a removed channel (constant per example) becomes downstream. Both are
answered here, once:

- `table`: a `Rule` per TF op type (how channels go through it, and how a
  constant channel does: a NumPy function, a map over positions, or not);
- `classify`: a node's `ChannelOp` (which inputs carry channels, which are
  per-channel parameters, the concat widths, depthwise multiplier, ...) or
  why its channels end there;
- `propagate`: the `UnionFind` of channel elements and `combine` (and
  `tie`, for the Keras shrink's view), which union the elements an op ties;
- `forward`: `Forward`, the propagation from seed tensors through a view
  (the training walk; it marks blocked channels and the model's outputs:
  those that reach a softmax or argmax, or that nothing reads);
- `graph_view`: `GraphView`, the training `tf.Graph`; the frozen GraphDef's
  view is the shrink's `FrozenGraph` (`tf1prune.export.shrink.frozen_graph`);
- `groups`: `GroupWalk`, the members of the channel groups (the weights
  whose filters go together) over any view: the training graph's
  (`find_channel_groups`) and the Keras `Pruner`'s.

There is one propagation: the training walk is `Forward` as it is; the
shrink's regions come from `RegionWalk` (`tf1prune.export.shrink.regions`),
the same `Forward` run once over the frozen view with every Conv2D and
MatMul output seeded, the shrink's stricter conditions (constants it can
edit, what pins a channel, what breaks a region) in `Forward`'s hooks.

The view protocol (what `classify` and `Forward` call; a Keras-layer view
implements the same methods):

- `walk_order() -> [node]`: every node, in a topological order;
- `name(node) -> str`, `op_type(node) -> str` (the TF op type: a table
  row);
- `inputs(node) -> [tensor]`: the data inputs, in order;
- `output(node) -> tensor`: output 0 (the one that carries channels);
  `all_outputs(node) -> [tensor]`: every output (for `IdentityN`);
- `key(tensor) -> hashable`: a tensor's name;
- `consumers(tensor) -> [(node, input index)]`: the nodes that read it
  (`Forward` only: a channel that nothing reads is a model output);
- `shape(tensor) -> [int or None] or None`: the static shape;
- `constant(tensor) -> ndarray or None`: its value, if a constant;
- `attr(node, name, default)`: an attribute as a Python value (str, not
  bytes; a NumPy dtype for a type).

Nodes and tensors are whatever the view likes (`tf.Operation` / `tf.Tensor`,
`NodeDef` / input name), used as given.
"""

from tf1prune.channels.classify import ChannelOp, classify, per_channel
from tf1prune.channels.forward import Forward
from tf1prune.channels.graph_view import GraphView
from tf1prune.channels.propagate import UnionFind, combine, tie
from tf1prune.channels.table import (OUTPUT_OPS, POSITIONAL, RULES, Rule,
                                     passes_value, rule_of)

__all__ = ['ChannelOp', 'Forward', 'GraphView', 'OUTPUT_OPS', 'POSITIONAL', 'RULES',
           'Rule', 'UnionFind', 'classify', 'combine', 'passes_value',
           'per_channel', 'rule_of', 'tie']
