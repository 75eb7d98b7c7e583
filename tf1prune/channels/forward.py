"""Forward propagation: the channel ids of every tensor the seeds reach.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.channels import Forward, GraphView
    >>> with tf.Graph().as_default() as g:
    ...   a = tf.placeholder(tf.float32, [None, 4, 4, 3])
    ...   b = tf.placeholder(tf.float32, [None, 4, 4, 3])
    ...   y = tf.nn.relu(a + b)
    >>> walk = Forward(GraphView(g))
    >>> ids = walk.seed(a, 3), walk.seed(b, 3)
    >>> walk.run()
    >>> [walk.sets.find(i) for i in walk.ids[y.name]]
    [0, 1, 2]

`Forward(view)` visits the view's nodes in order (`view.walk_order()`,
topological): a node with an input that carries channels gets its
`ChannelOp` (`classify`), and its output the ids `combine` gives (the ops
that tie channels union them). Where the channels end, nothing is recorded,
except:

- `blocked[id]`: the channel is added (an `additive` op of the table) to a
  tensor that carries no channels (an identity shortcut from the input);
  it cannot be removed;
- `outputs[id]`: the channel reaches an op of `OUTPUT_OPS` (a softmax, a
  softmax loss, an argmax), or nothing reads it: it is one of the model's
  outputs.

A channel is read where an op takes a tensor that carries it and does not
carry it on (the next layer, a loss, a reduction over the channels, any op
the table does not pass); ops that carry it on (an activation, an identity,
an add) pass the question to their output; a one-channel map that such an
op broadcasts over the channels (spatial attention) is read there. A
channel that no op reads (every
tensor that carries it is read by nothing, or only by ops of `NOT_READING`:
summaries, `tf.print`, shape reads) is the graph's final output, the
inference graph's logits: `outputs[id]` says 'nothing reads them (<the last
such tensor>)'. For this the view also needs `consumers(tensor) -> [(node,
input index)]`.

`spread(node, ids)`, if given, may replace the input ids of a depthwise conv
before they are spread (the training walk adds its filter as a member).
Tensors are keyed by `view.key(tensor)`.

The training walk uses `Forward` as it is. The shrink's `RegionWalk`
(`tf1prune.export.shrink.regions`) is the same propagation over the frozen
view, seeded at every layer, with stricter conditions in its hooks: `takes`
(the inputs that make a node visited, and that `classify` counts as
carrying channels), `classify` (a `ChannelOp`, or a record with its fields,
or why not), `ended` (where the channels end), `input_ids` (the ids of an
input that has none yet), `fits` (the output's ids) and `visited`.
"""

from tf1prune.channels.classify import classify
from tf1prune.channels.propagate import UnionFind, combine, split_parts
from tf1prune.channels.table import NOT_READING, OUTPUT_OPS


class Forward(object):
  """Channel ids of tensors, forward from seeds (see the module docstring).

  Attributes:
    view: the channel view.
    sets: the `UnionFind` of channel elements.
    ids: {tensor key: list of ids (None for a channel no seed gave)}.
    blocked: {id: why it cannot be removed}.
    outputs: {id: why it is one of the model's outputs}.
  """

  def __init__(self, view, spread=None):
    self.view = view
    self.sets = UnionFind()
    self.ids = {}
    self.blocked = {}
    self.outputs = {}
    self._spread = spread
    # nodes whose output carries their inputs' ids -> the inputs they read
    # without carrying them on (a map broadcast over the channels)
    self._passed = {}

  def seed(self, tensor, channels):
    """Gives `tensor` `channels` new ids; returns them (a list)."""
    ids = self.sets.add(channels).tolist()
    self.ids[self.view.key(tensor)] = ids
    return ids

  def carries(self, tensor):
    return self.view.key(tensor) in self.ids

  def takes(self, tensor):
    """True if a node that reads `tensor` is visited, and `classify`
    counts it as carrying channels: it has ids (`carries`)."""
    return self.carries(tensor)

  def classify(self, node):
    """(ChannelOp, None), or (None, why) where the channels end."""
    return classify(self.view, node, self.takes)

  def ended(self, node, why):
    """The channels that `node` takes end there, `why`."""

  def input_ids(self, node, tensor):
    """The ids of `tensor`, an input that `node` carries on; None: `node`
    is left (its output gets no ids)."""
    return self.ids.get(self.view.key(tensor))

  def fits(self, node, found, out):
    """True if `out` (None: the widths do not fit `found`) are the ids of
    `node`'s output."""
    return out is not None

  def visited(self, node, found):
    """`node` passes (`found`): its output gets the ids `fits` took."""

  def run(self):
    """Visits every node whose output has no ids yet, in view order."""
    for node in self.view.walk_order():
      out = self.view.output(node)
      if out is not None and not self.carries(out):
        self._visit(node)
    self._mark_unread()

  def _reads(self, node):
    return self.view.op_type(node) not in NOT_READING

  def _mark_unread(self):
    """Marks as outputs the channels that no op reads (module docstring)."""
    view, read, ends = self.view, set(), []
    for node in self.view.walk_order():
      passed = self._passed.get(view.name(node))
      if passed is not None or self._reads(node):
        for index, tensor in enumerate(view.inputs(node)):
          if self.carries(tensor) and (passed is None or index in passed):
            read.update(self.sets.find(i) for i in self.ids[view.key(tensor)]
                        if i is not None)
      for out in view.all_outputs(node):   # a split's too
        if out is not None and self.carries(out) and not any(
            self._reads(user) for user, _ in view.consumers(out)):
          ends.append(out)
    for tensor in reversed(ends):   # the last unread tensor names them
      ids = [i for i in self.ids[view.key(tensor)]
             if i is not None and self.sets.find(i) not in read]
      self._mark(self.outputs, ids, 'nothing reads them (%s)' % (
          view.key(tensor),))

  def _mark(self, table, ids, why):
    for i in ids:
      if i is not None:
        table.setdefault(self.sets.find(i), why)

  def _visit(self, node):
    view = self.view
    inputs = view.inputs(node)
    carried = [i for i, t in enumerate(inputs) if self.takes(t)]
    if not carried:
      return
    found, why = self.classify(node)
    if found is None:
      self.ended(node, why)
      if view.op_type(node) in OUTPUT_OPS:
        for i in carried:
          self._mark(self.outputs, self.ids.get(view.key(inputs[i]), ()),
                     'they reach %s (%s)' % (view.op_type(node),
                                             view.name(node)))
      return
    if found.kind == 'identity_n':
      for tensor, out in zip(inputs, view.all_outputs(node)):
        if self.carries(tensor):
          self.ids[view.key(out)] = self.ids[view.key(tensor)]
      self._passed[view.name(node)] = ()
      return
    ids = {}
    for i in found.inputs:
      ids[i] = self.input_ids(node, inputs[i])
      if ids[i] is None:
        return
    if found.kind == 'depthwise' and self._spread is not None:
      ids[0] = self._spread(node, ids[0])
    out = combine(self.sets, found, ids)
    if not self.fits(node, found, out):
      return
    self.visited(node, found)
    if found.rule.additive:
      for index in found.loose:
        self._mark(self.blocked, out, (
            'added to %s, which no masked weight produces (in %s)' % (
                view.key(inputs[index]), view.name(node))))
    if found.kind == 'split':   # each output its part
      for tensor, part in zip(view.all_outputs(node),
                              split_parts(found, out)):
        self.ids[view.key(tensor)] = part
    else:
      self.ids[view.key(view.output(node))] = out
    self._passed[view.name(node)] = tuple(found.loose)
