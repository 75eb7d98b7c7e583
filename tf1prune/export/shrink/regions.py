"""Channel regions: the tensors of a frozen graph whose channels go together.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.frozen_graph import FrozenGraph
    >>> from tf1prune.export.shrink.regions import explore, find_layers
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4, 4, 2], name='x')
    ...   a = tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), [1] * 4, 'SAME', name='a')
    ...   b = tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), [1] * 4, 'SAME', name='b')
    ...   h = tf.concat([tf.nn.relu(a + b), x], 3, name='cat')
    ...   y = tf.nn.conv2d(h, tf.ones([1, 1, 5, 1]), [1] * 4, 'SAME', name='y')
    >>> view = FrozenGraph(g.as_graph_def(), ['y'])
    >>> layers, _ = find_layers(view)
    >>> region = explore(view, layers, 'a')
    >>> sorted(l.node.name for l in region.sources)
    ['a', 'b']
    >>> sorted(l.node.name for l, _ in region.sinks)   # x is in the concat
    ['a', 'b', 'y']
    >>> region.classes('cat')[:3].tolist() == region.classes('a').tolist()
    True

The regions of a graph come from one propagation: `RegionWalk` is the
`tf1prune.channels.Forward` of the training walk, run once over the frozen
view with every Conv2D and MatMul output seeded. Which ops keep channels
apart, and how they tie them, is the op table of `tf1prune.channels`
(every input that is not a constant carries channels); the shrink adds what
it needs to edit them: a per-channel parameter must be a constant used by
that op only, a Reshape's target too. An input that no layer's channels
reach (an identity shortcut from the input) gets channels of its own, which
its producer pins. A region is a set of tensors the walk's ops join (a
concat joins tensors whose channels stay apart, a split its input and
outputs, `name`, `name:1`, ...): it ends at the inputs of the next layers
(the sinks) and at the layers that produce its tensors (the sources). A
`StridedSlice` of channel 0:1 read only by `Shape` (the extra ones channel
of `extra_channels`) reads no channel.

Channel elements are tied into classes (the walk's union-find): a class is
one channel that can only be removed everywhere at once. A tensor used by
anything else (a graph output, an LRN, a shape read, ...) pins its
channels, with the reason; an op that reads an output other than 0 (but
a split's), or whose widths do not fit, breaks its regions.
"""

import collections

import numpy as np

from tf1prune.channels import Forward, UnionFind, rule_of
from tf1prune.channels.propagate import split_parts
# channel_const and find_layers are read from here too (rewrite, rounds).
from tf1prune.export.shrink.editable import (  # noqa: F401
    channel_const, classify, find_layers, is_const, reads_batch_size_only,
    reads_shape_only, static_rank)
from tf1prune.export.shrink.frozen_graph import split_input
from tf1prune.export.shrink.lrn import rewritten_lrn


class Region(object):
  """Tensors whose channels are tied, with their sources, sinks and pins.

  Attributes:
    ids: {tensor: int64 array of its channel elements}, the first layer's
      output first.
    sets: the `UnionFind` of the elements (the walk's).
    ops: the `Op`s between the tensors.
    sources: the `Layer`s that output tensors of the region.
    sinks: [(Layer, tensor)]: the layers that read a tensor as their data.
    pins: [(tensor, (node, op, reason))]: a use that keeps its channels.
    broken: None, or (node, op, reason): the channels do not line up.
  """

  def __init__(self, sets=None):
    self.ids = collections.OrderedDict()
    self.sets = UnionFind() if sets is None else sets
    self.ops = []
    self.sources = []
    self.sinks = []
    self.pins = []
    self.broken = None

  def classes(self, tensor):
    return np.array([self.sets.find(i) for i in self.ids[tensor]], np.int64)


