"""One-shot pruning of a saved checkpoint; training resumes from the result.

    >>> import os, tempfile, numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.checkpoint_prune import prune_checkpoint
    >>> work = tempfile.mkdtemp()
    >>> with tf.Graph().as_default():
    ...   w = tf.get_variable('fc/weights', initializer=np.arange(1., 101.).reshape(10, 10))
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     path = tf.train.Saver().save(sess, os.path.join(work, 'in', 'model.ckpt'))
    >>> report = prune_checkpoint(path, os.path.join(work, 'out'), {'fc/weights': 0.9})
    >>> reader = tf.train.NewCheckpointReader(os.path.join(work, 'out', 'model.ckpt'))
    >>> int((reader.get_tensor('fc/weights') != 0).sum())
    10

From the shell: `bin/prune_checkpoint --checkpoint=DIR_OR_PREFIX
--output_dir=NEW_DIR --sparsity='conv.*/weights:0.8,fc1/weights:0.5'
--zero='conv2/weights[:, :, 29, 13]'`.

What it does, per weight chosen by `--sparsity` (regex searched in the
variable's name, as `weight_sparsity_map`): ranks `|weight * mask|` (mask = the
weight's `apply_mask` mask if the checkpoint has one, else ones) with the exact
top-k of `tf1prune.thresholds`, and writes the new mask, its threshold, and the
raw weight with zeros at the pruned entries. `--zero=NAME_REGEX[INDEX]`
zeroes the NumPy index (`:, :, 29, 13`, ints, slices, `...`) the same way, and
if the graph locks that weight (`tf1prune.lock`), adds the entries to the lock
at value 0. Optimizer slots saved under the weight's name with its shape
(`w/Momentum`, `w/Adam`, `w/Adam_1`, ...) are zeroed at the same entries, so
momentum does not push a pruned weight back. Every other variable is copied
unchanged, the meta graph is copied, and a `checkpoint` state file names the
new prefix (same basename, so the global step in the name stays).

Masks, thresholds and locks are found through the `.meta` file's tf1prune
collections; without a `.meta` file, `X/mask` and `X/threshold` next to a
weight `X/weights` (or `X/kernel`) are used. Candidates for the regexes are
float variables of rank >= 1 that are neither tf1prune's own (masks,
thresholds, locks) nor optimizer slots of another variable.

Output is written to a temporary folder next to `output_dir` and renamed when
complete; on any error nothing is left behind.
"""

import json
import numbers
import os
import re
import shutil

import numpy as np

from tf1prune._moved import moved_names
from tf1prune.export import _checkpoint, atomic
from tf1prune.export.progress import notify

_OWN_SUFFIXES = ('/mask', '/threshold', '/lock_mask', '/lock_value',
                 '/lock_captured', '/last_mask_update_step')
_OBJECT_GRAPH = '_CHECKPOINTABLE_OBJECT_GRAPH'


class CheckpointPruneError(ValueError):
  """A bad argument or checkpoint; the message is one line for the user."""


# The parsers of the command's flags live in tf1prune.cli.checkpoint_flags.
__getattr__ = moved_names(__name__)


def compile_regex(pattern, flag):
  """`re.compile(pattern)`; a bad one is a `CheckpointPruneError` naming
  `flag`."""
  try:
    return re.compile(pattern)
  except re.error as e:
    raise CheckpointPruneError('%s regex %r is not valid: %s'
                               % (flag, pattern, e))


def _resolve(checkpoint):
  """Returns the checkpoint prefix for a prefix or a folder (any gfile path)."""
  try:
    return _checkpoint.checkpoint_prefix(checkpoint)
  except _checkpoint.NoCheckpoint as e:
    if e.reason == e.NONE_SAVED:
      raise CheckpointPruneError('--checkpoint folder %s has no checkpoint '
                                 '(no "checkpoint" state file naming one)' %
                                 checkpoint)
    if e.reason == e.FILE:
      raise CheckpointPruneError('--checkpoint %s is a file of checkpoint %s: '
                                 'pass that prefix or its folder' %
                                 (checkpoint, e.prefix))
    raise CheckpointPruneError('--checkpoint %s is neither a folder nor a '
                               'checkpoint prefix (no %s.index)' %
                               (checkpoint, checkpoint))


