"""Global magnitude pruning: one threshold over a group of weights.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.masks._global import global_masks
    >>> from tf1prune.masks._granularity import Element
    >>> from tf1prune.masks._select import magnitude_mask
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...   small, large = tf.constant([1., 2., 3., 4.]), tf.constant([10., 20.])
    ...   masks = global_masks([(small, Element()), (large, Element())], 0.5,
    ...                        magnitude_mask)
    ...   [m.tolist() for m, _ in sess.run(masks)]
    [[0.0, 0.0, 0.0, 1.0], [1.0, 1.0]]

With the hparam `global_pruning_groups=[conv,fc]`, `Pruning` ranks all masked
weights whose name matches `conv` (re.search) together: they share one
threshold, and exactly `round(n * sparsity)` of their `n` scores are dropped in
total, so a layer of large weights keeps more than a layer of small ones. Each
regex is its own group; weights in no group keep their per-layer threshold.
A group uses the global schedule's sparsity: a member may not also be in
`weight_sparsity_map`, and a weight matching two groups is an error
(`tf1prune.plan.spec.PruningSpec.group` decides the members).

`global_masks` works with any granularity: it asks each member's granularity
for its group scores, selects over their concatenation, and hands each member
its slice back (`compute_mask` is a pure function, so calling it twice costs
graph size, not state).
"""

import tensorflow.compat.v1 as tf

__all__ = ['global_masks']


def global_masks(members, sparsity, select):
  """Returns one (float32 mask, threshold) per member, selected together.

  Args:
    members: list of (weight tensor, granularity) pairs.
    sparsity: float scalar, the fraction of all the members' scores to drop.
    select: `select(scores, sparsity) -> (mask, threshold)` over a 1-D
      tensor, e.g. `thresholds.magnitude_mask`.

  Returns:
    A list of (mask shaped like the weight, the shared float32 threshold);
    a member whose granularity selects nothing (`NM`) gets its own mask and
    threshold, and the others are ranked without it.
  """
  scores, own = [], []

  def remember(group_scores, unused_sparsity):
    scores.append(group_scores)
    return tf.zeros_like(group_scores, tf.float32), tf.constant(0.0)

  # A granularity that never calls select (N:M: a fixed pattern) has no
  # scores to rank; it keeps its own mask and threshold.
  for weight, granularity in members:
    before = len(scores)
    result = granularity.compute_mask(weight, sparsity, remember)
    own.append(None if len(scores) > before else result)
  if not scores:
    return own
  wide = any(s.dtype.base_dtype == tf.float64 for s in scores)
  dtype = tf.float64 if wide else tf.float32
  flat = tf.concat([tf.reshape(tf.cast(s, dtype), [-1]) for s in scores], 0)
  mask, threshold = select(flat, sparsity)
  pieces = iter(zip(tf.split(mask, tf.stack([tf.size(s) for s in scores])),
                    scores))
  results = []
  for (weight, granularity), result in zip(members, own):
    if result is not None:
      results.append(result)
      continue
    piece, group_scores = next(pieces)
    piece = tf.reshape(piece, tf.shape(group_scores))

    def given(unused_scores, unused_sparsity, piece=piece):
      return piece, threshold

    results.append((granularity.compute_mask(weight, sparsity, given)[0],
                    threshold))
  return results
