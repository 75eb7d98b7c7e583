"""`Pruning.conditional_mask_update_op` runs nothing of the update on an idle
step of a TF 2.x graph (`tf1prune.graph.conditional`), and stays a `tf.cond`
where it
must (control flow v1, variables on two devices, reference variables)."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import np_reference
from tests.support.graphs import control_flow

SCOPE = 'conditional_mask_update'
HPARAMS = ('target_sparsity=0.75,sparsity_function_end_step=1,'
           'pruning_frequency=10')


def _pruning(use_resource, devices=('', '')):
  """Two masked `[in, out]` kernels from TF's own initializer, as layers make
  them, on `devices`, and the `Pruning` of `HPARAMS`; every variable a
  resource variable or every one a reference variable."""
  with tf.variable_scope(tf.get_variable_scope(), use_resource=use_resource):
    tf.train.get_or_create_global_step()
    for name, shape, device in zip(('fc1', 'fc2'), ([300, 100], [100, 10]),
                                   devices):
      with tf.device(device), tf.variable_scope(name):
        tf1prune.apply_mask(tf.get_variable(
            'weights', shape, initializer=tf.truncated_normal_initializer(
                stddev=0.04, seed=3)))
    return tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(HPARAMS))


def _executed(sess, fetch):
  """Names of the nodes a traced run of `fetch` executed."""
  trace = tf.RunMetadata()
  sess.run(fetch, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
           run_metadata=trace)
  return [n.node_name for d in trace.step_stats.dev_stats for n in d.node_stats]


def _steps(pruning, config=None):
  """Runs the conditional update of `pruning` at steps 1..21 (updates at 10
  and 20), the weights reversed along their first axis at step 14; returns
  the names the idle step 12 executed, the masks and weights after steps 10,
  19 and 21, and the steps on which the op's value was True."""
  update = pruning.conditional_mask_update_op()
  step = tf.train.get_global_step()
  masks, weights = tf1prune.get_masks(), tf1prune.get_weights()
  reverse = tf.group(*[tf.assign(w, tf.reverse(w, [0])) for w in weights])
  seen, true = {}, []
  with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    for value in range(1, 22):
      sess.run(tf.assign(step, value))
      if value == 14:
        sess.run(reverse)
      if value == 12:
        idle = _executed(sess, update)
      elif sess.run(update):
        true.append(value)
      if value in (10, 19, 21):
        seen[value] = sess.run([masks, weights])
  return idle, seen, true


def _check_masks(seen):
  """The masks are those of the weights at the updates (steps 10 and 20,
  seen after steps 10 and 21), and stay as they are between them."""
  for value in (10, 21):
    masks, weights = seen[value]
    for m, w in zip(masks, weights):
      np.testing.assert_array_equal(
          m, np_reference.magnitude_mask(np.abs(w), 0.75))
  for before, after in zip(seen[10][0], seen[19][0]):
    np.testing.assert_array_equal(before, after)
  for before, after in zip(seen[10][0], seen[21][0]):
    assert (before != after).any()


def test_an_idle_step_runs_one_op_of_the_update_in_tf2_graphs():
  with control_flow(v2=True):
    pruning = _pruning(use_resource=True)
    idle, seen, true = _steps(pruning)
    update = pruning.conditional_mask_update_op()
  # The predicate and the op itself: none of the ops inside it.
  assert not [name for name in idle if SCOPE + '/' in name], idle
  assert update.op.type == 'If'
  assert true == [10, 20]
  _check_masks(seen)


@pytest.mark.parametrize('why', ['control flow v1', 'two devices',
                                 'reference variables, control flow v2'])
def test_the_update_stays_a_tf_cond_where_it_must(why):
  # Control flow v1 comes with reference variables (`disable_v2_behavior()`);
  # control flow v2 with them is `enable_control_flow_v2()` on TF 1.15 or
  # `disable_resource_variables()` on TF 2.x, where a `tf.cond` traced as a
  # function could not assign to them.
  with control_flow(v2=why != 'control flow v1'):
    if why == 'two devices':
      pruning = _pruning(use_resource=True, devices=('/cpu:0', '/cpu:1'))
    else:
      pruning = _pruning(use_resource=False)
    idle, seen, true = _steps(pruning, tf.ConfigProto(
        device_count={'CPU': 2}, allow_soft_placement=False))
    # Building it left the setting as it was.
    assert tf.control_flow_v2_enabled() == (why != 'control flow v1')
  # Lowered into Switch and Merge: the untaken branch's switches run.
  assert [name for name in idle if SCOPE + '/' in name]
  assert true == [10, 20]
  _check_masks(seen)
