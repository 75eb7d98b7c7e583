"""The one graph index of tf1prune.export: nodes by name, who reads what."""

import pytest
import tensorflow.compat.v1 as tf

from tf1prune.export.graph_index import GraphIndex
from tf1prune.export.shrink.frozen_graph import FrozenGraph


def _node(name, *inputs):
  return tf.NodeDef(name=name, op='NoOp', input=list(inputs))


def _named(uses):
  return [(node.name, index, port) for node, index, port in uses]


def test_users_list_data_inputs_with_index_and_port_in_graph_order():
  nodes = [_node('a'), _node('s', 'a'), _node('b', 's:1', 'a', '^s'),
           _node('c', 's', 's:0', 'b:2', '^a')]
  index = GraphIndex(nodes)
  assert list(index.nodes) == ['a', 's', 'b', 'c']
  assert index.nodes['b'] is nodes[2]
  assert _named(index.users['a']) == [('s', 0, 0), ('b', 1, 0)]
  assert _named(index.users['s']) == [('b', 0, 1), ('c', 0, 0), ('c', 1, 0)]
  assert _named(index.users['b']) == [('c', 2, 2)]
  assert _named(index.users['c']) == []


def test_consumers_of_a_tensor_match_its_port():
  index = GraphIndex([_node('s'), _node('x', 's:1', 's'), _node('y', 's:0')])
  assert [(n.name, i) for n, i in index.consumers_of('s:0')] == [('x', 1),
                                                                 ('y', 0)]
  assert [(n.name, i) for n, i in index.consumers_of('s')] == [('x', 1),
                                                               ('y', 0)]
  assert [(n.name, i) for n, i in index.consumers_of('s:1')] == [('x', 0)]
  assert index.consumers_of('s:2') == []
  assert index.consumers_of('nope:0') == []


def test_function_body_inputs_keep_their_output_arg_as_port():
  body = [_node('mul', 'x', 'w'), _node('add', 'mul:z:0', 'x', '^mul'),
          _node('out', 'add:z:0', 'mul:z:1')]
  index = GraphIndex(body, function=True)
  assert _named(index.users['x']) == [('mul', 0, ''), ('add', 1, '')]
  assert _named(index.users['mul']) == [('add', 0, 'z:0'), ('out', 1, 'z:1')]
  assert [(n.name, i) for n, i in index.consumers_of('mul:z:0')] == [('add', 0)]
  assert [(n.name, i) for n, i in index.consumers_of('x')] == [('mul', 0),
                                                               ('add', 1)]


def test_reachable_follows_data_and_control_inputs():
  index = GraphIndex([_node('a'), _node('b', 'a:1'), _node('c', '^b'),
                      _node('d', 'c'), _node('unused', 'a')])
  assert index.reachable(['d']) == {'a', 'b', 'c', 'd'}
  assert index.reachable(['b', 'unused']) == {'a', 'b', 'unused'}
  broken = GraphIndex([_node('y', 'gone:0')])
  with pytest.raises(ValueError, match="^the graph is broken: node 'gone' is "
                     "an input but does not exist$"):
    broken.reachable(['y'])


def test_frozen_graph_of_shrink_is_the_index_of_its_graph():
  with tf.Graph().as_default() as g:
    x = tf.placeholder(tf.float32, [None, 2], name='x')
    a, b = tf.split(x, 2, axis=1, name='split')
    tf.add(b, a, name='y')
  graph_def = g.as_graph_def()
  view = FrozenGraph(graph_def, ['y'])
  index = GraphIndex(graph_def.node)
  assert isinstance(view, GraphIndex)
  assert list(view.nodes) == list(index.nodes)
  assert {k: _named(v) for k, v in view.users.items()} == {
      k: _named(v) for k, v in index.users.items()}
  assert _named(view.users['split']) == [('y', 0, 1), ('y', 1, 0)]
  assert view.consumers('split') is None    # port 1 is read: not a layer
  assert [(n.name, i) for n, i in view.consumers('x')] == [('split', 1)]
