"""apply_mask, the collections and masked_weight_records."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune


def _names(values):
  return [v.op.name for v in values]


def test_collection_names_are_the_contrib_strings():
  assert tf1prune.MASK_COLLECTION == 'masks'
  assert tf1prune.THRESHOLD_COLLECTION == 'thresholds'
  assert tf1prune.MASKED_WEIGHT_COLLECTION == 'masked_weights'
  assert tf1prune.WEIGHT_COLLECTION == 'kernel'
  assert tf1prune.MASKED_WEIGHT_NAME == 'weights/masked_weight'


def test_apply_mask_creates_mask_and_threshold_in_scope():
  w = tf.get_variable('w', [3, 4], initializer=tf.constant_initializer(2.0))
  masked = tf1prune.apply_mask(w, 'layer')
  mask, = tf1prune.get_masks()
  threshold, = tf1prune.get_thresholds()
  assert mask.op.name == 'layer/mask'
  assert mask.shape.as_list() == [3, 4]
  assert mask.dtype.base_dtype == tf.float32
  assert threshold.op.name == 'layer/threshold'
  assert threshold.shape.as_list() == []
  assert threshold.dtype.base_dtype == tf.float32
  trainable = tf.trainable_variables()
  assert mask not in trainable and threshold not in trainable
  assert masked.op.name == 'weights/masked_weight'
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    m, t, mw = sess.run([mask, threshold, masked])
  np.testing.assert_array_equal(m, np.ones([3, 4], np.float32))
  assert t == 0.0
  np.testing.assert_array_equal(mw, np.full([3, 4], 2.0, np.float32))


def test_masked_weight_op_is_named_under_the_name_scope():
  with tf.variable_scope('conv1'):
    w = tf.get_variable('weights', [2, 2])
    masked = tf1prune.apply_mask(w)
  assert masked.op.name == 'conv1/weights/masked_weight'
  assert _names(tf1prune.get_masks()) == ['conv1/mask']
  assert _names(tf1prune.get_thresholds()) == ['conv1/threshold']


def test_mask_and_threshold_have_the_weight_dtype():
  w = tf.get_variable('w', [5], tf.float64)
  tf1prune.apply_mask(w, 'f64')
  assert tf1prune.get_masks()[0].dtype.base_dtype == tf.float64
  # As contrib's: a checkpoint of a contrib-pruned float64 model restores.
  assert tf1prune.get_thresholds()[0].dtype.base_dtype == tf.float64


def test_collections_hold_each_weight_once_in_creation_order():
  weights = [tf.get_variable('w%d' % i, [2, i + 1]) for i in range(3)]
  masked = [tf1prune.apply_mask(w, 'l%d' % i) for i, w in enumerate(weights)]
  assert _names(tf1prune.get_masks()) == ['l0/mask', 'l1/mask', 'l2/mask']
  assert _names(tf1prune.get_thresholds()) == [
      'l0/threshold', 'l1/threshold', 'l2/threshold']
  assert tf1prune.get_masked_weights() == masked
  assert _names(tf1prune.get_weights()) == ['w0', 'w1', 'w2']
  records = tf1prune.masked_weight_records()
  assert [r.name for r in records] == ['w0', 'w1', 'w2']
  for record, m, mask, threshold in zip(records, masked, tf1prune.get_masks(),
                                        tf1prune.get_thresholds()):
    assert record.mask is mask
    assert record.threshold is threshold
    assert record.masked_weight is m


def test_applying_again_under_reuse_adds_nothing_twice():
  w = tf.get_variable('w', [4, 4])
  with tf.variable_scope('layer'):
    tf1prune.apply_mask(w)
  with tf.variable_scope('layer', reuse=True):
    again = tf1prune.apply_mask(w)
  assert _names(tf1prune.get_masks()) == ['layer/mask']
  assert len(tf1prune.get_thresholds()) == 1
  assert len(tf1prune.get_masked_weights()) == 1
  assert len(tf1prune.get_weights()) == 1
  assert len(tf1prune.masked_weight_records()) == 1
  mask_vars = [v for v in tf.global_variables() if 'mask' in v.op.name]
  assert _names(mask_vars) == ['layer/mask']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(mask_vars[0], tf.zeros([4, 4])))
    assert not sess.run(again).any()  # the reused product reads the one mask


def test_applying_again_without_reuse_is_a_variable_error():
  w = tf.get_variable('w', [4, 4])
  tf1prune.apply_mask(w, 'layer')
  with pytest.raises(ValueError, match='layer/mask'):
    tf1prune.apply_mask(w, 'layer')


def test_get_weight_sparsity_is_zero_fraction_per_mask():
  a = tf.get_variable('a', [10])
  b = tf.get_variable('b', [2, 2])
  tf1prune.apply_mask(a, 'a_layer')
  tf1prune.apply_mask(b, 'b_layer')
  sparsities = tf1prune.get_weight_sparsity()
  assert len(sparsities) == 2
  mask_a, mask_b = tf1prune.get_masks()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    assert sess.run(sparsities) == [0.0, 0.0]
    sess.run([tf.assign(mask_a, [0.0] * 3 + [1.0] * 7),
              tf.assign(mask_b, [[0.0, 0.0], [0.0, 1.0]])])
    got = sess.run(sparsities)
  assert got == pytest.approx([0.3, 0.75])


def test_apply_mask_on_a_tensor():
  x = tf.constant([[1.0, -2.0], [3.0, -4.0]])
  masked = tf1prune.apply_mask(x, 'tensor_layer')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(tf1prune.get_masks()[0], [[1.0, 0.0], [0.0, 1.0]]))
    assert sess.run(masked).tolist() == [[1.0, 0.0], [0.0, -4.0]]


@pytest.mark.parametrize('dtype', [tf.int32, tf.int64, tf.bool])
def test_non_float_weights_are_a_value_error(dtype):
  x = tf.zeros([3, 3], dtype)
  with pytest.raises(ValueError, match='needs a floating-point weight.*%s' %
                     dtype.name):
    tf1prune.apply_mask(x, 'l')
  assert tf1prune.get_masks() == []


@pytest.mark.parametrize('shape', [[], [0], [3, 0]])
def test_scalar_and_empty_weights_are_a_value_error(shape):
  x = tf.get_variable('x', shape)
  with pytest.raises(ValueError, match='known, non-empty shape with rank >= 1'):
    tf1prune.apply_mask(x, 'l')


def test_unknown_shape_is_a_value_error():
  x = tf.placeholder(tf.float32, [None, 3])
  with pytest.raises(ValueError, match=r'non-empty shape.*\(\?, 3\)|None, 3'):
    tf1prune.apply_mask(x, 'l')


def test_partitioned_variable_gets_one_whole_mask():
  w = tf.get_variable('pw', [10, 4], partitioner=tf.fixed_size_partitioner(3))
  masked = tf1prune.apply_mask(w, 'part')
  mask, = tf1prune.get_masks()
  assert mask.shape.as_list() == [10, 4]
  assert masked.shape.as_list() == [10, 4]
  record, = tf1prune.masked_weight_records()
  assert record.name == 'pw'
  assert record.weight.shape.as_list() == [10, 4]


def test_records_survive_a_meta_graph_export_and_import(tmp_path):
  with tf.variable_scope('fc1'):
    w1 = tf.get_variable('weights', [3, 2])
    tf1prune.apply_mask(w1)
  with tf.variable_scope('fc2'):
    w2 = tf.get_variable('weights', [2, 5])
    tf1prune.apply_mask(w2)
  path = str(tmp_path / 'model.meta')
  tf.train.export_meta_graph(filename=path)
  expected = [(r.name, r.weight.name, r.mask.op.name, r.threshold.op.name,
               r.masked_weight.name)
              for r in tf1prune.masked_weight_records()]
  assert [e[0] for e in expected] == ['fc1/weights', 'fc2/weights']

  with tf.Graph().as_default() as fresh:
    tf.train.import_meta_graph(path)
    records = tf1prune.masked_weight_records()
    got = [(r.name, r.weight.name, r.mask.op.name, r.threshold.op.name,
            r.masked_weight.name) for r in records]
    assert got == expected
    assert all(r.mask.graph is fresh for r in records)
    assert _names(tf1prune.get_masks()) == ['fc1/mask', 'fc2/mask']
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.assign(records[1].mask, np.zeros([2, 5], np.float32)))
      assert not sess.run(records[1].masked_weight).any()


def test_records_after_import_with_an_import_scope(tmp_path):
  with tf.variable_scope('fc'):
    tf1prune.apply_mask(tf.get_variable('weights', [3, 2]))
  path = str(tmp_path / 'model.meta')
  tf.train.export_meta_graph(filename=path)
  with tf.Graph().as_default():
    tf.train.import_meta_graph(path, import_scope='tower')
    record, = tf1prune.masked_weight_records()
    assert record.name == 'tower/fc/weights'
    assert record.mask.op.name == 'tower/fc/mask'
    assert record.threshold.op.name == 'tower/fc/threshold'
    assert record.masked_weight.name == 'tower/fc/weights/masked_weight:0'
    assert record.weight.shape.as_list() == [3, 2]


def test_scope_may_be_a_variable_scope_object_as_in_the_contrib_cifar10_example():
  images = tf.zeros([1, 8, 8, 3])
  with tf.variable_scope('conv1') as scope:
    kernel = tf.get_variable('weights', [5, 5, 3, 4])
    conv = tf.nn.conv2d(images, tf1prune.apply_mask(kernel, scope),
                        [1, 1, 1, 1], padding='SAME')
  assert conv.shape.as_list() == [1, 8, 8, 4]
  assert _names(tf1prune.get_masks()) == ['conv1/mask']
  assert _names(tf1prune.get_thresholds()) == ['conv1/threshold']
  assert tf1prune.get_masked_weights()[0].op.name == (
      'conv1/weights/masked_weight')
  # A reusing scope object reuses the mask.
  with tf.variable_scope('conv1', reuse=True) as reusing:
    tf1prune.apply_mask(kernel, reusing)
  assert len(tf1prune.get_masks()) == 1
