"""The lazy frozen graph owns its deferred constants: read only when asked."""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export._lazy_graph import LazyGraph
from tests.support.graphs import run_graph_def


def _graph_def():
  with tf.Graph().as_default() as g:
    a = tf.constant([1.0, 2.0], name='a')
    b = tf.identity(a, name='b')
    tf.add(b, tf.constant([10.0, 20.0], name='c'), name='y')
    tf.constant(7, name='unused')
  return g.as_graph_def()


def test_constants_are_read_only_when_their_value_is_asked_for():
  reads = []

  def read():
    reads.append('w')
    return np.array([3.0, 4.0], np.float32)

  lazy = LazyGraph.from_graph_def(_graph_def())
  assert lazy.deferred() == ['a', 'c', 'unused']
  assert 'value' not in lazy.node('a').attr
  lazy.make_const(lazy.node('b'), tf.float32.as_datatype_enum, read)
  lazy.add_const('extra', tf.int32.as_datatype_enum,
                 lambda: np.array(5, np.int32))
  assert lazy.deferred() == ['a', 'b', 'c', 'extra', 'unused']
  assert (lazy.node('b').op, list(lazy.node('b').input)) == ('Const', [])
  assert reads == []
  items = [(node.name, None if read_value is None else read_value().tolist())
           for node, read_value in lazy.items()]
  assert items == [('a', [1.0, 2.0]), ('b', [3.0, 4.0]), ('c', [10.0, 20.0]),
                   ('y', None), ('unused', 7), ('extra', 5)]
  assert reads == ['w']


def test_pruned_keeps_the_thunks_of_what_the_outputs_need():
  lazy = LazyGraph.from_graph_def(_graph_def())
  lazy.make_const(lazy.node('b'), tf.float32.as_datatype_enum,
                  lambda: np.array([3.0, 4.0], np.float32))
  source = lazy.source('a')
  pruned = lazy.pruned(['y'])
  assert [n.name for n in pruned.graph_def.node] == ['b', 'c', 'y']
  assert pruned.deferred() == ['b', 'c']
  assert source().tolist() == [1.0, 2.0]       # `a` is gone, its thunk works
  np.testing.assert_array_equal(
      run_graph_def(pruned.materialize(), None, 'y:0'), [13.0, 24.0])


def test_from_graph_def_copies_the_structure_only():
  graph_def = _graph_def()
  before = graph_def.SerializeToString(deterministic=True)
  lazy = LazyGraph.from_graph_def(graph_def)
  lazy.make_const(lazy.node('y'), tf.float32.as_datatype_enum,
                  lambda: np.zeros(2, np.float32))
  lazy.materialize()
  assert graph_def.SerializeToString(deterministic=True) == before
  assert lazy.tail().versions == graph_def.versions