class RegionWalk(Forward):
  """`Forward` over the frozen view, seeded at every Conv2D/MatMul layer.

  The shrink's hooks: every input that is not a constant carries channels;
  a node passes if the shrink can edit it (`classify`); an input that no
  layer's channels reach gets ids of its own (its producer pins them); an
  op that reads an output other than 0 (but a split's, which carries its
  part), an input whose channels are unknown or widths that do not fit
  breaks its regions. Besides the elements'
  union-find, `tensors` joins the tensors of each op passed: a region is one
  of its sets (a concat joins tensors whose channels stay apart).

  Args:
    g: the `FrozenGraph`.
    layers: {name: Layer}, as `find_layers` gives.
  """

  def __init__(self, g, layers):
    super(RegionWalk, self).__init__(g)
    self.g = g
    self.layers = dict((name, layer) for name, layer in layers.items()
                       if layer.kind != 'depthwise')
    self.tensors = UnionFind()
    self._index = {}      # tensor -> its element of `tensors`
    self.ops = {}         # node name -> Op
    self.why = {}         # node name -> why the channels end there
    self.origins = set()  # tensors whose producer the shrink does not remove
    self.breaks = {}      # tensor -> (node, op, reason)
    self.broken = set()   # the nodes that break their regions
    self._known = set(g.nodes)
    self._groups = None
    for name in self.layers:
      shape = g.shapes.get(name)
      if not shape or shape[-1] is None:
        self.breaks[name] = (name, g.nodes[name].op,
                             'the channels of %s are unknown' % name)
      else:
        self.seed(name, shape[-1])
        self._join([name])
    self.position = {}
    self.run()

  def run(self, nodes=None):
    """Visits `nodes` (default: all, in `g.order()`, which `position`
    numbers) whose output has no ids yet."""
    if nodes is None:
      order = self.g.order()
      self.position = dict((name, i) for i, name in enumerate(order))
      nodes = [self.g.nodes[n] for n in order]
    self._groups = None
    for node in nodes:
      if not self.carries(node.name):
        self._visit(node)

  def update(self):
    """Walks the nodes the shrink added since (the Add of a folded constant
    after a layer, extra channels, LRN rewrites); each is placed just after
    its inputs in `position`."""
    added = [n for n in self.g.nodes if n not in self._known]
    self._known.update(added)
    pending, order = set(added), []
    while pending:
      ready = [n for n in added if n in pending and not pending.intersection(
          split_input(i)[0] for i in self.g.nodes[n].input)]
      if not ready:   # a cycle: the graph does not import anyway
        ready = [n for n in added if n in pending]
      for name in ready:
        pending.discard(name)
        order.append(name)
        self.position[name] = 1e-3 + max([self.position.get(
            split_input(i)[0], -1) for i in self.g.nodes[name].input] + [-1])
    self.run([self.g.nodes[n] for n in order])

  def _join(self, tensors):
    for t in tensors:
      if t not in self._index:
        self._index[t] = int(self.tensors.add()[0])
    self.tensors.union([self._index[tensors[0]]] * (len(tensors) - 1),
                       [self._index[t] for t in tensors[1:]])

  def _break(self, node, reason):
    """Marks the tensors of `node` (and gives its output ids): the regions
    they are in do not line up."""
    why = (node.name, node.op, reason)
    self.broken.add(node.name)
    shape = self.g.shapes.get(node.name)
    if not self.carries(node.name) and shape and shape[-1] is not None:
      self.seed(node.name, shape[-1])
      self._join([node.name])
    for tensor in [node.name] + self.g.inputs(node):
      if self.carries(tensor):
        self.breaks.setdefault(self.g.key(tensor), why)

  def takes(self, tensor):
    return not is_const(self.g, tensor)

  def classify(self, node):
    if reads_shape_only(self.g, node):   # the extra ones channel's shape
      return None, 'it reads the shape only'
    return classify(self.g, node)

  def input_ids(self, node, tensor):
    if self.carries(tensor):   # output 0, or a split's other outputs
      return self.ids[self.g.key(tensor)]
    name, port = split_input(tensor)
    if port != 0:
      self._break(node, 'it reads an output other than 0')
      return None
    if not self.carries(name):
      shape = self.g.shapes.get(name)
      if not shape or shape[-1] is None:
        self._break(node, 'the channels of %s are unknown' % name)
        return None
      self.seed(name, shape[-1])
      self._join([name])
      self.origins.add(name)
    return self.ids[name]

  def ended(self, node, why):
    self.why[node.name] = why

  def fits(self, node, found, out):
    outputs = self.g.all_outputs(node) if found.kind == 'split' else [
        node.name]
    parts = split_parts(found, out) if found.kind == 'split' and \
        out is not None else [out]
    shapes = [self.g.shape(t) for t in outputs]
    if out is None or any(not shape or shape[-1] != len(part)
                          for shape, part in zip(shapes, parts)):
      self._break(node, 'its channels do not line up')
      return False
    return True

  def visited(self, node, found):
    self.ops[node.name] = found
    outputs = self.g.all_outputs(node) if found.kind == 'split' else [
        node.name]
    self._join([self.g.key(t) for t in outputs] + [
        self.g.key(node.input[i]) for i in found.inputs])

  def _members(self, start):
    if self._groups is None:
      self._groups = collections.defaultdict(list)
      for tensor in sorted(self._index, key=lambda t: self.position.get(
          split_input(t)[0], len(self.position))):
        self._groups[self.tensors.find(self._index[tensor])].append(tensor)
    group = self._groups[self.tensors.find(self._index[start])]
    return [start] + [t for t in group if t != start]

  def region(self, start):
    """The Region of the output tensor `start` of a Conv2D/MatMul layer."""
    region = Region(self.sets)
    region.sources.append(self.layers[start])
    if not self.carries(start):
      region.broken = self.breaks[start]
      return region
    members = self._members(start)
    for tensor in members:
      region.ids[tensor] = np.asarray(self.ids[tensor], np.int64)
      if region.broken is None:
        region.broken = self.breaks.get(tensor)
      op = self.ops.get(tensor)
      if op is not None:
        region.ops.append(op)
      elif tensor in self.layers:
        if tensor != start:
          region.sources.append(self.layers[tensor])
    for tensor in members:
      self._uses(region, tensor)
    return region

  def _pin(self, region, tensor, node, reason):
    where = (node.name, node.op)
    lrn = rewritten_lrn(self.g, node.name)
    if lrn is not None:   # the ops an LRN became still normalize
      where, reason = (lrn, 'LRN'), rule_of('LRN').why
    region.pins.append((tensor, where + (reason,)))

  def _uses(self, region, tensor):
    """Adds the sinks and pins of `tensor`'s producer and users."""
    name, read = split_input(tensor)   # read: a split's output k
    g, producer = self.g, self.g.nodes[name]
    if tensor in self.origins:
      self._pin(region, tensor, producer, 'its channels come from this %s, '
                'which the shrink does not remove' % producer.op)
    if name in g.outputs:
      self._pin(region, tensor, producer, 'it is a graph output')
    for user, index, port in g.users.get(name, []):
      if port != read:
        if g.key('%s:%d' % (name, port)) not in region.ids:   # a split's
          self._pin(region, tensor, user, 'an output other than 0 is used')
        continue
      layer = self.layers.get(user.name)
      if layer is not None:
        if index != layer.data or static_rank(g, tensor) != layer.rank:
          self._pin(region, tensor, user,
                    'it is not the data input of this layer')
        elif (layer, tensor) not in region.sinks:
          region.sinks.append((layer, tensor))
        continue
      if user.name in self.broken or reads_shape_only(g, user) or \
          reads_batch_size_only(g, user):
        continue
      op = self.ops.get(user.name)
      why = self.why.get(user.name)
      if op is None and why is None:   # a user that reads no channels
        op, why = classify(g, user)
      if op is not None and index in op.loose:
        op, why = None, ('it broadcasts this one-channel map over the '
                         'channels of its other input')
      elif op is not None and index not in op.inputs:
        op, why = None, 'it reads the tensor as a parameter'
      if op is None:
        self._pin(region, tensor, user, why)


def explore(g, layers, start):
  """The Region around the output tensor `start` of a layer in `layers`
  (one `RegionWalk`; `shrink_graph_def` keeps one walk per round)."""
  return RegionWalk(g, layers).region(start)
