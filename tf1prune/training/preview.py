"""See the shrink before exporting: FLOPs, parameters and stops from a session.

    >>> import numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [None, 4])
    ...   h = tf1prune.masked_fully_connected(x, 6, scope='fc1')
    ...   y = tf.identity(tf1prune.masked_fully_connected(h, 2, scope='fc2'),
    ...                   name='y')
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = sess.run(tf1prune.get_masks()[0][:, :3].assign(tf.zeros([4, 3])))
    ...     report = tf1prune.shrink_preview(sess, ['y'])
    >>> [(l.outputs_before, l.outputs_after) for l in report.layers]
    [(6, 3), (2, 2)]

`shrink_preview` freezes the session's graph in memory with its current
variables, folds the masks as `strip_pruning_vars` does and runs the shrink on
it: the `ShrinkReport` is the one `strip_pruning_vars --shrink` gives for a
checkpoint of that session (same layers, totals and stops), and nothing is
written. `ShrinkPreviewHook` writes its FLOPs and parameter ratios as
TensorBoard scalars (`<name>_summaries/expected_flops_ratio`,
`.../expected_params_ratio`, beside `Pruning.add_pruning_summaries()`) every
N steps.

The shrink folds only inference batch norms: a training graph's batch norms
(`is_training=True`) would keep every channel they read, so the preview
refuses them (`TrainingGraphError`). Preview an inference copy built in the
same graph on the same variables instead
(`with tf.variable_scope(tf.get_variable_scope(), reuse=True):` the model
with `is_training=False`), as the export does.
"""

import tensorflow.compat.v1 as tf

from tf1prune.export import shrink_graph_def, strip_pruning_vars_fn
from tf1prune.export.names import output_names
from tf1prune.export.shrink.rounds import check_objective
from tf1prune.export.training_ops import TrainingGraphError, training_ops

__all__ = ['ShrinkPreviewHook', 'shrink_preview']


def shrink_preview(sess, output_node_names, objective='flops'):
  """The `ShrinkReport` the exported, shrunk graph of `sess` will have.

  Args:
    sess: a `tf.Session` (or a session-like object with `run` and `graph`)
      of the training graph, its variables initialized or restored.
    output_node_names: list (or comma-separated str) of the output nodes, as
      given to `strip_pruning_vars`.
    objective: 'flops' or 'params', as for `tf1prune.shrink_graph_def`.

  Returns:
    A `ShrinkReport`: per-layer parameters and FLOPs before and after, where
    and why empty channels would stay (its `check` is None: the preview
    writes nothing, so it does not run the shrunk graph).

  Raises:
    ValueError: an unknown output node or objective, or a graph that cannot
      be frozen.
    TrainingGraphError: (a ValueError) the outputs read batch norms in
      training form.
  """
  outputs = output_names(output_node_names)
  check_objective(objective)
  graph = sess.graph
  _check_outputs(graph, outputs)
  frozen = tf.graph_util.convert_variables_to_constants(
      sess, graph.as_graph_def(), outputs)
  stripped = strip_pruning_vars_fn(frozen, outputs)
  return shrink_graph_def(stripped, outputs, objective=objective,
                          check=False)[1]


def _check_outputs(graph, outputs):
  """Raises if `outputs` are not in `graph` or read training batch norms."""
  known = set(op.name for op in graph.get_operations())
  missing = [name for name in outputs if name not in known]
  if missing:
    raise ValueError('output_node_names %s are not in the session\'s graph; '
                     'give the names of its output ops' % missing)
  found = [op for op in training_ops(graph.as_graph_def(), outputs)
           if op.kind == 'batch_norm']
  if found:
    raise TrainingGraphError(
        'output_node_names %s read %d batch norms in training form '
        '(is_training=True), e.g. %s; the shrink folds only inference batch '
        'norms, so the preview would keep every channel they read. Build an '
        'inference copy of the model in the same graph on the same '
        'variables (with tf.variable_scope(tf.get_variable_scope(), '
        'reuse=True): the model with is_training=False) and preview its '
        'outputs' % (outputs, len(found), ', '.join(
            '%s (%s)' % (op.node, op.op) for op in found[:3])), found)


class ShrinkPreviewHook(tf.train.SessionRunHook):
  """Writes the shrink's expected FLOPs and parameter ratios every N steps.

  Args:
    output_node_names: the model's output nodes (list or comma-separated).
    logdir: the summary directory (the training directory, so that the
      scalars show beside the sparsity summaries).
    every_n_steps: steps between previews (each freezes and shrinks the
      graph in memory: seconds for a large net).
    name: the summary scope, as the `Pruning` spec's `name`.
    objective: 'flops' or 'params'.

  Raises:
    TrainingGraphError: (in `begin`) the outputs read batch norms in
      training form.
  """

  def __init__(self, output_node_names, logdir, every_n_steps=1000,
               name='model_pruning', objective='flops'):
    if not isinstance(every_n_steps, int) or every_n_steps < 1:
      raise ValueError('every_n_steps must be an int >= 1, got %r'
                       % (every_n_steps,))
    check_objective(objective)
    self._outputs = output_names(output_node_names)
    self._logdir = logdir
    self._every = every_n_steps
    self._tag = name + '_summaries/expected_'
    self._objective = objective
    self._step = None
    self._last = None
    self.last_report = None

  def begin(self):
    self._step = tf.train.get_global_step()
    if self._step is None:
      raise ValueError('ShrinkPreviewHook needs a global step; create it '
                       'with tf.train.get_or_create_global_step()')
    _check_outputs(tf.get_default_graph(), self._outputs)

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(self._step)

  def after_run(self, run_context, run_values):
    step = int(run_values.results)
    if self._last is not None and step < self._last + self._every:
      return
    self._last = step
    step = int(run_context.session.run(self._step))   # after the train op
    report = shrink_preview(run_context.session, self._outputs,
                            self._objective)
    self.last_report = report
    totals = report.to_dict()['totals']
    values = [tf.Summary.Value(tag=self._tag + key, simple_value=totals[key])
              for key in ('flops_ratio', 'params_ratio')
              if totals[key] is not None]
    writer = tf.summary.FileWriterCache.get(self._logdir)
    writer.add_summary(tf.Summary(value=values), step)
    writer.flush()