def _graph_links(prefix, tf, names):
  """Returns (masks, thresholds, locks, trainable) read from the meta graph.

  masks/thresholds: weight -> variable name; locks: weight -> list of
  (lock_mask name, lock_value name); trainable: the set of trainable variable
  names, or None without a readable meta graph.
  """
  masks, thresholds, locks, trainable = {}, {}, {}, None
  meta = prefix + '.meta'
  if tf.io.gfile.exists(meta):
    from tf1prune.graph.locks import lock_records
    from tf1prune.graph.masking import masked_weight_records
    with tf.Graph().as_default() as graph:
      try:
        tf.train.import_meta_graph(meta, clear_devices=True)
        records = masked_weight_records(graph)
        lock_list = lock_records(graph)
        trainable = set(v.op.name for v in graph.get_collection(
            tf.GraphKeys.TRAINABLE_VARIABLES))
      except Exception as e:  # pylint: disable=broad-except
        tf.logging.warning('cannot read %s (%s); finding masks by name', meta,
                           str(e).splitlines()[0] if str(e) else type(e))
        records, lock_list = None, []
    if records is not None:
      # apply_mask(lock(w)) masks the lock's output: the weight is w.
      locked_input = {l.effective.op.name: l.name for l in lock_list}
      by_masked = {}
      for r in records:
        weight = locked_input.get(r.weight.op.name, r.name)
        masks[weight] = r.mask.op.name
        thresholds[weight] = r.threshold.op.name
        by_masked[r.masked_weight.op.name] = weight
      for l in lock_list:
        weight = by_masked.get(l.name, l.name)
        locks.setdefault(weight, []).append((l.locked.op.name, l.value.op.name))
      return masks, thresholds, locks, trainable
  for name in names:
    parent, _, base = name.rpartition('/')
    scope = parent if base in ('weights', 'kernel') else name
    for kind, table in (('mask', masks), ('threshold', thresholds)):
      candidate = (scope + '/' if scope else '') + kind
      if candidate in names:
        table[name] = candidate
  return masks, thresholds, locks, trainable


def _candidates(shapes, dtypes, own, trainable):
  """Float variables of rank >= 1, not tf1prune's own, not optimizer slots.

  With a meta graph (`trainable` not None), only its trainable variables.
  """
  result = []
  for name, shape in shapes.items():
    if name in own or name.endswith(_OWN_SUFFIXES) or not shape:
      continue
    if trainable is not None and name not in trainable:
      continue
    if not dtypes[name].is_floating:
      continue
    parent = name.rpartition('/')[0]
    is_slot = False
    while parent:
      if parent in shapes and shapes[parent] == shape:
        is_slot = True
        break
      parent = parent.rpartition('/')[0]
    if not is_slot:
      result.append(name)
  return sorted(result)


def _slots(name, shapes):
  prefix = name + '/'
  return sorted(n for n, s in shapes.items()
                if n.startswith(prefix) and s == shapes[name])


def _partitioned(shapes, trainable):
  """Checkpoint keys whose trainable variables are partitions
  (`<key>/part_<k>` in the graph)."""
  if trainable is None:
    return []
  return sorted(name for name in shapes
                if name not in trainable and name + '/part_0' in trainable)


