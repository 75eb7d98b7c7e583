"""A checkpoint's whole export: strip, shrink, TFLite and report, or nothing.

    >>> import os, tempfile, numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> from tf1prune.export import write_pb
    >>> train_dir = tempfile.mkdtemp()
    >>> with tf.Graph().as_default():
    ...   x = tf.placeholder(tf.float32, [None, 3], name='x')
    ...   h = tf1prune.masked_fully_connected(x, 4, scope='fc1')
    ...   y = tf1prune.masked_fully_connected(h, 2, activation_fn=None,
    ...                                       scope='y')
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = sess.run(tf1prune.get_masks()[0][:, 1].assign(tf.zeros([3])))
    ...     _ = tf.train.Saver().save(sess, os.path.join(train_dir, 'model'))
    >>> report = write_pb(train_dir, ['y/BiasAdd'],
    ...                   os.path.join(train_dir, 'out', 'model.pb'),
    ...                   shrink=True)
    >>> [(l.outputs_before, l.outputs_after)
    ...  for l in report.shrink_report.layers]
    [(4, 3), (2, 2)]

`write_pb` is what `strip_pruning_vars` runs and what library callers use:
the checkpoint is frozen and stripped (`strip_checkpoint`), optionally shrunk
(`shrink_pb`) and converted to TFLite (`write_tflite`), and the report
written as JSON. Every file is written under a staging name and renamed at
the end (the `.pb` last), so a failure leaves the files that were there as
they were and no new one; a folder it created for the `.pb` goes too.
"""

import json
import os
import shutil

from tf1prune.export import atomic, stream
from tf1prune.export._strip import strip_checkpoint
from tf1prune.export._tflite import write_tflite
from tf1prune.export.shrink import shrink_pb
from tf1prune.export.verify import BadInputShapes, OutputsDiffer

__all__ = ['write_pb']

# How errors name the arguments; the command line passes its flags instead.
ARGUMENT_NAMES = {'output_path': 'output_path', 'output_dir':
                  "output_path's directory", 'tflite_path': 'tflite_path',
                  'report_json': 'report_json',
                  'shrink_check': 'shrink_check=False',
                  'shrink_input_shapes': 'shrink_input_shapes'}


def _check_writable(directory, what):
  if not os.path.isdir(directory):
    raise ValueError('%s %r is not a directory' % (what, directory))
  if not os.access(directory, os.W_OK | os.X_OK):
    raise ValueError('%s %r is not writable' % (what, directory))


def _make_folder(folder, what):
  """Creates `folder` if missing; returns the topmost folder it created."""
  created = None
  if not os.path.exists(folder):
    parent = folder
    while not os.path.exists(parent):
      created, parent = parent, os.path.dirname(parent)
    _check_writable(parent, what)
    os.makedirs(folder)
  return created


def _targets(output_path, tflite_path, report_json, names):
  """The files to write, argument -> absolute path, the `.pb` first."""
  targets = {'output_path': output_path}
  for argument, value in (('tflite_path', tflite_path),
                          ('report_json', report_json)):
    if value:
      _check_writable(os.path.dirname(os.path.abspath(value)),
                      names[argument] + ' directory')
      targets[argument] = os.path.abspath(value)
  named = {}
  for argument, target in targets.items():
    if os.path.isdir(target):
      raise ValueError('%s %r is a directory; give the path of a file to '
                       'write' % (names[argument], target))
    if target in named:
      raise ValueError('%s and %s name the same file %r; give each its own'
                       % (names[named[target]], names[argument], target))
    named[target] = argument
  return targets


