"""Property tests (hypothesis) of the mask math, against its NumPy reference
(tests/support/np_reference.py).

Each graph is built once per test (placeholders, or a small cache of graphs
for static shapes) and the examples are fed to it: building a graph per
example would be far too slow.
"""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tf1prune
from tf1prune.masks import Block, magnitude_mask
from tests.support import np_reference

DTYPES = [np.float16, np.float32, np.float64]

# Tests that build a graph per static shape run fewer examples.
FEWER = settings(max_examples=25, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow,
                                        HealthCheck.function_scoped_fixture])
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

# Sparsities: the edges, values around k/n boundaries, and arbitrary ones.
sparsities = st.one_of(
    st.sampled_from([0.0, 0.5, 0.9, 0.95, 0.999, 0.999999, 1.0]),
    st.floats(0.0, 1.0, width=32))


def _weights(dtype, shapes, non_finite=False):
  """Arrays of `dtype`: few distinct values (many ties) or arbitrary floats."""
  info = np.finfo(dtype)
  tie_values = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -3.0])
  if non_finite:
    arbitrary = st.floats(width=info.bits)
  else:
    arbitrary = st.floats(float(-info.max), float(info.max), allow_nan=False,
                          allow_infinity=False, width=info.bits)
  small_ints = st.integers(-4, 4).map(float)
  return st.one_of(
      hnp.arrays(dtype, shapes, elements=tie_values),
      hnp.arrays(dtype, shapes, elements=small_ints),
      hnp.arrays(dtype, shapes, elements=arbitrary))


def _reference_threshold(scores, mask):
  kept = np.asarray(scores, np.float32)[mask == 1.0]
  kept = np.where(np.isnan(kept), np.inf, kept)
  return np.float32(kept.min()) if kept.size else np.float32(np.inf)


class _MaskGraph(object):
  """magnitude_mask(|w|, sparsity) on placeholders of unknown shape."""

  def __init__(self):
    self.ops = {}
    for dtype in DTYPES:
      w = tf.placeholder(dtype, None)
      s = tf.placeholder(tf.float32, [])
      mask, threshold = magnitude_mask(tf.abs(w), s)
      self.ops[dtype] = (w, s, mask, threshold)
    self.sess = tf.Session()

  def __call__(self, weights, sparsity):
    w, s, mask, threshold = self.ops[weights.dtype.type]
    return self.sess.run([mask, threshold], {w: weights, s: sparsity})


@pytest.fixture
def mask_graph(graph):
  g = _MaskGraph()
  yield g
  g.sess.close()


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=9),
       sparsity=sparsities)
def test_mask_equals_reference_and_zero_fraction_is_within_one(
    mask_graph, data, dtype, shape, sparsity):
  weights = data.draw(_weights(dtype, shape))
  mask, threshold = mask_graph(weights, sparsity)
  scores = np.abs(weights)
  np.testing.assert_array_equal(mask, np_reference.magnitude_mask(scores,
                                                                  sparsity))
  assert mask.shape == weights.shape and mask.dtype == np.float32
  zeros = mask.size - mask.sum()
  assert abs(zeros - mask.size * np.float64(np.float32(sparsity))) <= 1.0
  assert threshold == _reference_threshold(scores, mask)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64]),
       size=st.integers(1, 60), sparsity=sparsities)
def test_nan_and_inf_weights_rank_first_and_the_threshold_is_never_nan(
    mask_graph, data, dtype, size, sparsity):
  weights = data.draw(_weights(dtype, size, non_finite=True))
  # NaNs of different payloads rank by payload (thresholds.py); the reference
  # ranks all NaNs alike, so use the one NaN that arithmetic produces.
  weights[np.isnan(weights)] = np.nan
  mask, threshold = mask_graph(weights, sparsity)
  np.testing.assert_array_equal(
      mask, np_reference.magnitude_mask(np.abs(weights), sparsity))
  assert not np.isnan(threshold)
  if sparsity < 1.0:
    assert mask.sum() >= 1


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=12),
       pair=st.tuples(sparsities, sparsities))
def test_higher_sparsity_never_keeps_what_a_lower_one_dropped(
    mask_graph, data, dtype, shape, pair):
  weights = data.draw(_weights(dtype, shape))
  low, high = sorted(pair)
  mask_low, _ = mask_graph(weights, low)
  mask_high, _ = mask_graph(weights, high)
  assert np.all(mask_high <= mask_low)


# ------------------------------------------------------------------ blocks


class _MaskGraphs(object):
  """One small mask graph per key, built on first use and cached.

  Hypothesis draws many examples of a few shapes: building a graph per example
  would be slow, so each (granularity, shape, dtype) gets placeholders once.
  """

  def __init__(self):
    self.cache = {}
    self.sess = None

  def __call__(self, key, granularity, weights, sparsity):
    """Returns `granularity()`'s mask of `weights` at `sparsity`."""
    key = (key, weights.shape, weights.dtype.type)
    if key not in self.cache:
      w = tf.placeholder(weights.dtype, weights.shape)
      s = tf.placeholder(tf.float32, [])
      mask, _ = granularity().compute_mask(w, s, magnitude_mask)
      self.cache[key] = (w, s, mask)
    if self.sess is None:
      self.sess = tf.Session()
    w, s, mask = self.cache[key]
    return self.sess.run(mask, {w: weights, s: sparsity})


