"""get_pruning_hparams(): SPEC defaults, TF1 HParams parse syntax, validation."""

import re

import numpy as np
import pytest

import tf1prune
from tf1prune.plan.spec import validate_hparams

SPEC_DEFAULTS = {
    'name': 'model_pruning',
    'begin_pruning_step': 0,
    'end_pruning_step': -1,
    'do_not_prune': [''],
    'weight_sparsity_map': [''],
    'block_dims_map': [''],
    'threshold_decay': 0.0,
    'pruning_frequency': 10,
    'nbins': 256,
    'block_height': 1,
    'block_width': 1,
    'block_pooling_function': 'AVG',
    'initial_sparsity': 0.0,
    'target_sparsity': 0.5,
    'sparsity_function_begin_step': 0,
    'sparsity_function_end_step': 100,
    'sparsity_function_exponent': 3.0,
    'use_tpu': False,
    'threshold_method': 'exact',
}


def _hp(text=''):
  return tf1prune.get_pruning_hparams().parse(text)


def test_every_spec_hparam_has_its_default_value_and_type():
  hp = tf1prune.get_pruning_hparams()
  values = hp.values()
  for name, default in SPEC_DEFAULTS.items():
    assert values[name] == default, name
    assert type(values[name]) is type(default), name
    assert getattr(hp, name) == default, name


def test_values_is_a_dict_of_exactly_the_known_hparams():
  values = tf1prune.get_pruning_hparams().values()
  assert isinstance(values, dict)
  assert set(SPEC_DEFAULTS) <= set(values)


def test_each_call_returns_an_independent_object():
  first = tf1prune.get_pruning_hparams().parse('do_not_prune=[a]')
  second = tf1prune.get_pruning_hparams()
  assert first.do_not_prune == ['a']
  assert second.do_not_prune == ['']


def test_values_copies_lists():
  hp = tf1prune.get_pruning_hparams()
  hp.values()['do_not_prune'].append('x')
  assert hp.do_not_prune == ['']


def test_parse_returns_the_same_object_updated():
  hp = tf1prune.get_pruning_hparams()
  assert hp.parse('nbins=10') is hp
  assert hp.nbins == 10


def test_parse_types_each_value_after_its_default():
  hp = _hp('name=my_pruning,begin_pruning_step=2000,end_pruning_step=-1,'
           'target_sparsity=0.9,initial_sparsity=0,sparsity_function_exponent=1,'
           'threshold_decay=0.5,use_tpu=true,block_pooling_function=MAX,'
           'pruning_frequency=7')
  assert hp.name == 'my_pruning'
  assert hp.begin_pruning_step == 2000 and type(hp.begin_pruning_step) is int
  assert hp.end_pruning_step == -1
  assert hp.target_sparsity == 0.9
  assert hp.initial_sparsity == 0.0 and type(hp.initial_sparsity) is float
  assert hp.sparsity_function_exponent == 1.0
  assert type(hp.sparsity_function_exponent) is float
  assert hp.threshold_decay == 0.5
  assert hp.use_tpu is True
  assert hp.block_pooling_function == 'MAX'
  assert hp.pruning_frequency == 7


@pytest.mark.parametrize('text,expected', [
    ('true', True), ('True', True), ('1', True),
    ('false', False), ('False', False), ('0', False)])
def test_parse_bools(text, expected):
  assert _hp('use_tpu=' + text).use_tpu is expected


def test_parse_lists():
  hp = _hp('do_not_prune=[conv1,fc.*],weight_sparsity_map=[conv1:0.8],'
           'block_dims_map=[fc1:4x4,fc2:-1x1]')
  assert hp.do_not_prune == ['conv1', 'fc.*']
  assert hp.weight_sparsity_map == ['conv1:0.8']
  assert hp.block_dims_map == ['fc1:4x4', 'fc2:-1x1']


def test_parse_tolerates_spaces_and_empty_text():
  hp = _hp(' target_sparsity = 0.75 , do_not_prune = [ a , b ] ')
  assert hp.target_sparsity == 0.75
  assert hp.do_not_prune == ['a', 'b']
  assert _hp('').values() == tf1prune.get_pruning_hparams().values()


def test_unknown_hparam_is_a_value_error_naming_it():
  with pytest.raises(ValueError, match='unknown hparam target_sparstiy'):
    _hp('target_sparstiy=0.9')


@pytest.mark.parametrize('text,name,value', [
    ('begin_pruning_step=1.5', 'begin_pruning_step', '1.5'),
    ('target_sparsity=high', 'target_sparsity', 'high'),
    ('use_tpu=maybe', 'use_tpu', 'maybe'),
    ('nbins=', 'nbins', ''),
])
def test_mistyped_value_is_a_value_error_naming_hparam_and_value(text, name,
                                                                 value):
  with pytest.raises(ValueError) as info:
    _hp(text)
  message = str(info.value)
  assert name in message
  assert repr(value) in message


def test_a_list_for_a_single_valued_hparam_is_a_value_error():
  with pytest.raises(ValueError, match=r'nbins takes a single int.*\[1,2\]'):
    _hp('nbins=[1,2]')


def test_malformed_text_is_a_value_error():
  with pytest.raises(ValueError, match='cannot parse hparams'):
    _hp('target_sparsity')