def write_pb(checkpoint_dir, output_node_names, output_path, shrink=False,
             shrink_objective='flops', tflite_path=None, report_json=None,
             allow_no_masks=False, allow_training_ops=False, progress=None,
             argument_names=None, shrink_check=True,
             shrink_input_shapes=None):
  """Exports the latest checkpoint of `checkpoint_dir` as a frozen `.pb`.

  Args:
    checkpoint_dir: a training directory or a checkpoint prefix.
    output_node_names: list of str, the graph's output nodes.
    output_path: the `.pb` to write; its folder is created if missing.
    shrink: also remove the channels whose filters are all zero
      (`shrink_pb`); the report then describes the shrunk file.
    shrink_objective: 'flops' or 'params', the shrink's cost rule.
    tflite_path: TF 2.x: also write a TFLite model of the `.pb` there.
    report_json: also write the report (with the shrink's and the TFLite
      model's) as JSON there.
    allow_no_masks, allow_training_ops: as `strip_checkpoint`.
    progress: None or a `progress(stage, done, total, fraction)` callback
      (`tf1prune.export.progress`).
    argument_names: how errors name the arguments (`output_path`,
      `output_dir`, `tflite_path`, `report_json`, `shrink_input_shapes`;
      `shrink_check`: how to skip the check): the command line passes its
      flags.
    shrink_check: run the shrunk graph beside the stripped one on random
      inputs and refuse to write one whose outputs differ (`shrink_pb`'s
      `check`; the shrink report's `check` says how it went).
    shrink_input_shapes: None, or {placeholder name: shape} for that check
      where an input has unknown dimensions besides the batch size.

  Returns:
    The `StripReport`, with `shrink_report` and `tflite_report` set when
    made, and `output_path` the file written.

  Raises:
    ValueError: bad input (a folder that is not writable, a target that is
      a folder, two targets that are one file, TFLite on TF 1.15, or what
      the strip, shrink and converter raise: `OutputsDiffer` when the shrunk
      graph's outputs differ from the stripped graph's); nothing is written
      then.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  names = dict(ARGUMENT_NAMES, **(argument_names or {}))
  output_path = os.path.abspath(output_path)
  created = _make_folder(os.path.dirname(output_path), names['output_dir'])
  try:
    _check_writable(os.path.dirname(output_path), names['output_dir'])
    if tflite_path and tf.__version__.startswith('1.'):
      raise ValueError('%s needs TensorFlow 2.x (this is %s); with TF 1.15 '
                       'run its TFLite converter on the .pb yourself'
                       % (names['tflite_path'], tf.__version__))
    targets = _targets(output_path, tflite_path, report_json, names)
    staged = {}
    try:
      for argument, target in targets.items():
        atomic.remove_stale_staging(target)
        staged[argument] = atomic.staging_path(target, 'staged')
      report = _write(checkpoint_dir, output_node_names, staged, shrink,
                      shrink_objective, allow_no_masks, allow_training_ops,
                      progress, (shrink_check, shrink_input_shapes), names)
      report.output_path = output_path
      if report.tflite_report is not None:
        report.tflite_report = report.tflite_report._replace(path=tflite_path)
      if report_json:
        with atomic.write_atomically(staged['report_json']) as f:
          f.write((json.dumps(report.to_dict(), indent=2, sort_keys=True)
                   + '\n').encode())
      for argument in reversed(list(targets)):
        os.replace(staged.pop(argument), targets[argument])
    except BaseException:
      for name in staged.values():
        if os.path.exists(name):
          os.remove(name)
      raise
    return report
  except BaseException:
    if created is not None:
      shutil.rmtree(created, ignore_errors=True)
    raise


def _write(checkpoint_dir, output_node_names, staged, shrink, objective,
           allow_no_masks, allow_training_ops, progress, check, names):
  """Strips, shrinks and converts into the staging files; the report.
  `check` is (shrink_check, shrink_input_shapes)."""
  report = strip_checkpoint(checkpoint_dir, output_node_names,
                            staged['output_path'],
                            allow_no_masks=allow_no_masks,
                            allow_training_ops=allow_training_ops,
                            progress=progress)
  if shrink:
    try:
      report.shrink_report = shrink_pb(
          staged['output_path'], output_node_names, objective=objective,
          progress=progress, check=check[0], input_shapes=check[1])
    except OutputsDiffer as e:
      raise e.with_skip(names['shrink_check'])
    except BadInputShapes as e:
      raise e.named(names['shrink_input_shapes'])
    raw, gzipped = stream.file_sizes(staged['output_path'])
    report.record_shrink(raw, gzipped, report.shrink_report.num_nodes_after)
  if 'tflite_path' in staged:
    report.tflite_report = write_tflite(staged['output_path'],
                                        output_node_names,
                                        staged['tflite_path'])
  return report
