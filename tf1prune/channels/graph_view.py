"""The channel view of a training `tf.Graph`.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.channels import GraphView
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4])
    ...   y = tf.nn.relu(x, name='y')
    >>> view = GraphView(g)
    >>> view.op_type(y.op), view.shape(y), [o.name for o, _ in view.consumers(x)]
    ('Relu', [None, 4], ['y'])

Nodes are `tf.Operation`s, tensors `tf.Tensor`s. The ops that
`tf.gradients` builds (under a `gradients` name scope) are left out: a
gradient reads the forward tensors but carries no channel of the model.
"""

import re

import numpy as np
import tensorflow.compat.v1 as tf

_GRADIENTS = re.compile(r'^gradients(_\d+)?/')


def is_gradient(op):
  """True for an op that `tf.gradients` built (a `Conv2DBackpropInput`
  there reads a conv's filter but is no layer of the model)."""
  return bool(_GRADIENTS.match(op.name))


def _plain(value):
  if isinstance(value, bytes):
    return value.decode('utf-8')
  if isinstance(value, tf.DType):
    return value.as_numpy_dtype
  return value


class GraphView(object):
  """A `tf.Graph` as a channel view (see `tf1prune.channels`)."""

  def __init__(self, graph):
    self.graph = graph

  def walk_order(self):
    """The model's ops in graph (creation, hence topological) order."""
    return [op for op in self.graph.get_operations() if not is_gradient(op)]

  def name(self, node):
    return node.name

  def op_type(self, node):
    return node.type

  def inputs(self, node):
    return list(node.inputs)

  def output(self, node):
    return node.outputs[0] if node.outputs else None

  def all_outputs(self, node):
    return list(node.outputs)

  def key(self, tensor):
    return tensor.name

  def consumers(self, tensor):
    uses, seen = [], set()
    for op in tensor.consumers():
      if is_gradient(op) or op.name in seen:
        continue
      seen.add(op.name)
      uses.extend((op, i) for i, t in enumerate(op.inputs) if t is tensor)
    return uses

  def shape(self, tensor):
    if tensor is None or tensor.get_shape().ndims is None:
      return None
    return tensor.get_shape().as_list()

  def constant(self, tensor):
    op = tensor.op
    while op.type == 'Identity':
      op = op.inputs[0].op
    if op.type != 'Const':
      return None
    return np.asarray(tf.make_ndarray(op.get_attr('value')))

  def attr(self, node, key, default):
    try:
      return _plain(node.get_attr(key))
    except ValueError:
      return default
