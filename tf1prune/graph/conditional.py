"""`run_if`: a tensor whose evaluation runs a subgraph on the steps a
predicate allows, and is one op on the others.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.graph.conditional import run_if
    >>> with tf.Graph().as_default():
    ...   count = tf.get_variable('count', [], tf.int32, tf.zeros_initializer())
    ...   due = tf.placeholder(tf.bool, [])
    ...   bump = run_if(due, lambda: tf.assign_add(count, 1), [count], 'bump')
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     for flag in (True, False, True):
    ...       _ = sess.run(bump, {due: flag})
    ...     int(sess.run(count))
    2

`Pruning.conditional_mask_update_op` runs beside `train_op` on every step and
updates the masks on one step in `pruning_frequency`. Under control flow v2
(TF 2.x graphs), `tf.cond` is an `If` op that the session lowers into
`Switch` and `Merge` ops, for v1 semantics (ops of a branch on other
devices, pruning, non-strict evaluation): then on every step where nothing
is due, every op of the untaken update passes a dead signal on (every op of
the branch functions, nested conditionals included: thousands for a small
net's update). `run_if` builds the `If` op itself, its branch traced as a
`tf.function`, without that mark: the session runs it as one op, which
calls the branch only when `pred` is true. The branch needs none of the v1
semantics: it returns a constant and runs whole.

Where the lowered form is needed, `run_if` is `tf.cond`: control flow v1
(TF 1.x's default, and `disable_v2_behavior()`), reference variables (no
function can capture them), variables on more than one device (an `If` op
runs its branch on its own device), and a process that sees a GPU or
another accelerator (there the branch would run all its ops on one device,
where the lowered ops are placed one by one). Reference variables under
control flow v2 (`enable_control_flow_v2()` on TF 1.15, or
`disable_resource_variables()` on TF 2.x): a `tf.cond` would trace its
branch as a function too, and an assign to such a variable there fails to
build; so that `tf.cond` is built with control flow v2 turned off, and the
setting restored (`conds_assigning`, which `tf1prune.batch_norm` uses too).
"""

import contextlib

import tensorflow.compat.v1 as tf

__all__ = ['conds_assigning', 'run_if']


def _on_cpus_only():
  """True if the process sees no device but CPUs (TF 1.15 lists each CPU
  once more, as an XLA_CPU)."""
  devices = tf.config.experimental.list_physical_devices()
  return all(d.device_type in ('CPU', 'XLA_CPU') for d in devices)


def functional(variables):
  """True if `run_if` over ops on `variables` builds an unlowered `If` op.

  Args:
    variables: the variables (or tensors read from them) the branch reads or
      writes.
  """
  return bool(tf.control_flow_v2_enabled() and not _references(variables) and
              len({v.device for v in variables}) <= 1 and _on_cpus_only())


def _references(variables):
  """True if one of `variables` is a reference variable (its dtype is a
  reference type, `float32_ref`)."""
  return any(v.dtype != v.dtype.base_dtype for v in variables)


@contextlib.contextmanager
def conds_assigning(variables):
  """Inside the block, a `tf.cond` can assign to `variables`: with a
  reference variable among them under control flow v2, conds are built as
  Switch and Merge ops (control flow v2, a process-wide setting, turned off
  inside, and restored).

  Args:
    variables: the variables the conds' branches assign to.
  """
  off = tf.control_flow_v2_enabled() and _references(variables)
  if off:
    tf.disable_control_flow_v2()
  try:
    yield
  finally:
    if off:
      tf.enable_control_flow_v2()


def run_if(pred, build, variables, name):
  """Returns a tensor whose evaluation runs the ops `build()` makes when
  `pred` is true.

  Args:
    pred: bool scalar tensor.
    build: callable without arguments; builds the ops and returns an
      Operation or a tensor that, run, runs them all (or None).
    variables: the variables (or tensors read from them) the ops read or
      write: `functional(variables)` chooses the form.
    name: the op's name.

  Returns:
    A bool scalar tensor, the value of `pred` (as `tf.cond` of an op and
    `tf.no_op` returns it); on a step where `pred` is false, evaluating it
    runs nothing of what `build` made.
  """
  if not functional(variables):
    with conds_assigning(variables):
      return tf.cond(pred, lambda: _op_of(build()), tf.no_op, name=name)

  def branch():
    build()    # tf.function runs every stateful op it made
    return tf.constant(True)

  then = tf.function(branch, autograph=False).get_concrete_function()
  inputs = then.captured_inputs
  skip = tf.function(
      lambda *args: tf.constant(False), autograph=False,
      input_signature=[tf.TensorSpec(t.shape, t.dtype) for t in inputs]
  ).get_concrete_function()
  return tf.raw_ops.If(cond=pred, input=inputs, Tout=[tf.bool],
                       then_branch=then, else_branch=skip, name=name)[0]


def _op_of(result):
  """The Operation of what `build` returned (a no-op for None)."""
  if result is None:
    return tf.no_op()
  return result if isinstance(result, tf.Operation) else result.op
