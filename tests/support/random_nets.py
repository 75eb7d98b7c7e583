"""Random small NHWC nets with emptied filters, and what a shrink must leave.

    >>> import numpy as np
    >>> from tests.support.random_nets import generate
    >>> net = generate(3)
    >>> net.outputs, sorted(net.inputs)
    (['y'], ['x'])

`generate(seed)` draws a net from the ops the channel table knows: Conv2D
(1x1 or 3x3, SAME or VALID, strides 1 or 2, with or without a bias),
depthwise convs (multiplier 1 or 2), inference batch norms with random
statistics (some scales 0; after a layer, where they are folded into it, or
after an add, a concat or a pool, where they stay a Mul and a BiasAdd), the
usual activations, swish, residual adds (of two branches, or of the input),
concats, squeeze-and-excitation gates, spatial attention (`x *
sigmoid(conv(x) -> 1 channel)`, a map broadcast over the channels), explicit
pads, max and average pools, 1x1 convs written as `Reshape [N*H*W, C] ->
MatMul -> Reshape [N, H, W, C']`, and a dense head after a global mean or
max, or a flatten; the height and width are static or unknown. Kernels come
from TF's `glorot_uniform_initializer`; then some filters are emptied (at
random per layer, or every filter of some channels that go together, with
biases that are 0 or not). No conv has one input and one output channel:
TF 2.21's oneDNN kernels get those wrong or abort on them (the unshrunk
graph, and every graph the process runs after it).

`expected(net, values)` is an oracle that does not use the shrink: from the
net's own description (which channels each op ties, which filters are
zero) and the values of every tensor in a run of the unshrunk graph
(`Net.run_all`), it says which channels the shrink removes under its
documented rules, and so each layer's inputs and outputs after it and the
FLOPs per example:

- a channel goes, with every channel tied to it (a class), when its value
  at every layer that reads it is the same for every example, known to the
  shrink and finite, and no graph output or input holds it. Known to the
  shrink: an emptied filter's output (0) and what the ops after it make of
  it; a product with 0 (a batch norm scale of 0, a zero channel times
  anything, a zero depthwise filter); where the height and width are
  unknown, only values that are the same at every position; a reshape of
  positions into rows only for values the same at every position, and
  nothing of a map broadcast over the channels;
- of a tensor whose every channel goes, the first stays; where a Conv2D
  or depthwise conv would be left with one input and one output channel
  (and had more), two stay in its output (or, where that had one, its
  input);
- a filter whose weights on the channels left are all zero is emptied, and
  the rule runs again, until nothing changes.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

LAYERS = ('conv', 'dense', 'depthwise')
_ACTS = ('relu', 'relu6', 'tanh', 'sigmoid', 'elu', 'leaky', 'swish', 'none')
_ZERO_KEEPING = ('relu', 'relu6', 'tanh', 'elu', 'leaky', 'swish', 'none')


class Node(object):
  """One op of a generated net (its `kind` and what it needs)."""

  def __init__(self, kind, inputs, width, size, **params):
    self.kind = kind
    self.inputs = list(inputs)
    self.width = width          # channels (last axis)
    self.size = size            # (H, W) at the feed size; None: rank 2
    self.params = params
    self.rows = 1               # rank 2: rows per example
    if size is None and kind == 'rows':
      self.rows = inputs[0].size[0] * inputs[0].size[1]
    elif size is None and inputs and inputs[0].size is None:
      self.rows = inputs[0].rows
    self.name = None            # the node that outputs it
    self.layer = None           # the Conv2D / MatMul / depthwise node
    self.ids = None             # channel elements (the oracle's)


class Net(object):
  """A generated net: its nodes, graph and feed.

  Attributes:
    seed: what `generate` was given.
    nodes: the `Node`s in order (a topological one).
    static: True if height and width are static.
    graph_def: the frozen GraphDef (weights are constants).
    inputs: {placeholder name: the feed's shape}.
    outputs: the output node names.
    text: one line per node, for a failure message.
  """

  def __init__(self, seed, nodes, static, graph_def, batch):
    self.seed = seed
    self.nodes = nodes
    self.static = static
    self.graph_def = graph_def
    first = nodes[0]
    self.inputs = {first.name: [batch] + list(first.size) + [first.width]}
    self.outputs = [nodes[-1].name]
    self.text = '\n'.join(_describe(n, nodes) for n in nodes)

  def feed(self, seed=0):
    rs = np.random.RandomState(seed)
    return dict((name + ':0', rs.randn(*shape).astype(np.float32))
                for name, shape in self.inputs.items())

  def run_all(self, feed):
    """{node: its output value} in the unshrunk graph.

    Each value is fetched through an Identity of its own: TF 2.21's
    remapper with oneDNN fuses a fetched conv into the op after it and then
    fails to find it ('Tensor n3:0 ... was not found in the Graph').
    """
    with tf.Graph().as_default() as graph:
      tf.import_graph_def(self.graph_def, name='')
      fetches = [tf.identity(graph.get_tensor_by_name(n.name + ':0'))
                 for n in self.nodes]
      with tf.Session(graph=graph) as sess:
        values = sess.run(fetches, feed)
    return dict(zip(self.nodes, values))


def _describe(node, nodes):
  ins = ','.join(str(nodes.index(i)) for i in node.inputs)
  extra = dict((k, v if not isinstance(v, np.ndarray) else v.shape)
               for k, v in sorted(node.params.items()))
  return '%d %s(%s) -> %s %s %s' % (nodes.index(node), node.kind, ins,
                                     node.size, node.width, extra)


class _Builder(object):
  """Draws the nodes of one net."""

  def __init__(self, rs, static):
    self.rs = rs
    self.static = static
    self.nodes = []
    self.kernels = []   # (node, shape): drawn from TF's initializer later

  def add(self, kind, inputs, width, size, **params):
    node = Node(kind, inputs, width, size, **params)
    self.nodes.append(node)
    return node

  def chance(self, p):
    return self.rs.rand() < p

  def pick(self, items):
    return items[self.rs.randint(len(items))]

  def bias(self, width):
    if self.chance(0.35):
      return np.zeros(width, np.float32)
    bias = self.rs.uniform(-1, 1, width).astype(np.float32)
    bias[self.rs.rand(width) < 0.25] = 0.0
    return bias

  # Layers ------------------------------------------------------------------

  def _out_size(self, size, k, stride, padding):
    if padding == 'SAME':
      return tuple(-(-s // stride) for s in size)
    return tuple((s - k) // stride + 1 for s in size)

  def _geometry(self, size, kernels=(1, 3)):
    k = self.pick(kernels)
    stride = 2 if min(size) >= 5 and self.chance(0.25) else 1
    padding = 'SAME' if k == 1 or min(size) < k + 2 or self.chance(0.6) \
        else 'VALID'
    return k, stride, padding, self._out_size(size, k, stride, padding)

  def conv(self, x, width, k=None, stride=None, padding=None):
    if x.width == 1:
      width = max(width, 2)   # no conv of one channel in and out (below)
    if k is None:
      k, stride, padding, size = self._geometry(x.size)
    else:
      size = self._out_size(x.size, k, stride, padding)
    node = self.add('conv', [x], width, size, strides=stride,
                    padding=padding, k=k)
    self.kernels.append((node, [k, k, x.width, width]))
    return node

  def depthwise(self, x):
    k, stride, padding, size = self._geometry(x.size)
    m = 2 if x.width == 1 or x.width <= 3 and self.chance(0.4) else 1
    node = self.add('depthwise', [x], x.width * m, size, strides=stride,
                    padding=padding, k=k, m=m)
    self.kernels.append((node, [k, k, x.width, m]))
    return node

  def dense(self, x, width):
    node = self.add('dense', [x], width, None)
    self.kernels.append((node, [x.width, width]))
    return node

  def after_layer(self, x, act=True):
    """Maybe a bias, a batch norm (NHWC only), an activation."""
    if self.chance(0.6):
      x = self.add('bias', [x], x.width, x.size, value=self.bias(x.width))
    if x.size is not None and self.chance(0.3):
      x = self.batch_norm(x)
    if act and self.chance(0.75):
      x = self.act(x)
    return x

  def batch_norm(self, x):
    w = x.width
    gamma = self.rs.uniform(0.5, 1.5, w).astype(np.float32)
    gamma[self.rs.rand(w) < 0.3] = 0.0
    beta = self.bias(w)
    mean = (self.rs.randn(w) * 0.5).astype(np.float32)
    var = self.rs.uniform(0.5, 1.5, w).astype(np.float32)
    return self.add('bn', [x], w, x.size, gamma=gamma, beta=beta, mean=mean,
                    var=var)

  def act(self, x, kind=None):
    kind = kind or self.pick(_ACTS)
    if kind == 'tanh' and x.kind == 'bn':
      # TF 2.21 with oneDNN fails on the unshrunk graph: 'Fusion is not
      # implemented: [FusedBatchNorm,Tanh]'.
      kind = 'relu'
    if kind == 'none':
      return x
    return self.add('act', [x], x.width, x.size, fn=kind)

  # Blocks ------------------------------------------------------------------

  def block(self, x):
    kinds = ['conv', 'conv', 'dw', 'res', 'concat', 'se', 'sa', 'pad',
             'pool', 'bn', 'act']
    if self.static and x.width > 0:
      kinds.append('rows')
    kind = self.pick(kinds)
    if kind == 'conv':
      return self.after_layer(self.conv(x, self.rs.randint(1, 7)))
    if kind == 'dw':
      return self.after_layer(self.depthwise(x))
    if kind == 'res' and x.width > 1:
      k = self.pick([1, 3])
      branch = self.after_layer(self.conv(x, x.width, k, 1, 'SAME'))
      if self.chance(0.5):
        short = self.after_layer(self.conv(x, x.width, 1, 1, 'SAME'),
                                 act=False)
      else:
        short = x
      out = self.add('add', [short, branch], x.width, x.size)
      return self.batch_norm(out) if self.chance(0.3) else self.act(out)
    if kind == 'concat':
      a = self.after_layer(self.conv(x, self.rs.randint(1, 4), 1, 1, 'SAME'))
      if self.chance(0.5):
        b = self.after_layer(self.conv(x, self.rs.randint(1, 4), 1, 1,
                                       'SAME'))
      else:
        b = x
      parts = [a, b] if self.chance(0.5) else [b, a]
      out = self.add('concat', parts, a.width + b.width, x.size)
      return self.batch_norm(out) if self.chance(0.3) else out
    if kind == 'se':
      squeeze = self.add('mean', [x], x.width, None, op='Mean')
      hidden = self.after_layer(self.dense(squeeze, self.rs.randint(1, 4)))
      gate = self.add('bias', [self.dense(hidden, x.width)], x.width, None,
                      value=self.bias(x.width))
      gate = self.act(gate, 'sigmoid')
      gate = self.add('expand', [gate], x.width, (1, 1))
      return self.add('mul', [x, gate], x.width, x.size)
    if kind == 'sa' and x.width > 1:
      k = self.pick([1, 3])
      attention = self.add('bias', [self.conv(x, 1, k, 1, 'SAME')], 1,
                           x.size, value=self.bias(1))
      attention = self.act(attention, 'sigmoid')
      return self.add('map_mul', [x, attention], x.width, x.size)
    if kind in ('sa', 'res'):   # one channel: a conv instead
      return self.after_layer(self.conv(x, self.rs.randint(2, 7)))
    if kind == 'pad':
      pads = [[0, 0]] + [list(self.rs.randint(0, 3, 2)) for _ in range(2)] + \
          [[0, 0]]
      size = (x.size[0] + sum(pads[1]), x.size[1] + sum(pads[2]))
      return self.add('pad', [x], x.width, size, pads=pads)
    if kind == 'pool':
      op = self.pick(['MaxPool', 'AvgPool'])
      k, stride, padding, size = self._geometry(x.size, (2, 3))
      out = self.add('pool', [x], x.width, size, op=op, k=k, strides=stride,
                     padding=padding)
      return self.batch_norm(out) if self.chance(0.3) else out
    if kind == 'bn':
      return self.batch_norm(x)
    if kind == 'act':
      return self.act(x, self.pick(['swish', 'relu', 'relu6', 'tanh']))
    rows = self.add('rows', [x], x.width, None)
    out = self.dense(rows, self.rs.randint(1, 7))
    if self.chance(0.6):
      out = self.add('bias', [out], out.width, None,
                     value=self.bias(out.width))
    out = self.add('unrows', [out], out.width, x.size)
    return self.act(out) if self.chance(0.6) else out

  def head(self, x):
    kinds = ['mean', 'max'] + (['flatten'] if self.static and
                               x.size[0] * x.size[1] * x.width <= 256 else [])
    kind = self.pick(kinds)
    if kind == 'flatten':
      flat = self.add('flatten', [x], x.size[0] * x.size[1] * x.width, None)
    else:
      flat = self.add('mean', [x], x.width, None,
                      op='Mean' if kind == 'mean' else 'Max')
    out = self.dense(flat, self.rs.randint(1, 4))
    if self.chance(0.6):
      out = self.add('bias', [out], out.width, None,
                     value=self.bias(out.width))
    return out


def _kernels(builder, seed):
  """Draws every kernel with TF's glorot_uniform_initializer."""
  with tf.Graph().as_default(), tf.Session() as sess:
    init = tf.glorot_uniform_initializer(seed=seed)
    values = sess.run([init(shape) for _, shape in builder.kernels])
  for (node, _), value in zip(builder.kernels, values):
    node.params['weight'] = value


def _empty(builder, rs):
  """Empties filters: at random per layer, and whole classes of tied
  channels (every filter that feeds them)."""
  layers = [n for n in builder.nodes if n.kind in ('conv', 'dense')]
  for node in layers:
    p = rs.choice([0.0, 0.3, 0.6, 1.0], p=[0.3, 0.35, 0.25, 0.1])
    empty = rs.rand(node.width) < p
    node.params['weight'][..., empty] = 0.0
  sets = _classes(builder.nodes)
  classes = sorted(set(sets.find(i) for n in layers for i in n.ids))
  chosen = set(c for c in classes if rs.rand() < 0.25)
  for node in layers:
    for channel, i in enumerate(node.ids):
      if sets.find(i) in chosen:
        node.params['weight'][..., channel] = 0.0


def generate(seed, static=None):
  """A random net (a `Net`) from `seed`; `static`: None draws whether its
  height and width are static."""
  rs = np.random.RandomState(seed)
  if static is None:
    static = rs.rand() < 0.6
  builder = _Builder(rs, static)
  size = (int(rs.randint(5, 10)), int(rs.randint(5, 10)))
  x = builder.add('input', [], int(rs.randint(1, 5)), size)
  for _ in range(rs.randint(1, 5)):
    x = builder.block(x)
  builder.head(x)
  _kernels(builder, seed)
  _empty(builder, rs)
  batch = 2
  graph_def = _emit(builder.nodes, static)
  return Net(seed, builder.nodes, static, graph_def, batch)


# The graph ---------------------------------------------------------------

def _act(fn, x, name):
  if fn == 'swish':
    return tf.multiply(x, tf.sigmoid(x), name=name)
  if fn == 'leaky':
    return tf.nn.leaky_relu(x, 0.2, name=name)
  return getattr(tf.nn, fn)(x, name=name)


def _emit(nodes, static):
  """The frozen GraphDef of `nodes`; sets each node's `name`."""
  with tf.Graph().as_default() as graph:
    tensors = {}
    for index, node in enumerate(nodes):
      name = 'n%d' % index
      ins = [tensors[i] for i in node.inputs]
      p = node.params
      if index == len(nodes) - 1:
        name = 'y'
      if node.kind == 'input':
        shape = [None] + (list(node.size) if static else [None, None]) + [
            node.width]
        out = tf.placeholder(tf.float32, shape, name='x')
      elif node.kind == 'conv':
        out = tf.nn.conv2d(ins[0], tf.constant(p['weight']),
                           [1, p['strides'], p['strides'], 1], p['padding'],
                           name=name)
      elif node.kind == 'depthwise':
        out = tf.nn.depthwise_conv2d_native(
            ins[0], tf.constant(p['weight']),
            [1, p['strides'], p['strides'], 1], p['padding'], name=name)
      elif node.kind == 'dense':
        out = tf.matmul(ins[0], tf.constant(p['weight']), name=name)
      elif node.kind == 'bias':
        out = tf.nn.bias_add(ins[0], tf.constant(p['value']), name=name)
      elif node.kind == 'bn':
        out = tf.nn.fused_batch_norm(
            ins[0], p['gamma'], p['beta'], p['mean'], p['var'],
            epsilon=1e-3, is_training=False, name=name)[0]
      elif node.kind == 'act':
        out = _act(p['fn'], ins[0], name)
      elif node.kind == 'add':
        out = tf.add(ins[0], ins[1], name=name)
      elif node.kind in ('mul', 'map_mul'):
        out = tf.multiply(ins[0], ins[1], name=name)
      elif node.kind == 'concat':
        out = tf.concat(ins, 3, name=name)
      elif node.kind == 'pad':
        out = tf.pad(ins[0], p['pads'], name=name)
      elif node.kind == 'pool':
        pool = tf.nn.max_pool if p['op'] == 'MaxPool' else tf.nn.avg_pool
        out = pool(ins[0], [1, p['k'], p['k'], 1],
                   [1, p['strides'], p['strides'], 1], p['padding'],
                   name=name)
      elif node.kind == 'mean':
        reduce = tf.reduce_mean if p['op'] == 'Mean' else tf.reduce_max
        out = reduce(ins[0], [1, 2], name=name)
      elif node.kind == 'expand':
        out = tf.reshape(ins[0], [-1, 1, 1, node.width], name=name)
      elif node.kind == 'rows':
        out = tf.reshape(ins[0], [-1, node.width], name=name)
      elif node.kind == 'unrows':
        out = tf.reshape(ins[0], [-1, node.size[0], node.size[1],
                                  node.width], name=name)
      elif node.kind == 'flatten':
        out = tf.reshape(ins[0], [-1, node.width], name=name)
      else:
        raise ValueError('unknown node kind %r' % node.kind)
      tensors[node] = out
      node.name = out.op.name
  return graph.as_graph_def()


# The oracle --------------------------------------------------------------

class _Sets(object):
  def __init__(self):
    self.parent = []

  def add(self, count):
    start = len(self.parent)
    self.parent.extend(range(start, start + count))
    return list(range(start, start + count))

  def find(self, i):
    while self.parent[i] != i:
      self.parent[i] = self.parent[self.parent[i]]
      i = self.parent[i]
    return i

  def union(self, a, b):
    a, b = self.find(a), self.find(b)
    if a != b:
      self.parent[max(a, b)] = min(a, b)


def _classes(nodes):
  """Gives every node its channel elements (`ids`); returns the sets."""
  sets = _Sets()
  for node in nodes:
    ins = [i.ids for i in node.inputs]
    kind = node.kind
    if kind in ('input', 'conv', 'dense'):
      node.ids = sets.add(node.width)
    elif kind == 'depthwise':
      node.ids = [i for i in ins[0] for _ in range(node.params['m'])]
    elif kind in ('add', 'mul'):
      for a, b in zip(ins[0], ins[1]):
        sets.union(a, b)
      node.ids = list(ins[0])
    elif kind == 'concat':
      node.ids = list(ins[0]) + list(ins[1])
    elif kind == 'flatten':
      node.ids = list(ins[0]) * (node.width // len(ins[0]))
    else:   # one input whose channels it keeps (map_mul: the first)
      node.ids = list(ins[0])
  return sets


def _users(nodes):
  users = collections.defaultdict(list)
  for node in nodes:
    for i in node.inputs:
      users[i].append(node)
  return users


def _examples(node, value):
  """`value` of `node` as [examples, positions or rows, channels]."""
  value = np.asarray(value, np.float64)
  return value.reshape(-1, node.rows if node.size is None else
                       node.size[0] * node.size[1], node.width)


def _per_channel(node, value, test):
  """bool per channel: `test` of its values over the positions (or rows)
  of the first example."""
  first = _examples(node, value)[0]
  return np.array([test(first[:, c]) for c in range(node.width)], bool)


def _uniform(column):
  scale = max(np.abs(column).max(), 1e-30)
  return column.max() - column.min() <= 1e-6 * scale


class Expected(collections.namedtuple('Expected', [
    'layers', 'flops', 'removed'])):
  """The oracle's answer.

  Attributes:
    layers: {layer node name: (inputs after, outputs after)}.
    flops: FLOPs per example after (None where a size is unknown).
    removed: how many channel classes go.
  """


def _folded_scale(node, users):
  """The batch norm scale folded into layer `node`'s weight, or None."""
  follower = node
  while True:
    after = users.get(follower, [])
    if len(after) != 1:
      return None
    if after[0].kind == 'bn':
      p = after[0].params
      return p['gamma'] / np.sqrt(p['var'].astype(np.float64) + 1e-3)
    if after[0].kind != 'bias' or follower is not node:
      return None
    follower = after[0]


def _weights(node, users):
  weight = node.params['weight'].astype(np.float64)
  scale = _folded_scale(node, users)
  if scale is None:
    return weight
  if node.kind == 'depthwise':
    return weight * scale.reshape(weight.shape[2:])
  return weight * scale


def _known(nodes, users, values, static, sets, removed):
  """{node: bool per channel}: the values the shrink knows (module doc)."""
  known = {}

  def stat(node, test):
    return _per_channel(node, values[node], test)

  for node in nodes:
    kind = node.kind
    ins = [known[i] for i in node.inputs]
    uniform = stat(node, _uniform)
    spread = np.ones(node.width, bool) if static or node.size is None else \
        uniform
    if kind == 'input':
      k = np.zeros(node.width, bool)
    elif kind in ('conv', 'dense'):
      k = _empty_filters(node, users, sets, removed) & spread
    elif kind == 'depthwise':
      weight = _weights(node, users)
      zero = ~weight.reshape(-1, node.width).any(axis=0)
      k = (np.repeat(ins[0], node.params['m']) | zero) & spread
    elif kind == 'bn':
      k = ins[0] | (node.params['gamma'] == 0)
    elif kind == 'add':
      k = ins[0] & ins[1]
    elif kind == 'mul':
      zeros = [stat(i, lambda c: not c.any()) for i in node.inputs]
      k = (ins[0] & ins[1]) | (ins[0] & zeros[0]) | (ins[1] & zeros[1])
    elif kind == 'map_mul':
      k = ins[0] & stat(node.inputs[0], lambda c: not c.any())
    elif kind == 'concat':
      k = np.concatenate(ins)
    elif kind == 'pad':
      k = ins[0] & spread
    elif kind == 'flatten':
      k = np.tile(ins[0], node.width // len(ins[0]))
    elif kind == 'rows':
      k = ins[0] & stat(node.inputs[0], _uniform)
    else:   # bias, act, pool, mean, expand, unrows
      k = ins[0]
    known[node] = k
  return known


def _empty_filters(node, users, sets, removed):
  weight = _weights(node, users)
  source = node.inputs[0]
  kept = np.array([sets.find(i) not in removed for i in source.ids], bool)
  weight = weight.reshape(-1, weight.shape[-2], weight.shape[-1])
  return ~weight[:, kept].reshape(-1, node.width).any(axis=0)


def expected(net, values):
  """What the shrink leaves of `net` (an `Expected`); `values` as
  `Net.run_all` gives them (two examples at least: a value the oracle
  calls known must be the same for each)."""
  nodes, static = net.nodes, net.static
  sets = _classes(nodes)
  users = _users(nodes)
  pinned = set(sets.find(i) for i in nodes[0].ids + nodes[-1].ids)
  for node in nodes:
    if node.kind == 'map_mul':
      pinned.update(sets.find(i) for i in node.inputs[1].ids)
  layers = [n for n in nodes if n.kind in ('conv', 'dense')]
  folded = set()   # a batch norm scales their values in the shrunk graph
  for node in nodes:
    if node.kind in LAYERS and _folded_scale(node, users) is not None:
      folded.add(node)
      if users[node][0].kind == 'bias':
        folded.add(users[node][0])
  keep_two = set()
  while True:
    removed = _removed(nodes, users, values, static, sets, pinned, layers,
                       folded, keep_two)
    result = _count(nodes, sets, removed, static, len(removed))
    narrowed = set()
    for node in nodes:
      if node.kind in ('conv', 'depthwise') and \
          result.layers[node.name] == (1, 1) and \
          (node.inputs[0].width, node.width) != (1, 1):
        narrowed.add(node if node.width > 1 else node.inputs[0])
    if narrowed <= keep_two:
      return result
    keep_two |= narrowed


def _removed(nodes, users, values, static, sets, pinned, layers, folded,
             keep_two):
  """The classes that go (see the module docstring)."""
  removed = set()
  while True:
    known = _known(nodes, users, values, static, sets, removed)
    _check_known([n for n in nodes if n not in folded], values, known)
    bad = set(pinned)
    for layer in layers:
      source = layer.inputs[0]
      finite = _per_channel(source, values[source],
                            lambda c: np.isfinite(c).all())
      for channel, i in enumerate(source.ids):
        if not (known[source][channel] and finite[channel]):
          bad.add(sets.find(i))
    goes = set(sets.find(i) for n in nodes for i in n.ids) - bad - removed
    for node in nodes:   # of a tensor whose every channel goes, one stays
      left = [sets.find(i) for i in node.ids if sets.find(i) not in removed]
      need = min(2 if node in keep_two else 1, len(left))
      staying = sum(1 for c in left if c not in goes)
      for c in left:
        if staying >= need:
          break
        if c in goes:
          goes.discard(c)
          staying += left.count(c)
    if not goes:
      return removed
    removed |= goes


def _check_known(nodes, values, known):
  """A value the oracle calls known must be the same for every example."""
  for node in nodes:
    value = _examples(node, values[node])
    for c in np.flatnonzero(known[node]):
      if not np.allclose(value[0, :, c], value[-1, :, c], rtol=1e-5,
                         atol=1e-6):
        raise AssertionError('the oracle calls channel %d of node %s known, '
                             'but it differs between examples' %
                             (c, node.name))


def _count(nodes, sets, removed, static, count):
  layers, flops = {}, 0
  for node in nodes:
    if node.kind not in LAYERS:
      continue
    source = node.inputs[0]
    kept_in = sum(1 for i in source.ids if sets.find(i) not in removed)
    kept_out = sum(1 for i in node.ids if sets.find(i) not in removed)
    weight = node.params['weight']
    taps = weight.shape[0] * weight.shape[1] if weight.ndim == 4 else 1
    if node.kind == 'depthwise':
      layers[node.name] = (kept_in, kept_out)
      per = 2 * taps * kept_out
    else:
      layers[node.name] = (kept_in, kept_out)
      per = 2 * taps * kept_in * kept_out
    positions = 1 if node.size is None else node.size[0] * node.size[1]
    if node.kind == 'dense' and source.kind == 'rows':
      positions = source.inputs[0].size[0] * source.inputs[0].size[1]
    flops = None if flops is None or not static else flops + per * positions
  return Expected(layers, flops, count)
