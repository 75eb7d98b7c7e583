"""The gradual sparsity schedule, in Python and in the graph, against NumPy."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from tf1prune.plan.schedule import sparsity_at, sparsity_tensor
from tests.support import np_reference

STEPS = [-50, 0, 1, 10, 37, 50, 99, 100, 101, 250, 10000]
CASES = [
    # (initial, target, begin, end, exponent)
    (0.0, 0.9, 0, 100, 3.0),
    (0.0, 0.9, 0, 100, 1.0),
    (0.2, 0.75, 10, 200, 3.0),
    (0.1, 0.5, 50, 100, 1.0),
    (0.0, 0.95, 100, 101, 2.0),
]


@pytest.mark.parametrize('case', CASES)
def test_sparsity_at_equals_the_numpy_formula(case):
  for step in STEPS:
    assert sparsity_at(step, *case) == pytest.approx(
        np_reference.schedule(step, *case), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize('case', CASES)
def test_sparsity_tensor_equals_the_numpy_formula(case):
  step = tf.placeholder(tf.int64, [])
  sparsity = sparsity_tensor(step, *case)
  assert sparsity.dtype == tf.float32
  assert sparsity.shape.ndims == 0
  with tf.Session() as sess:
    for t in STEPS:
      got = sess.run(sparsity, {step: t})
      assert got == pytest.approx(np_reference.schedule(t, *case), abs=1e-6)


def test_known_values():
  # p = 0.5: 0.9 + (0 - 0.9) * 0.5**3 = 0.7875; exponent 1: 0.45.
  assert sparsity_at(50, 0.0, 0.9, 0, 100, 3.0) == pytest.approx(0.7875)
  assert sparsity_at(50, 0.0, 0.9, 0, 100, 1.0) == pytest.approx(0.45)
  # Before begin: the initial sparsity; at and after end: the target.
  assert sparsity_at(-5, 0.2, 0.9, 0, 100, 3.0) == pytest.approx(0.2)
  assert sparsity_at(100, 0.2, 0.9, 0, 100, 3.0) == pytest.approx(0.9)
  assert sparsity_at(10 ** 6, 0.2, 0.9, 0, 100, 3.0) == pytest.approx(0.9)


def test_exponent_3_rises_faster_than_exponent_1():
  for step in (10, 30, 60, 90):
    assert sparsity_at(step, 0.0, 0.9, 0, 100, 3.0) > sparsity_at(
        step, 0.0, 0.9, 0, 100, 1.0)


def test_int32_step_tensor_is_accepted():
  step = tf.constant(25, tf.int32)
  with tf.Session() as sess:
    got = sess.run(sparsity_tensor(step, 0.0, 0.8, 0, 100, 1.0))
  assert got == pytest.approx(0.2, abs=1e-7)


def test_schedule_is_monotone_between_begin_and_end():
  values = [sparsity_at(t, 0.0, 0.9, 0, 100, 3.0) for t in range(0, 101)]
  assert np.all(np.diff(values) >= 0)