def _match(patterns, candidates, flag, partitions=()):
  """Returns {candidate: pattern}; each pattern must match, none twice.

  partitions: the names of partitioned variables, for the error when a
  pattern matches only those.
  """
  hits = {}
  for pattern in patterns:
    regex = compile_regex(pattern, flag)
    found = [c for c in candidates if regex.search(c)]
    if not found:
      partitioned = sorted(n for n in partitions if regex.search(n))
      if partitioned:
        raise CheckpointPruneError(
            '%s regex %r matches %s, partitioned in the graph; '
            'prune_checkpoint does not prune partitioned variables: prune '
            'them in training (tf1prune.Pruning) or save them '
            'unpartitioned' % (flag, pattern, ', '.join(partitioned)))
      raise CheckpointPruneError('%s regex %r matches no prunable variable; '
                                 'prunable: %s' % (flag, pattern,
                                                   ', '.join(candidates) or
                                                   'none'))
    for name in found:
      if name in hits and hits[name] != pattern:
        raise CheckpointPruneError('%s: variable %s matches both %r and %r; make '
                                   'them exclusive' % (flag, name, hits[name],
                                                       pattern))
      hits[name] = pattern
  return hits


def _magnitude_masks(tf, jobs, progress=None):
  """jobs: list of (scores array, sparsity) -> list of (mask, threshold)."""
  from tf1prune.masks import magnitude_mask
  results = []
  notify(progress, 'pruning weights', 0, len(jobs))
  for scores, sparsity in jobs:
    # A graph per weight: in one graph for all, each run would go through
    # the ops of every earlier weight too, and the time per weight would
    # grow with their number (resnet_v1_50's 54 weights: 35 s instead of
    # 14 s, and the progress line's time left off fourfold).
    with tf.Graph().as_default(), tf.Session() as sess:
      placeholder = tf.placeholder(scores.dtype, scores.shape)
      mask, threshold = magnitude_mask(placeholder, sparsity)
      results.append(tuple(sess.run([mask, threshold], {placeholder: scores})))
    notify(progress, 'pruning weights', len(results), len(jobs))
  return results


def _write(values, dtypes, prefix, output_dir, tf):
  """Saves `values` (name -> array) as a checkpoint at output_dir/basename."""
  basename = os.path.basename(prefix)
  parent = os.path.dirname(os.path.abspath(output_dir))
  if not os.path.isdir(parent):
    raise CheckpointPruneError('--output_dir parent folder %s does not exist'
                               % parent)
  atomic.remove_stale_staging(output_dir)
  try:
    temp = atomic.staging_path(output_dir, 'tmp', directory=True)
  except ValueError as e:
    raise CheckpointPruneError('--output_dir: %s' % e)
  try:
    with tf.Graph().as_default(), tf.Session() as sess:
      feeds, variables = {}, {}
      for i, name in enumerate(sorted(values)):
        value = values[name]
        holder = tf.placeholder(dtypes[name], value.shape)
        variables[name] = tf.Variable(holder, name='v%d' % i, trainable=False)
        feeds[holder] = value
      sess.run(tf.global_variables_initializer(), feeds)
      saver = tf.train.Saver(variables, sharded=False)
      saver.save(sess, os.path.join(temp, basename), write_meta_graph=False,
                 write_state=False)
    if tf.io.gfile.exists(prefix + '.meta'):
      tf.io.gfile.copy(prefix + '.meta', os.path.join(temp, basename + '.meta'))
    with open(os.path.join(temp, 'checkpoint'), 'w') as f:
      f.write('model_checkpoint_path: %s\nall_model_checkpoint_paths: %s\n'
              % (json.dumps(basename), json.dumps(basename)))
    os.rename(temp, output_dir)
  except BaseException:
    shutil.rmtree(temp, ignore_errors=True)
    raise
  return os.path.join(output_dir, basename)