@pytest.fixture
def mask_graphs(graph):
  g = _MaskGraphs()
  yield g
  if g.sess is not None:
    g.sess.close()


@FEWER
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=st.sampled_from([(6, 9), (7, 5), (1, 8)]),
       block=st.sampled_from([(2, 2), (3, 2), (4, -1), (-1, 3)]),
       pooling=st.sampled_from(['AVG', 'MAX']),
       pair=st.tuples(sparsities, sparsities))
def test_block_masks_are_constant_on_blocks_and_equal_the_reference(
    mask_graphs, data, dtype, shape, block, pooling, pair):
  # Small integers: block averages are exact in every dtype, so the tie
  # order is the reference's.
  weights = data.draw(hnp.arrays(dtype, shape, elements=st.integers(-6, 6)
                                 .map(float)))
  low, high = sorted(pair)
  masks = []
  for sparsity in (low, high):
    mask = mask_graphs(('block', block, pooling),
                       lambda: Block(block[0], block[1], pooling), weights,
                       sparsity)
    if 1 in shape:  # a [1, n] weight squeezes to rank 1: single entries.
      expected = np_reference.magnitude_mask(np.abs(weights), sparsity)
    else:
      expected, _, (bh, bw) = np_reference.block_mask(weights, block, pooling,
                                                      sparsity)
      for i in range(0, shape[0], bh):
        for j in range(0, shape[1], bw):
          tile = mask[i:i + bh, j:j + bw]
          assert tile.min() == tile.max()
    np.testing.assert_array_equal(mask, expected)
    masks.append(mask)
  assert np.all(masks[1] <= masks[0])


# ------------------------------------------------------------ structured


def _structured_classes():
  structured = pytest.importorskip('tf1prune.structured')
  return {'kernel': structured.Kernel, 'filter': structured.Filter,
          'input_channel': structured.InputChannel}


def _np_groups(kind, shape):
  """Group id of every entry of a [kh, kw, in, out] weight, by the docs."""
  kh, kw, n_in, n_out = shape
  i = np.arange(n_in).reshape(1, 1, n_in, 1)
  o = np.arange(n_out).reshape(1, 1, 1, n_out)
  ids = {'kernel': i * n_out + o, 'filter': o + 0 * i, 'input_channel': i + 0 * o}
  return np.broadcast_to(ids[kind], shape)


@FEWER
@given(data=st.data(), kind=st.sampled_from(['kernel', 'filter',
                                             'input_channel']),
       shape=st.sampled_from([(3, 3, 4, 5), (1, 2, 6, 3), (2, 2, 1, 7)]),
       sparsity=sparsities)
def test_structured_masks_are_constant_on_groups_and_keep_the_best(
    mask_graphs, data, kind, shape, sparsity):
  weights = data.draw(hnp.arrays(np.float32, shape,
                                 elements=st.integers(-5, 5).map(float)))
  mask = mask_graphs(kind, lambda: _structured_classes()[kind]('l1'), weights,
                     sparsity)
  groups = _np_groups(kind, shape)
  n_groups = groups.max() + 1
  group_mask = np.zeros(n_groups, np.float32)
  scores = np.zeros(n_groups)
  for g in range(n_groups):
    values = mask[groups == g]
    assert values.min() == values.max()
    group_mask[g] = values[0]
    scores[g] = np.abs(weights[groups == g]).sum()  # l1, exact on integers
  np.testing.assert_array_equal(group_mask,
                                np_reference.magnitude_mask(scores, sparsity))


# ------------------------------------------------ through Pruning, end to end

PRUNING_DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]


class _PruningGraph(object):
  """One masked [5, 7] placeholder weight per dtype, one Pruning, one session."""

  def __init__(self):
    tf.train.get_or_create_global_step()
    self.sparsity = tf.placeholder(tf.float32, [])
    self.weights = []
    for dtype in PRUNING_DTYPES:
      w = tf.placeholder(dtype, [5, 7], name='w_' + dtype.name)
      tf1prune.apply_mask(w, 'layer_' + dtype.name)
      self.weights.append(w)
    self.update = tf1prune.Pruning(sparsity=self.sparsity).mask_update_op()
    self.masks = [tf.cast(m, tf.float32) for m in tf1prune.get_masks()]
    self.sess = tf.Session()
    self.sess.run(tf.global_variables_initializer())

  def __call__(self, dtype, values, sparsity):
    feeds = {w: np.zeros([5, 7], w.dtype.as_numpy_dtype) for w in self.weights}
    index = PRUNING_DTYPES.index(dtype)
    feeds[self.weights[index]] = values.astype(dtype.as_numpy_dtype)
    feeds[self.sparsity] = sparsity
    self.sess.run(self.update, feeds)
    return self.sess.run(self.masks[index])


@pytest.fixture
def pruning_graph(graph):
  g = _PruningGraph()
  yield g
  g.sess.close()


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(PRUNING_DTYPES),
       sparsity=sparsities)
def test_pruning_mask_update_equals_reference_for_every_dtype(
    pruning_graph, data, dtype, sparsity):
  # Integers up to 8 are exact in every dtype, bfloat16 included.
  values = data.draw(hnp.arrays(np.float32, (5, 7),
                                elements=st.integers(-8, 8).map(float)))
  mask = pruning_graph(dtype, values, sparsity)
  np.testing.assert_array_equal(
      mask, np_reference.magnitude_mask(np.abs(values), sparsity))
