"""Folding masks into weights: each `.../masked_weight` Mul becomes a Const.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export._fold import fold_masks
    >>> from tf1prune.export._lazy_graph import LazyGraph
    >>> with tf.Graph().as_default() as g:
    ...   w = tf.constant([[1.0, 2.0], [3.0, 4.0]], name='fc/weights')
    ...   m = tf.constant([[1.0, 0.0], [0.0, 1.0]], name='fc/mask')
    ...   masked = tf.multiply(m, w, name='fc/masked_weight')
    >>> lazy = LazyGraph.from_graph_def(g.as_graph_def())
    >>> [(f.layer, f.weight, f.mask, f.node) for f in fold_masks(lazy)]
    [('fc', 'fc/weights', 'fc/mask', 'fc/masked_weight')]
    >>> lazy.node('fc/masked_weight').op, lazy.source('fc/masked_weight')().tolist()
    ('Const', [[1.0, 0.0], [0.0, 4.0]])

A mask and a weight are found by following Identity/Snapshot/Enter inputs
back to constants; a weight computed from constants only (e.g. the parts of a
partitioned variable, concatenated) is computed with TensorFlow when its
value is read. A Mul inside a v1 while loop becomes the constant outside the
loop and the chain of Enters that brought the weight in.
"""

import collections
import re

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.graph_index import GraphIndex
from tf1prune.export._lazy_graph import tensor_proto
from tf1prune.export.names import split_input

_MASKED_WEIGHT = re.compile(r'(^|/)masked_weight(_\d+)?$')
_MASK = re.compile(r'(^|/)mask(_\d+)?$')


class _Fold(collections.namedtuple('_Fold', [
    'node', 'layer', 'weight', 'mask', 'read_weight', 'read_mask', 'dtype'])):
  """One masked weight folded into constant `node` (names, value thunks)."""

  def apply_mask(self, weight):
    """Returns `weight * mask`, computed in `weight`'s memory if it can."""
    if weight.dtype != self.dtype or not weight.flags.writeable:
      weight = weight.astype(self.dtype)
    np.multiply(weight, self.read_mask().astype(self.dtype, copy=False),
                out=weight)
    return weight

  def value(self):
    return self.apply_mask(self.read_weight())


def _resolve(nodes, name, lazy):
  """Follows Identity/Enter from input `name` to a constant.

  Returns:
    (const node name, [Enter nodes passed, innermost first]) or (None, []).
  """
  enters = []
  node, port = split_input(name)
  while node in nodes:
    current = nodes[node]
    if current.op == 'Const' and port == 0:
      return current.name, enters
    if current.op in ('Identity', 'Snapshot', 'Enter') and port == 0:
      if current.op == 'Enter':
        enters.append(current)
      node, port = split_input(current.input[0])
      continue
    break
  return None, []


_NOT_CONSTANT = re.compile(
    r'^(Placeholder.*|Enter|Merge|Switch|Exit|NextIteration|LoopCond|.*While|'
    r'.*If|.*Case|.*PartitionedCall|Random.*|Stateless.*|TruncatedNormal|'
    r'Multinomial|.*Variable.*|Iterator.*)$')


def _evaluator(lazy, nodes, tensor, mul):
  """Thunk computing `tensor` from constants with TF (e.g. a concatenation of
  the parts of a partitioned weight), or raises ValueError if it depends on
  anything else."""
  functions = set(f.signature.name for f in lazy.graph_def.library.function)
  needed, stack = set(), [split_input(tensor)[0]]
  while stack:
    name = stack.pop()
    if name in needed:
      continue
    node = nodes.get(name)
    if node is None or _NOT_CONSTANT.match(node.op) or node.op in functions:
      raise ValueError(
          'cannot fold masked weight %r: its input %r depends on %s, not only '
          'on constants; freeze the graph first (graph_def_from_checkpoint)'
          % (mul, tensor, repr(name) if node is None else
             'node %r (op %s)' % (name, node.op)))
    needed.add(name)
    stack.extend(split_input(i)[0] for i in node.input)
  if len(needed) == 1 and nodes[split_input(tensor)[0]].op == 'Const':
    return lazy.source(split_input(tensor)[0])
  order = [n for n in lazy.graph_def.node if n.name in needed]
  sources = {n.name: lazy.source(n.name) for n in order
             if lazy.is_deferred(n.name)}

  def evaluate():
    graph_def = tf.GraphDef()
    graph_def.versions.CopyFrom(lazy.graph_def.versions)
    for node in order:
      copy = graph_def.node.add()
      copy.CopyFrom(node)
      if node.name in sources:
        copy.attr['value'].tensor.CopyFrom(tensor_proto(
            sources[node.name](), node.attr['dtype'].type))
    name, port = split_input(tensor)
    with tf.Graph().as_default() as graph:
      tf.import_graph_def(graph_def, name='')
      with tf.Session(graph=graph) as session:
        return session.run('%s:%d' % (name, port))
  return evaluate