def test_attribute_access_and_set_hparam():
  hp = tf1prune.get_pruning_hparams()
  hp.set_hparam('nbins', 8)
  assert hp.nbins == 8
  with pytest.raises(ValueError, match='unknown hparam nope'):
    hp.set_hparam('nope', 1)
  hp.add_hparam('extra', 3)
  assert hp.values()['extra'] == 3
  with pytest.raises(ValueError, match='hparam extra already exists'):
    hp.add_hparam('extra', 4)


def test_defaults_validate():
  validate_hparams(tf1prune.get_pruning_hparams())


@pytest.mark.parametrize('text,message', [
    ('begin_pruning_step=-1', 'begin_pruning_step must be >= 0, got -1'),
    ('begin_pruning_step=10,end_pruning_step=10',
     'end_pruning_step must be -1 (never stop) or > begin_pruning_step=10, '
     'got 10'),
    ('begin_pruning_step=10,end_pruning_step=5',
     'end_pruning_step must be -1 (never stop) or > begin_pruning_step=10, '
     'got 5'),
    ('threshold_decay=1.0', 'threshold_decay must be in [0, 1), got 1.0'),
    ('threshold_decay=-0.1', 'threshold_decay must be in [0, 1), got -0.1'),
    ('target_sparsity=1.0', 'target_sparsity must be in [0, 1), got 1.0'),
    ('target_sparsity=-0.5', 'target_sparsity must be in [0, 1), got -0.5'),
    ('initial_sparsity=1.5', 'initial_sparsity must be in [0, 1), got 1.5'),
    ('block_pooling_function=SUM',
     "block_pooling_function must be 'AVG' or 'MAX', got 'SUM'"),
    ('pruning_frequency=0', 'pruning_frequency must be >= 1, got 0'),
    ('nbins=1', 'nbins must be >= 2, got 1'),
    ('block_height=0',
     'block_height must be >= 1 or -1 (the whole dimension), got 0'),
    ('block_width=-2',
     'block_width must be >= 1 or -1 (the whole dimension), got -2'),
    ('sparsity_function_begin_step=100',
     'sparsity_function_end_step must be > sparsity_function_begin_step=100, '
     'got 100'),
    ('sparsity_function_exponent=0',
     'sparsity_function_exponent must be > 0, got 0.0'),
    ('threshold_method=sort',
     "threshold_method must be 'exact' or 'histogram', got 'sort'"),
])
def test_validation_names_the_hparam_and_the_value(text, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    validate_hparams(_hp(text))


def test_pruning_validates_while_the_graph_is_built():
  import tensorflow.compat.v1 as tf
  tf.train.get_or_create_global_step()
  with pytest.raises(ValueError,
                     match=re.escape('target_sparsity must be in [0, 1), got 1.0')):
    tf1prune.Pruning(_hp('target_sparsity=1.0'))


def test_tf1_hparams_helpers_used_by_scripts():
  hp = tf1prune.get_pruning_hparams()
  assert 'target_sparsity' in hp and 'nope' not in hp
  assert hp.get('nbins') == 256 and hp.get('nope', 7) == 7
  assert hp.override_from_dict({'nbins': 16, 'name': 'p'}) is hp
  assert (hp.nbins, hp.name) == (16, 'p')
  with pytest.raises(ValueError, match='unknown hparam nope'):
    hp.override_from_dict({'nope': 1})
  import json
  assert json.loads(hp.to_json()) == hp.values()
  assert hp.to_json(sort_keys=True).startswith('{"begin_pruning_step": 0, ')


def test_set_hparam_casts_as_tf1_hparams_does():
  hp = tf1prune.get_pruning_hparams()
  hp.set_hparam('target_sparsity', 1)
  assert hp.target_sparsity == 1.0 and type(hp.target_sparsity) is float
  hp.set_hparam('nbins', np.int64(64))
  assert hp.nbins == 64 and type(hp.nbins) is int
  hp.set_hparam('do_not_prune', ['logits'])
  assert hp.do_not_prune == ['logits']
  for name, value, kind in [('nbins', 2.5, 'int'), ('use_tpu', 1, 'bool'),
                            ('nbins', True, 'int'), ('name', 3, 'str'),
                            ('target_sparsity', '0.5', 'float')]:
    with pytest.raises(ValueError, match=re.escape(
        'hparam %s expects a value of type %s, got %r' % (name, kind, value))):
      hp.set_hparam(name, value)
  with pytest.raises(ValueError, match='hparam nbins takes a single int'):
    hp.set_hparam('nbins', [1])
  with pytest.raises(ValueError, match='do_not_prune takes a list of str'):
    hp.set_hparam('do_not_prune', 'logits')


def test_a_name_given_twice_to_parse_is_a_value_error():
  with pytest.raises(ValueError, match=re.escape(
      "hparam nbins is set twice in 'nbins=3,nbins=4': give it once")):
    _hp('nbins=3,nbins=4')


def test_del_hparam_removes_it():
  hp = tf1prune.get_pruning_hparams()
  hp.add_hparam('extra', 3)
  hp.del_hparam('extra')
  hp.del_hparam('extra')      # gone already: nothing to do, as in TF1
  assert 'extra' not in hp and 'extra' not in hp.values()
  hp.add_hparam('extra', 'text')
  assert hp.extra == 'text'
