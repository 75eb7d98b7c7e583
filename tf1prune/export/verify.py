"""Do two frozen graphs compute the same outputs, here? A random-input check.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.verify import compare_graph_defs
    >>> def graph(scale):
    ...   with tf.Graph().as_default() as g:
    ...     x = tf.placeholder(tf.float32, [None, 4], name='x')
    ...     tf.multiply(x, scale, name='y')
    ...   return g.as_graph_def()
    >>> same = compare_graph_defs(graph(2.0), graph(2.0), ['y'])
    >>> same.passed, same.max_diff, same.inputs
    (True, 0.0, {'x': [[2, 4], [1, 4]]})
    >>> compare_graph_defs(graph(2.0), graph(2.5), ['y']).passed
    False

`compare_graph_defs(reference, candidate, outputs)` runs both GraphDefs in
the running TensorFlow (its kernels: TF 2.x's oneDNN ones where they are
on), feeds both the same random inputs and compares each output: the
difference is `max |candidate - reference|` over the largest magnitude of
either, so 1e-4 means "1e-4 of max|y|". The candidate runs as a session
runs a graph by default, with TensorFlow's graph optimizations (grappler:
the fused kernels it picks, the graph it folds); the reference runs without
them, its ops as they are: what the graph means, not what a fusion makes of
it (and a fusion that fails on the given graph, as TF 2.21's of a
`FusedBatchNorm` and a `Tanh` does, does not stop the check). Optimizing
only the candidate, which is the smaller graph after a shrink, also keeps
the check cheap. It returns a `Comparison`; `OutputsDiffer` is the error to
raise when it did not pass.
The shrink (`shrink_graph_def`, `shrink_pb`, `strip_pruning_vars
--shrink`) runs it on every graph it makes; any export that rewrites a
graph can use it the same way.

The rule:

- Inputs: every `Placeholder` of the reference (a `PlaceholderWithDefault`
  keeps its default), with the shapes of the graph; an unknown batch size is
  2, then 1 (two runs: the batch broadcasts both ways), a known one is
  used as it is (two runs, two seeds); other unknown dimensions come from
  `input_shapes` ({name: shape}), else the check is not run and `note`
  says which input to give a shape. Values: floats from a standard normal
  distribution; integers 0 or 1 (ids that index any table; 0..255 for
  uint8 pixels); bools at random; strings and other types are not fed:
  the check is not run, `note` says why.
- Tolerance (`tolerance(dtype)`): 1e-4 of max|y| for float32 and float64
  outputs. A rewrite that removes channels changes the order of float32
  sums and folds constants in float64 before rounding them to float32: a
  few ulps per layer (1e-7 to 1e-6 of max|y| on real nets), far below 1e-4;
  what it is meant to catch (a wrong fold, a kernel that computes a layer
  wrongly) is 1e-2 and up. float16 and bfloat16 outputs: 1e-2 (a float16
  step is 1e-3). Other outputs (an argmax, ints): the fraction of entries
  that differ, which must be 0.
- Entries that are not finite count as equal when both graphs give the same
  one (inf and inf, NaN and NaN).
- A reference that does not run here (a TensorFlow kernel that fails on
  the graph you gave) leaves the check not run (`note`); a candidate that
  does not run fails it.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

__all__ = ['BadInputShapes', 'Comparison', 'OutputsDiffer',
           'compare_graph_defs', 'difference', 'parse_input_shapes',
           'random_values', 'tolerance']

class Comparison(collections.namedtuple('Comparison', [
    'max_diff', 'diffs', 'tolerance', 'inputs', 'note', 'version',
    'error'])):
  """What `compare_graph_defs` found.

  Attributes:
    max_diff: the largest of `diffs`, None if the check did not run.
    diffs: {output name: max |candidate - reference| / max(|reference|,
      |candidate|)} (for outputs that are not floats: the fraction of
      entries that differ; inf: the candidate fails or its shape differs).
    tolerance: {output name: the largest difference allowed}.
    inputs: {placeholder name: [shape of each run]}.
    note: None, or why the check did not run (it then passes nothing).
    version: the TensorFlow that ran both graphs.
    error: None, or the error the candidate failed with.
  """

  @property
  def passed(self):
    """True or False; None if the check did not run."""
    if self.note is not None:
      return None
    return all(self.diffs[name] <= self.tolerance[name]
               for name in self.diffs)

  def failing(self):
    """[(output, difference, tolerance)] of the outputs that differ."""
    if self.note is not None:
      return []
    return [(name, self.diffs[name], self.tolerance[name])
            for name in sorted(self.diffs)
            if not self.diffs[name] <= self.tolerance[name]]

  def describe(self, candidate='shrunk', reference='unshrunk'):
    """One line for a report table."""
    if self.note is not None:
      return 'not run: %s' % self.note
    runs = '; '.join('%s %s' % (name, ' and '.join(
        str(list(s)) for s in shapes)) for name, shapes in sorted(
            self.inputs.items())) or 'no inputs'
    if self.error is not None:
      return 'FAILED: the graph does not run: %s' % self.error
    return '%s: max |%s - %s| %.1e of max|y| (tolerance %.0e), random ' \
        'inputs %s, TensorFlow %s' % (
            'passed' if self.passed else 'FAILED', candidate, reference,
            self.max_diff,
            max(self.tolerance.values()) if self.tolerance else 0.0, runs,
            self.version)

  def to_dict(self):
    return {'passed': self.passed, 'max_diff': self.max_diff,
            'diffs': dict(self.diffs), 'tolerance': dict(self.tolerance),
            'inputs': dict((k, [list(s) for s in v])
                           for k, v in self.inputs.items()),
            'note': self.note, 'tensorflow': self.version,
            'error': self.error}


class OutputsDiffer(ValueError):
  """A rewritten graph computes other outputs than the graph it came from.

  Attributes:
    comparison: the `Comparison`.
    what: what was compared, e.g. 'the shrunk graph'.
    skip: how to skip the check, e.g. 'check=False'.
  """

  def __init__(self, comparison, what, skip):
    self.comparison, self.what, self.skip = comparison, what, skip
    super(OutputsDiffer, self).__init__(self._text())

  def _text(self):
    found = self.comparison.failing()
    if self.comparison.error is not None:
      return ('%s does not run in TensorFlow %s: %s. That is a bug of the '
              'shrink or of this TensorFlow\'s kernels (docs/deployment.md '
              'lists the known ones): please report it with the graph. To '
              'write it anyway, skip the check: %s' % (
                  self.what, self.comparison.version, self.comparison.error,
                  self.skip))
    outputs = ', '.join(
        '%s by %s of max|y| (tolerance %.0e)' % (
            name, 'inf (it failed or has another shape)' if np.isinf(diff)
            else '%.1e' % diff, tol) for name, diff, tol in found)
    return ('%s computes other outputs than the unshrunk graph in '
            'TensorFlow %s: %s, on random inputs %s. That is a bug of the '
            'shrink or of this TensorFlow\'s kernels (docs/deployment.md '
            'lists the known ones): please report it with the graph. To '
            'write it anyway, skip the check: %s' % (
                self.what, self.comparison.version, outputs,
                ', '.join('%s %s' % (k, v[0]) for k, v in sorted(
                    self.comparison.inputs.items())) or '(none)',
                self.skip))

  def with_skip(self, skip):
    """The same error, naming another way to skip the check (a flag)."""
    return OutputsDiffer(self.comparison, self.what, skip)


class BadInputShapes(ValueError):
  """`input_shapes` does not fit the graph; `named(argument)` is the same
  error naming the argument (or flag) another way."""

  def __init__(self, template, argument='input_shapes'):
    self.template, self.argument = template, argument
    super(BadInputShapes, self).__init__(template % {'argument': argument})

  def named(self, argument):
    return BadInputShapes(self.template, argument)


def tolerance(dtype):
  """The largest difference allowed for an output of `dtype` (module
  docstring): 1e-4 of max|y| for float32 and float64, 1e-2 for float16 and
  bfloat16, 0 (no entry differs) for others."""
  dtype = tf.as_dtype(dtype)
  if dtype in (tf.float16, tf.bfloat16):
    return 1e-2
  if dtype.is_floating:
    return 1e-4
  return 0.0


def parse_input_shapes(text):
  """'x:1,224,224,3;mask:1,10' -> {'x': [1, 224, 224, 3], 'mask': [1, 10]}
  (the `--shrink_input_shapes` flag). Raises ValueError naming a bad
  entry."""
  shapes = {}
  for item in filter(None, (t.strip() for t in (text or '').split(';'))):
    name, _, dims = item.rpartition(':')
    try:
      shape = [int(d) for d in dims.split(',')]
    except ValueError:
      shape = None
    if not name or not shape or any(d < 1 for d in shape):
      raise ValueError('input shape %r must look like name:1,224,224,3 '
                       '(several separated by ;)' % item)
    shapes[name] = shape
  return shapes


def _check_shapes(input_shapes, placeholders, argument):
  if input_shapes is None:
    return {}
  if not isinstance(input_shapes, dict):
    raise TypeError('%s must be a dict {input name: shape}, got %r' % (
        argument, input_shapes))
  shapes = {}
  for name, shape in input_shapes.items():
    given = name
    name = name[:-2] if name.endswith(':0') else name
    if name not in placeholders:
      raise BadInputShapes(
          '%%(argument)s names %r, which is not a Placeholder of the graph '
          '(they are %s)' % (given, ', '.join(sorted(placeholders)) or
                             'none'), argument)
    try:
      shape = [int(d) for d in shape]
    except (TypeError, ValueError):
      shape = None
    known = placeholders[name][1]
    if shape is None or any(d < 1 for d in shape) or (
        known is not None and (len(known) != len(shape) or any(
            k is not None and k != d for k, d in zip(known, shape)))):
      raise BadInputShapes(
          '%%(argument)s: the shape of %r must be positive ints that fit '
          'the placeholder\'s %s, got %r' % (given, known,
                                             input_shapes[given]), argument)
    shapes[name] = shape
  return shapes


def _placeholders(graph_def):
  """{name: (dtype, static shape as a list or None)}."""
  found = {}
  for node in graph_def.node:
    if node.op == 'Placeholder':
      shape = tf.TensorShape(node.attr['shape'].shape) if 'shape' in \
          node.attr else tf.TensorShape(None)
      found[node.name] = (tf.as_dtype(node.attr['dtype'].type),
                          shape.as_list() if shape.ndims is not None
                          else None)
  return found


def _shapes(placeholders, given):
  """({name: [shape per run]}, note): two runs; None dims of the batch are
  2 then 1, others must be given."""
  runs = {}
  for name, (_, shape) in sorted(placeholders.items()):
    if name in given:
      runs[name] = [given[name], given[name]]
      continue
    if shape is None or any(d is None for d in shape[1:]):
      example = [2, 224, 224, 3] if shape is None else [
          2 if d is None else d for d in shape]
      return None, ('input %s has %s: give its shape (input_shapes={%r: %s}, '
                    'strip_pruning_vars --shrink_input_shapes=%s:%s)' % (
                        name, 'no known rank' if shape is None else
                        'unknown dimensions %s' % shape, name, example,
                        name, ','.join(str(d) for d in example)))
    first = shape[:1] if not shape or shape[0] is not None else [2]
    second = shape[:1] if not shape or shape[0] is not None else [1]
    runs[name] = [first + shape[1:], second + shape[1:]]
  return runs, None


def random_values(dtype, shape, rs):
  """Random values of `dtype` (a `tf.DType`) and `shape` for an input (the
  module docstring's rule), drawn from `RandomState` `rs`; None for a type
  the check has no values for."""
  if dtype.is_floating:
    return rs.randn(*shape).astype(dtype.as_numpy_dtype)
  if dtype == tf.uint8:
    return rs.randint(0, 256, shape).astype(np.uint8)
  if dtype.is_integer:
    return rs.randint(0, 2, shape).astype(dtype.as_numpy_dtype)
  if dtype == tf.bool:
    return rs.rand(*shape) < 0.5
  return None


def difference(reference, candidate):
  """max |candidate - reference| / max(|reference|, |candidate|) of two
  arrays (entries not finite equal where both are the same); for outputs
  that are not floats, the fraction of entries that differ; inf where the
  shapes differ. The rule to compare with `tolerance(dtype)`."""
  reference, candidate = np.asarray(reference), np.asarray(candidate)
  if reference.shape != candidate.shape:
    return np.inf
  if not np.issubdtype(reference.dtype, np.floating):
    return float(np.mean(reference != candidate)) if reference.size else 0.0
  a = reference.astype(np.float64)
  b = candidate.astype(np.float64)
  same = (a == b) | (np.isnan(a) & np.isnan(b))
  finite = np.isfinite(a) & np.isfinite(b)
  if (~same & ~finite).any():
    return np.inf
  if not finite.any():
    return 0.0
  scale = max(np.abs(a[finite]).max(), np.abs(b[finite]).max())
  if scale == 0:
    return 0.0
  return float(np.abs(a[finite] - b[finite]).max() / scale)


def _first_line(error):
  text = getattr(error, 'message', None) or str(error)
  lines = [l.strip() for l in text.splitlines() if l.strip()]
  # TF 2.x puts 'Graph execution error:' and the Python frames first.
  useful = [l for l in lines if not l.startswith(('Graph execution error',
                                                   'Detected at node',
                                                   'File ', 'Node:', '[['))]
  return '%s: %s' % (type(error).__name__, (useful or lines or [''])[-1])


def compare_graph_defs(reference, candidate, outputs, input_shapes=None,
                       seed=0, argument='input_shapes'):
  """Runs both GraphDefs on the same random inputs; returns a `Comparison`.

  Args:
    reference: the `tf.GraphDef` the outputs should equal (the unshrunk
      graph); its placeholders are the inputs.
    candidate: the `tf.GraphDef` to check (the shrunk graph), with the same
      input and output names.
    outputs: list of output node names (output 0 of each is compared).
    input_shapes: None, or {placeholder name: shape} for inputs whose
      shape has unknown dimensions besides the batch size.
    seed: of the random inputs.
    argument: how errors name `input_shapes` (a caller's flag).

  Raises:
    TypeError: `input_shapes` is not a dict.
    BadInputShapes (a ValueError): it names no placeholder of the graph, or
      a shape that does not fit it.
  """
  placeholders = _placeholders(reference)
  given = _check_shapes(input_shapes, placeholders, argument)
  version = tf.__version__
  runs, note = _shapes(placeholders, given)
  for name, (dtype, _) in sorted(placeholders.items()):
    if note is None and random_values(
        dtype, [1], np.random.RandomState(0)) is None:
      note = 'input %s is of type %s, for which the check has no random ' \
          'values' % (name, dtype.name)
  if note is not None:
    return Comparison(None, {}, {}, {}, note, version, None)
  feeds = []
  for run in range(2):
    rs = np.random.RandomState(seed + run)
    feeds.append(dict(
        (name, random_values(placeholders[name][0], shapes[run], rs))
        for name, shapes in sorted(runs.items())))
  try:
    want, dtypes = _run(reference, outputs, feeds, optimize=False)
  except tf.errors.OpError as e:
    return Comparison(None, {}, {}, runs, 'the unshrunk graph does not run '
                      'in TensorFlow %s on random inputs: %s' % (
                          version, _first_line(e)), version, None)
  tolerances = dict((name, tolerance(t)) for name, t in zip(outputs, dtypes))
  try:
    got, _ = _run(candidate, outputs, feeds, optimize=True)
  except tf.errors.OpError as e:
    return Comparison(np.inf, dict((name, np.inf) for name in outputs),
                      tolerances, runs, None, version, _first_line(e))
  diffs = dict((name, max(difference(w[i], g[i]) for w, g in zip(want, got)))
               for i, name in enumerate(outputs))
  return Comparison(max(diffs.values()) if diffs else 0.0, diffs,
                    tolerances, runs, None, version, None)


def _run(graph_def, outputs, feeds, optimize):
  """[the outputs for each feed], [their dtypes]: `graph_def` run in a
  session of its own, with TensorFlow's graph optimizations (its fused
  kernels) or without."""
  # A copy: TF 2.x's import_graph_def writes the attributes at their default
  # into the GraphDef it is given (TF 1.15 then refuses it).
  copy = tf.GraphDef()
  copy.CopyFrom(graph_def)
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(copy, name='')
    fetch = [graph.get_tensor_by_name(name + ':0') for name in outputs]
  config = tf.ConfigProto()
  config.graph_options.rewrite_options.disable_meta_optimizer = not optimize
  with tf.Session(graph=graph, config=config) as sess:
    results = [sess.run(fetch, dict((name + ':0', value) for name, value in
                                    feed.items())) for feed in feeds]
  return results, [t.dtype for t in fetch]