def fold_masks(lazy):
  """Replaces each masked-weight Mul of `lazy` by a constant.

  Args:
    lazy: a frozen `LazyGraph` (the Mul inputs lead to constants); edited.

  Returns:
    A list of `_Fold`, one per folded Mul, in graph order.

  Raises:
    ValueError: a masked weight whose inputs are not two constants.
  """
  graph_def = lazy.graph_def
  nodes = GraphIndex(graph_def.node).nodes
  folds = []
  added = []   # (const name, dtype, thunk, [Enter hops]), appended at the end.
  for node in graph_def.node:
    if node.op != 'Mul' or not _MASKED_WEIGHT.search(node.name):
      continue
    data = [i for i in node.input if not i.startswith('^')]
    if len(data) != 2:
      raise ValueError('masked weight %r has %d inputs, expected 2 (mask, '
                       'weight)' % (node.name, len(data)))
    resolved = [_resolve(nodes, i, lazy) + (i,) for i in data]
    (a, a_enters, a_in), (b, b_enters, b_in) = resolved
    if b and _MASK.search(b) and not (a and _MASK.search(a)):
      (a, a_enters, a_in), (b, b_enters, b_in) = resolved[1], resolved[0]
    mask, weight, enters = a, b, b_enters or a_enters
    read_mask = lazy.source(mask) if mask else _evaluator(lazy, nodes, a_in,
                                                          node.name)
    read_weight = lazy.source(weight) if weight else _evaluator(
        lazy, nodes, b_in, node.name)
    mask, weight = mask or split_input(a_in)[0], weight or (
        split_input(b_in)[0])
    dtype = node.attr['T'].type
    np_dtype = tf.as_dtype(dtype).as_numpy_dtype

    const_name = node.name if not enters else node.name + '/folded'
    layer = re.sub(r'/mask(_\d+)?$', '', mask)
    fold = _Fold(const_name, layer, weight, mask, read_weight, read_mask,
                 np_dtype)
    folds.append(fold)
    if enters:
      # Inside a while loop (v1 control flow): the constant lives outside,
      # the Mul becomes the chain of Enters that brought the weight in.
      added.append((const_name, dtype, fold.value, _enter_hops(
          node, enters, const_name, dtype)))
    else:
      lazy.make_const(node, dtype, fold.value)
  for const_name, dtype, read, hops in added:
    lazy.add_const(const_name, dtype, read)
    for hop in hops:
      graph_def.node.add().CopyFrom(hop)
  return folds


def _enter_hops(node, enters, source, dtype):
  """Makes `node` the last of a copy of `enters` fed by `source`.

  Returns the other hops (new nodes), outermost first.
  """
  hops = []
  for depth, enter in enumerate(reversed(enters)):
    hop = tf.NodeDef()
    hop.CopyFrom(enter)
    hop.attr['T'].type = dtype
    hop.attr['is_constant'].b = True
    del hop.input[:]
    hop.input.append(source)
    hop.name = node.name if depth == len(enters) - 1 else (
        '%s/folded/enter_%d' % (node.name, depth))
    if hop.name == node.name:
      node.CopyFrom(hop)
    else:
      hops.append(hop)
    source = hop.name
  return hops