class CheckpointState(object):
  """A checkpoint's variables in memory, with its meta graph's tf1prune links.

  Args:
    checkpoint: a checkpoint prefix, or a folder (its latest checkpoint).

  Attributes:
    prefix: the checkpoint prefix read.
    shapes, dtypes: {variable: shape}, {variable: tf.DType}.
    values: {variable: NumPy array} once `load` read them, changed by
      `prune` and by the caller.
    masks, thresholds: {weight: its mask / threshold variable}.
    locks: {weight: [(lock_mask, lock_value) variables]}.
    trainable: the trainable variables' names, or None without a meta graph.

  Raises:
    CheckpointPruneError: the checkpoint cannot be read or is object-based.
  """

  def __init__(self, checkpoint):
    import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
    self.prefix = _resolve(checkpoint)
    try:
      reader = tf.train.NewCheckpointReader(self.prefix)
    except Exception as e:  # pylint: disable=broad-except
      raise CheckpointPruneError('cannot read checkpoint %s: %s' % (
          self.prefix, str(e).splitlines()[0] if str(e) else
          type(e).__name__))
    self.shapes = reader.get_variable_to_shape_map()
    self.dtypes = reader.get_variable_to_dtype_map()
    if _OBJECT_GRAPH in self.shapes:
      raise CheckpointPruneError('%s is an object-based checkpoint '
                                 '(tf.train.Checkpoint); save with '
                                 'tf.train.Saver for prune_checkpoint'
                                 % self.prefix)
    self.masks, self.thresholds, self.locks, self.trainable = _graph_links(
        self.prefix, tf, set(self.shapes))
    self._reader = reader
    self.values = {}

  def load(self, progress=None):
    """Reads every variable's value into `values`."""
    notify(progress, 'reading variables', 0, len(self.shapes))
    for name in sorted(self.shapes):
      self.values[name] = np.asarray(self._reader.get_tensor(name))
      notify(progress, 'reading variables', len(self.values),
             len(self.shapes))

  def candidates(self):
    """The variables that may be pruned (see the module docstring)."""
    own = set(self.masks.values()) | set(self.thresholds.values()) | {
        n for pairs in self.locks.values() for pair in pairs for n in pair}
    return _candidates(self.shapes, self.dtypes, own, self.trainable)

  def effective(self, name):
    """`weight * mask` of weight `name` (its mask: ones without one)."""
    weight = self.values[name]
    mask = (self.values[self.masks[name]].astype(weight.dtype)
            if name in self.masks else np.ones_like(weight))
    return weight * mask

  def prune(self, name, new_mask, threshold=None, selected=None):
    """Masks weight `name` with the bool `new_mask` (None: its mask as it
    is), zeroes `selected` entries (locking them where a lock holds the
    weight), and zeroes the pruned entries of the weight and of its
    optimizer slots; returns the report entry.

    Entries under a lock keep their mask, as `Pruning`'s update does.
    """
    weight = self.values[name]
    if selected is None:
      selected = np.zeros(weight.shape, bool)
    old_mask = (self.values[self.masks[name]] if name in self.masks
                else np.ones(weight.shape, weight.dtype))
    zeros_before = float(np.mean(weight * old_mask == 0))
    if new_mask is None:
      new_mask = old_mask != 0
    locked = np.zeros(weight.shape, bool)
    for lock_mask, _ in self.locks.get(name, []):
      locked |= self.values[lock_mask]
    new_mask = np.where(locked & ~selected, old_mask != 0, new_mask)
    new_mask &= ~selected
    keep = new_mask.astype(weight.dtype)
    self.values[name] = weight * keep
    slots = _slots(name, self.shapes)
    for slot in slots:
      self.values[slot] = self.values[slot] * keep.astype(
          self.values[slot].dtype)
    if name in self.masks:
      self.values[self.masks[name]] = keep.astype(
          self.values[self.masks[name]].dtype)
    if name in self.thresholds and threshold is not None:
      self.values[self.thresholds[name]] = np.asarray(
          threshold, self.values[self.thresholds[name]].dtype)
    lock_names = []
    if selected.any():
      for lock_mask, lock_value in self.locks.get(name, []):
        self.values[lock_mask] = self.values[lock_mask] | selected
        self.values[lock_value] = np.where(
            selected, 0, self.values[lock_value]).astype(
                self.values[lock_value].dtype)
        lock_names.append(lock_mask)
    return {
        'name': name, 'shape': list(self.shapes[name]),
        'zeros_before': zeros_before,
        'zeros_after': float(np.mean(self.values[name] == 0)),
        'mask': self.masks.get(name), 'threshold': (float(threshold)
                                                    if threshold is not None
                                                    else None),
        'slots': slots, 'locks': lock_names}

  def write(self, output_dir):
    """Writes the values as a checkpoint in the new folder `output_dir`;
    returns its prefix."""
    import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
    dtypes = {name: self.dtypes[name].base_dtype for name in self.shapes}
    return _write(self.values, dtypes, self.prefix, output_dir, tf)


