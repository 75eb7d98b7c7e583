"""Element and Block granularities against NumPy references."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.masks import Block, Element, magnitude_mask
from tests.support import np_reference


def _select(scores, sparsity):
  return magnitude_mask(scores, sparsity)


class _RecordingSelect(object):
  """A select that keeps the scores it was given (to check the pooling)."""

  def __init__(self):
    self.scores = None

  def __call__(self, scores, sparsity):
    self.scores = scores
    return magnitude_mask(scores, sparsity)


def _distinct(shape, seed):
  n = int(np.prod(shape))
  rs = np.random.RandomState(seed)
  value = rs.permutation(np.arange(1.0, n + 1.0)) * rs.choice([-1.0, 1.0], n)
  return value.reshape(shape).astype(np.float32)


def _run(mask, threshold):
  with tf.Session() as sess:
    return sess.run([mask, threshold])


@pytest.mark.parametrize('shape', [(7,), (4, 6), (3, 3, 2, 5)])
@pytest.mark.parametrize('sparsity', [0.0, 0.9])
def test_element_is_the_magnitude_mask_of_abs_w(shape, sparsity):
  value = _distinct(shape, seed=len(shape))
  m, t = _run(*Element().compute_mask(tf.constant(value), sparsity, _select))
  expected = np_reference.magnitude_mask(np.abs(value), sparsity)
  np.testing.assert_array_equal(m, expected)
  assert m.dtype == np.float32 and m.shape == value.shape
  assert t == np.abs(value)[expected == 1.0].min()


@pytest.mark.parametrize('pooling', ['AVG', 'MAX'])
@pytest.mark.parametrize('shape,block,layout', [
    ((8, 12), (2, 3), (2, 3)),     # full blocks
    ((7, 10), (2, 3), (2, 3)),     # partial blocks at the bottom and right
    ((6, 8), (-1, 2), (6, 2)),     # -1: the whole height
    ((6, 8), (3, -1), (3, 8)),     # -1: the whole width
    ((5, 4), (8, 8), (5, 4)),      # block larger than the weight: one block
    ((9, 6), (1, 3), (1, 3)),      # rows of 3
])
def test_block_mask_equals_numpy_reference(pooling, shape, block, layout):
  sparsity = 0.6
  value = _distinct(shape, seed=shape[0] * shape[1])
  select = _RecordingSelect()
  m, t = _run(*Block(block[0], block[1], pooling).compute_mask(
      tf.constant(value), sparsity, select))
  bh, bw = layout
  with tf.Session() as sess:
    scores = sess.run(select.scores)
  np.testing.assert_array_equal(scores, np_reference.block_scores(value, bh, bw, pooling))
  expected, expected_t, _ = np_reference.block_mask(
      value, (bh, bw), pooling, np.float32(sparsity))
  np.testing.assert_array_equal(m, expected)
  assert t == expected_t
  for i in range(0, shape[0], bh):
    for j in range(0, shape[1], bw):
      cell = m[i:i + bh, j:j + bw]
      assert cell.min() == cell.max()


def test_avg_of_a_partial_block_divides_by_its_real_size():
  # 3 x 3 weight in 2 x 2 blocks: sizes 4, 2 / 2, 1.
  value = np.array([[1., 1., 9.], [1., 1., 9.], [2., 2., 7.]], np.float32)
  select = _RecordingSelect()
  Block(2, 2, 'AVG').compute_mask(tf.constant(value), 0.5, select)
  with tf.Session() as sess:
    assert sess.run(select.scores).tolist() == [[1.0, 9.0], [2.0, 7.0]]


@pytest.mark.parametrize('pooling', ['AVG', 'MAX'])
@pytest.mark.parametrize('shape', [(1, 1, 6, 8), (6, 1, 8), (1, 6, 8, 1)])
def test_singleton_dimensions_are_squeezed(pooling, shape):
  value = _distinct(shape, seed=11)
  m, t = _run(*Block(2, 4, pooling).compute_mask(tf.constant(value), 0.5,
                                                 _select))
  expected, expected_t, _ = np_reference.block_mask(value, (2, 4), pooling,
                                                    0.5)
  assert m.shape == shape
  np.testing.assert_array_equal(m, expected)
  assert t == expected_t


@pytest.mark.parametrize('shape', [(3, 3, 2, 4), (12,), (1, 12), (2, 3, 4)])
def test_weights_not_rank_2_after_squeezing_are_element_wise(shape):
  value = _distinct(shape, seed=12)
  m, _ = _run(*Block(2, 2, 'MAX').compute_mask(tf.constant(value), 0.5,
                                               _select))
  np.testing.assert_array_equal(
      m, np_reference.magnitude_mask(np.abs(value), 0.5))


def test_block_1x1_is_element_wise():
  value = _distinct((5, 6), seed=13)
  m, t = _run(*Block(1, 1, 'AVG').compute_mask(tf.constant(value), 0.7,
                                               _select))
  np.testing.assert_array_equal(
      m, np_reference.magnitude_mask(np.abs(value), 0.7))


def test_float64_weight_gives_a_float32_mask():
  value = _distinct((4, 4), seed=14).astype(np.float64)
  m, t = _run(*Block(2, 2, 'AVG').compute_mask(tf.constant(value), 0.5,
                                               _select))
  assert m.dtype == np.float32
  np.testing.assert_array_equal(m, np_reference.block_mask(value, (2, 2), 'AVG', 0.5)[0])


def test_ties_between_blocks_keep_the_earliest():
  value = np.ones([4, 4], np.float32)
  m, _ = _run(*Block(2, 2, 'MAX').compute_mask(tf.constant(value), 0.5,
                                               _select))
  # Four equal blocks, two kept: the first two in row-major block order.
  assert m.tolist() == [[1.0] * 4, [1.0] * 4, [0.0] * 4, [0.0] * 4]


@pytest.mark.parametrize('args,message', [
    ((2, 2, 'SUM'), "block pooling must be 'AVG' or 'MAX', got 'SUM'"),
    ((0, 2, 'AVG'), 'block height must be >= 1 or -1, got 0'),
    ((2, -3, 'MAX'), 'block width must be >= 1 or -1, got -3'),
])
def test_block_argument_errors(args, message):
  with pytest.raises(ValueError, match=message.replace('(', r'\(')):
    Block(*args)
