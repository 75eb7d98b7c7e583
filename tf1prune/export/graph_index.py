"""One index of a GraphDef (or function body): nodes by name, who reads what.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export.graph_index import GraphIndex
    >>> with tf.Graph().as_default() as g:
    ...   a = tf.constant([1.0, 2.0], name='a')
    ...   b = tf.identity(a, name='b')
    ...   c = tf.add(a, b, name='c')
    >>> index = GraphIndex(g.as_graph_def().node)
    >>> [(node.name, i, port) for node, i, port in index.users['a']]
    [('b', 0, 0), ('c', 0, 0)]
    >>> [(node.name, i) for node, i in index.consumers_of('b:0')]
    [('c', 1)]
    >>> sorted(index.reachable(['b']))
    ['a', 'b']

`nodes` maps names to the `NodeDef`s themselves (edits show through);
`users[name]` lists the data inputs that read any output of node `name`, as
`(node, input index, port)` in graph order (control inputs are not listed).
In a function body an input reads `arg` or `node:output_arg:index`: its port
is then the str after the node name ('' for an argument, 'output:0', ...).
The index is a snapshot: after editing inputs, update `users` or build a new
index.
"""

import collections

from tf1prune.export.names import split_input


def _split_function_input(ref):
  """'^a' -> ('a', -1); 'n:out:0' -> ('n', 'out:0'); 'arg' -> ('arg', '')."""
  if ref.startswith('^'):
    return ref[1:], -1
  node, _, port = ref.partition(':')
  return node, port


class GraphIndex(object):
  """Nodes by name and the data consumers of each node.

  Args:
    nodes: the `NodeDef`s, e.g. `graph_def.node` or `function.node_def`.
    function: True when `nodes` is a function body (inputs `node:out:i`).

  Attributes:
    nodes: {name: NodeDef}, in graph order.
    users: {node name: [(consumer NodeDef, input index, port)]}, data inputs
      only, in graph order.
  """

  def __init__(self, nodes, function=False):
    nodes = list(nodes)
    self.nodes = collections.OrderedDict((node.name, node) for node in nodes)
    self._split = _split_function_input if function else split_input
    self.users = collections.defaultdict(list)
    for node in nodes:
      for index, ref in enumerate(node.input):
        source, port = self._split(ref)
        if port != -1:
          self.users[source].append((node, index, port))

  def consumers_of(self, ref):
    """[(consumer NodeDef, input index)] of the tensor `ref` ('node:port')."""
    source, port = self._split(ref)
    return [(node, index) for node, index, used in self.users.get(source, ())
            if used == port]

  def reachable(self, outputs):
    """Names of the nodes `outputs` depend on (data and control inputs).

    Raises:
      ValueError: an input names a node that does not exist.
    """
    seen = set()
    stack = list(outputs)
    while stack:
      name = stack.pop()
      if name in seen:
        continue
      if name not in self.nodes:
        raise ValueError('the graph is broken: node %r is an input but does '
                         'not exist' % name)
      seen.add(name)
      stack.extend(self._split(i)[0] for i in self.nodes[name].input)
    return seen