def check_output_dir(output_dir):
  """Raises `CheckpointPruneError` if `output_dir` exists."""
  if os.path.exists(output_dir):
    raise CheckpointPruneError('--output_dir %s exists; give a new folder (the '
                               'pruned checkpoint is never written over '
                               'anything)' % output_dir)


def prune_checkpoint(checkpoint, output_dir, sparsity=None, zero=None,
                     progress=None):
  """Writes a pruned copy of a checkpoint; returns a report.

  Args:
    checkpoint: a checkpoint prefix, or a folder (its latest checkpoint).
    output_dir: a new folder (it must not exist) for the pruned checkpoint.
    sparsity: dict regex -> sparsity in [0, 1): prune each matching weight
      to that fraction of zeros by magnitude.
    zero: list of (regex, NumPy index): entries to set to zero (and lock, if
      the graph locks that weight).
    progress: optional `progress(stage, done, total, fraction)` callable
      (`tf1prune.export.progress`): variables read, weights pruned.

  Returns:
    A dict: 'checkpoint' (the new prefix) and 'weights', a list of dicts
    (name, shape, zeros_before, zeros_after, mask, threshold, slots, locks)
    per changed weight, sorted by name.

  Raises:
    CheckpointPruneError: a bad argument or checkpoint (nothing is written).
  """
  import tensorflow.compat.v1 as tf
  sparsity = dict(sparsity or {})
  zero = list(zero or [])
  for pattern, value in sorted(sparsity.items()):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
        not 0.0 <= value < 1.0:
      raise CheckpointPruneError(
          'sparsity[%r] = %r: a sparsity must be a number in [0, 1), the '
          'fraction of entries set to zero' % (pattern, value))
  if not sparsity and not zero:
    raise CheckpointPruneError('nothing to do: give --sparsity and/or --zero')
  check_output_dir(output_dir)
  state = CheckpointState(checkpoint)
  shapes = state.shapes
  candidates = state.candidates()
  partitions = _partitioned(shapes, state.trainable)
  targets = _match(sorted(sparsity), candidates, '--sparsity', partitions)
  zero_targets = _match(sorted({r for r, _ in zero}), candidates, '--zero',
                        partitions)
  state.load(progress)
  changed = sorted(set(targets) | set(zero_targets))
  selections = {}
  from tf1prune.masks import index_mask
  for name in changed:
    selected = np.zeros(shapes[name], bool)
    for pattern, index in zero:
      if re.search(pattern, name):
        try:
          selected |= index_mask(shapes[name], index)
        except ValueError as e:
          raise CheckpointPruneError('--zero %s[...] on %s: %s'
                                     % (pattern, name, e))
    selections[name] = selected
  jobs = []
  for name in changed:
    if name in targets:
      scores = np.abs(state.effective(name))
      scores[selections[name]] = 0
      jobs.append((scores, sparsity[targets[name]]))
  computed = iter(_magnitude_masks(tf, jobs, progress))
  report = []
  for name in changed:
    new_mask, threshold = None, None
    if name in targets:
      new_mask, threshold = next(computed)
      new_mask = new_mask.astype(bool)
    report.append(state.prune(name, new_mask, threshold, selections[name]))
  return {'checkpoint': state.write(output_dir), 'weights': report}
