"""Output node names: one normalization, one check, for every entry point."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.cli import strip_pruning_vars as strip_cli
from tf1prune.export.names import check_outputs, output_names, split_input

_EMPTY = ("output_node_names is empty; name the inference outputs, e.g. "
          "['logits/BiasAdd']")


@pytest.mark.parametrize('given,names', [
    (['logits/BiasAdd'], ['logits/BiasAdd']),
    ('logits/BiasAdd', ['logits/BiasAdd']),
    (' a:0 ,b, ,c:2,', ['a', 'b', 'c']),
    ([' a ', '', 'b:1', '  '], ['a', 'b']),
    (('x:0', 'x'), ['x', 'x']),
])
def test_output_names_are_node_names_in_the_order_given(given, names):
  assert output_names(given) == names


@pytest.mark.parametrize('given', ['', ' , ', [], [' ', ''], None])
def test_no_output_name_raises(given):
  with pytest.raises(ValueError) as error:
    output_names(given)
  assert str(error.value) == _EMPTY


def test_split_input():
  assert split_input('^a/b') == ('a/b', -1)
  assert split_input('a/b:2') == ('a/b', 2)
  assert split_input('a/b') == ('a/b', 0)
  assert split_input('a:b') == ('a:b', 0)


def test_check_outputs_names_every_missing_node():
  check_outputs(['a', 'b'], {'a': 1, 'b': 2}, 'input_graph_def')
  with pytest.raises(ValueError) as error:
    check_outputs(['a', 'p', 'q'], {'a', 'b'}, 'input_graph_def')
  assert str(error.value) == (
      "output nodes 'p', 'q' not found in input_graph_def; check "
      "output_node_names (the graph has 2 nodes)")
  with pytest.raises(ValueError) as error:
    check_outputs(['p'], {'a'}, 'the meta graph of the checkpoint')
  assert str(error.value) == (
      "output node 'p' not found in the meta graph of the checkpoint; check "
      "output_node_names (the graph has 1 nodes)")


def _frozen_masked_graph():
  with tf.Graph().as_default() as g:
    x = tf.placeholder(tf.float32, [None, 2], name='x')
    w = tf.constant([[1.0, 2.0], [3.0, 4.0]], name='fc/weights')
    mask = tf.constant([[1.0, 0.0], [1.0, 1.0]], name='fc/mask')
    masked = tf.multiply(mask, w, name='fc/masked_weight')
    tf.matmul(x, masked, name='y')
  return g.as_graph_def()


def test_strip_pruning_vars_fn_reads_every_form_of_the_names_alike():
  graph_def = _frozen_masked_graph()
  want = tf1prune.strip_pruning_vars_fn(graph_def, ['y'])
  for given in ('y', 'y:0', ' y:0 , ', ['y:0', ' ']):
    got = tf1prune.strip_pruning_vars_fn(graph_def, given)
    assert got.SerializeToString(deterministic=True) == (
        want.SerializeToString(deterministic=True))
  consts = {n.name: tf.make_ndarray(n.attr['value'].tensor)
            for n in want.node if n.op == 'Const'}
  np.testing.assert_array_equal(consts['fc/masked_weight'],
                                [[1.0, 0.0], [3.0, 4.0]])
  with pytest.raises(ValueError) as error:
    tf1prune.strip_pruning_vars_fn(graph_def, ' , ')
  assert str(error.value) == _EMPTY


def test_strip_cli_flag_is_normalized_the_same_way():
  args = strip_cli.parse_args(['--checkpoint_dir=d',
                               '--output_node_names= y:0 ,z, '])
  assert args.output_node_names == ['y', 'z']


def test_strip_cli_empty_flag_is_a_usage_error(capsys):
  with pytest.raises(SystemExit) as exit_:
    strip_cli.parse_args(['--checkpoint_dir=d', '--output_node_names= , '])
  assert exit_.value.code == 2
  assert capsys.readouterr().err == (
      'strip_pruning_vars: error: --output_node_names is empty; name the '
      'output nodes, e.g. --output_node_names=logits/BiasAdd (see --help)\n')
