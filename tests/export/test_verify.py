"""compare_graph_defs: two frozen graphs on the same random inputs."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.export.verify import (BadInputShapes, compare_graph_defs,
                                    parse_input_shapes, tolerance)


def _graph(build):
  with tf.Graph().as_default() as graph:
    build()
  return graph.as_graph_def()


def _scaled(scale, shape=(None, 4)):
  def build():
    x = tf.placeholder(tf.float32, shape, name='x')
    tf.multiply(x, scale, name='y')
  return _graph(build)


def test_equal_graphs_pass_with_no_difference_at_two_batch_sizes():
  found = compare_graph_defs(_scaled(2.0), _scaled(2.0), ['y'])
  assert found.passed and found.max_diff == 0.0 and found.note is None
  assert found.inputs == {'x': [[2, 4], [1, 4]]}
  assert found.tolerance == {'y': 1e-4}
  assert found.version == tf.__version__


def test_the_difference_is_relative_to_the_largest_output():
  found = compare_graph_defs(_scaled(2.0), _scaled(2.5), ['y'])
  # |2.5 x - 2 x| / |2.5 x| at the largest |x|.
  assert found.passed is False
  assert found.diffs['y'] == pytest.approx(0.2, rel=1e-6)
  assert found.failing() == [('y', found.diffs['y'], 1e-4)]


def test_a_difference_within_float32_rounding_passes():
  found = compare_graph_defs(_scaled(2.0), _scaled(2.0 * (1 + 2e-7)), ['y'])
  assert found.passed and 0 < found.max_diff < 1e-6


def test_unknown_dimensions_need_input_shapes_or_the_check_does_not_run():
  graph = _scaled(2.0, (None, None, 3))
  found = compare_graph_defs(graph, graph, ['y'])
  assert found.passed is None
  assert found.note == (
      "input x has unknown dimensions [None, None, 3]: give its shape "
      "(input_shapes={'x': [2, 2, 3]}, strip_pruning_vars "
      "--shrink_input_shapes=x:2,2,3)")
  found = compare_graph_defs(graph, graph, ['y'], input_shapes={'x': [1, 5,
                                                                    3]})
  assert found.passed and found.inputs == {'x': [[1, 5, 3], [1, 5, 3]]}


def test_input_shapes_that_do_not_fit_are_errors_that_name_the_argument():
  graph = _scaled(2.0, (None, None, 3))
  with pytest.raises(BadInputShapes) as e:
    compare_graph_defs(graph, graph, ['y'], input_shapes={'z': [1, 5, 3]})
  assert str(e.value) == ("input_shapes names 'z', which is not a "
                          "Placeholder of the graph (they are x)")
  with pytest.raises(BadInputShapes) as e:
    compare_graph_defs(graph, graph, ['y'], input_shapes={'x': [1, 5, 4]})
  assert str(e.value.named('--shrink_input_shapes')) == (
      "--shrink_input_shapes: the shape of 'x' must be positive ints that "
      "fit the placeholder's [None, None, 3], got [1, 5, 4]")


def test_ids_and_flags_get_values_every_graph_takes():
  def build():
    ids = tf.placeholder(tf.int32, [None, 3], name='ids')
    on = tf.placeholder(tf.bool, [None, 3], name='on')
    table = tf.constant(np.arange(8.0, dtype=np.float32).reshape(2, 4))
    rows = tf.reduce_sum(tf.gather(table, ids), 2)
    tf.where(on, rows, -rows, name='y')
  graph = _graph(build)
  found = compare_graph_defs(graph, graph, ['y'])
  assert found.passed and found.inputs == {'ids': [[2, 3], [1, 3]],
                                           'on': [[2, 3], [1, 3]]}


def test_strings_are_not_fed_and_the_note_says_so():
  def build():
    text = tf.placeholder(tf.string, [None], name='text')
    tf.strings.length(text, name='y')
  graph = _graph(build)
  found = compare_graph_defs(graph, graph, ['y'])
  assert found.passed is None
  assert found.note == ('input text is of type string, for which the check '
                        'has no random values')


def test_the_same_infinities_are_equal_and_other_dtypes_compare_exactly():
  def build(shift):
    x = tf.placeholder(tf.float32, [None, 4], name='x')
    tf.exp(x * 1e3, name='y')                    # inf for x > 0.09
    tf.argmax(x + shift, 1, name='index')
  found = compare_graph_defs(_graph(lambda: build(0.0)),
                             _graph(lambda: build(0.0)), ['y', 'index'])
  assert found.passed and found.diffs == {'y': 0.0, 'index': 0.0}
  assert found.tolerance == {'y': 1e-4, 'index': 0.0}


def test_a_candidate_that_does_not_run_fails_and_says_why():
  def broken():
    x = tf.placeholder(tf.float32, [None, 4], name='x')
    tf.reshape(x, [-1, 3], name='y')             # 4 entries per row
  found = compare_graph_defs(_scaled(2.0), _graph(broken), ['y'])
  assert found.passed is False and found.max_diff == np.inf
  assert found.error.startswith('InvalidArgumentError: ')
  assert 'Input to reshape is a tensor with 8 values' in found.error


def test_a_reference_that_does_not_run_here_leaves_the_check_not_run():
  def broken():
    x = tf.placeholder(tf.float32, [None, 4], name='x')
    tf.reshape(x, [-1, 3], name='y')
  found = compare_graph_defs(_graph(broken), _scaled(2.0), ['y'])
  assert found.passed is None
  assert found.note.startswith('the unshrunk graph does not run in '
                               'TensorFlow %s on random inputs: '
                               'InvalidArgumentError: ' % tf.__version__)


def test_tolerances_follow_the_output_type():
  assert [tolerance(t) for t in (tf.float32, tf.float64, tf.float16,
                                 tf.bfloat16, tf.int64, tf.bool)] == [
                                     1e-4, 1e-4, 1e-2, 1e-2, 0.0, 0.0]


def test_input_shapes_flag_syntax():
  assert parse_input_shapes('x:1,224,224,3; mask:1,10') == {
      'x': [1, 224, 224, 3], 'mask': [1, 10]}
  assert parse_input_shapes('') == {}
  with pytest.raises(ValueError) as e:
    parse_input_shapes('x:1,a')
  assert str(e.value) == ("input shape 'x:1,a' must look like "
                          "name:1,224,224,3 (several separated by ;)")
