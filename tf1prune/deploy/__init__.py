"""Does every deployment stack run what tf1prune writes, and correctly?

    >>> from tf1prune.deploy import Cell, format_matrix
    >>> print(format_matrix([Cell('cnn', 'TFLite @ TF 1.15', 'wrong', 0.07, '')]))
    | model | TFLite @ TF 1.15 |
    |---|---|
    | cnn | WRONG 7.0e-02 |

`check_deploy` builds the model set of `tf1prune.deploy._models` (or takes one
`.pb`), on TF 2.x and, given a TF 1.15 interpreter, on TF 1.15 too; converts
and runs each with every consumer of each stack (sessions, both TFLite
converters, tf2onnx + onnxruntime, OpenVINO); and compares each output with
the session of the stack that made the graph: `ok` within 1e-4 of max|y|,
`wrong`, `fails` (no conversion or no run). A failure or wrong output that
the never-pruned control shows too is the converter's own `limit`. From the
shell: `bin/check_deploy` (it builds its venv under `.venv/` on first use).
"""

import collections
import json
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np

__all__ = ['Cell', 'check_deploy', 'format_matrix', 'TOLERANCE']

TOLERANCE = 1e-4
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Cell(collections.namedtuple('Cell', ['model', 'consumer', 'status',
                                           'max_diff', 'detail'])):
  """One (model, consumer) result.

  Attributes:
    model: the row, e.g. 'cnn_filter_shrunk (made on TF 2.21)'.
    consumer: the column, e.g. 'tflite @ TF 1.15'.
    status: 'ok', 'wrong', 'fails' or 'limit'.
    max_diff: max |output - reference| / max |reference|, or None.
    detail: the first line of the error, or ''.
  """

  def text(self):
    if self.status == 'ok':
      return 'ok %.1e' % self.max_diff
    if self.status == 'wrong':
      return 'WRONG %.1e' % self.max_diff
    if self.status == 'fails':
      return 'FAILS: %s' % self.detail
    return 'limit (control too): %s' % (self.detail or
                                        'wrong %.1e' % self.max_diff)


_COLUMNS = ('tf_session', 'tflite', 'onnxruntime', 'openvino')


def _column_order(consumer):
  name, _, stack = consumer.partition(' @ ')
  return (_COLUMNS.index(name) if name in _COLUMNS else len(_COLUMNS),
          [-int(p) for p in stack.split()[-1].split('.') if p.isdigit()])


def format_matrix(cells):
  """Cells as a Markdown table, models down, consumers across."""
  models = list(collections.OrderedDict.fromkeys(c.model for c in cells))
  consumers = sorted(set(c.consumer for c in cells), key=_column_order)
  at = {(c.model, c.consumer): c.text().replace('|', '/') for c in cells}
  lines = ['| model | %s |' % ' | '.join(consumers),
           '|---|%s' % ('---|' * len(consumers))]
  for model in models:
    lines.append('| %s | %s |' % (model, ' | '.join(
        at.get((model, c), '') for c in consumers)))
  return '\n'.join(lines)


def _log(message):
  sys.stderr.write('[check_deploy] %s\n' % message)


def _package_home(work_dir):
  """A folder in `work_dir` that holds only a link to this tf1prune.

  The workers import tf1prune from it, whatever their venv has installed:
  the folder this package lies in may be another venv's site-packages.
  """
  home = os.path.join(work_dir, 'package')
  link = os.path.join(home, 'tf1prune')
  if not os.path.isdir(home):
    os.makedirs(home)
  if os.path.lexists(link) and (os.path.realpath(link) !=
                                os.path.realpath(_PACKAGE)):
    os.remove(link)     # left by a run of another tf1prune in this work_dir
  if not os.path.lexists(link):
    os.symlink(_PACKAGE, link)
  return home


def _run_worker(python, home, args, **kwargs):
  """Runs `python -m tf1prune.deploy._worker ARGS` on tf1prune from `home`,
  with the venv's scripts on PATH (TF 1.15's TFLite converter runs its
  `toco_from_protos` from there)."""
  path = os.path.dirname(os.path.abspath(python))
  env = dict(os.environ, PYTHONPATH=home, TF_CPP_MIN_LOG_LEVEL='2',
             PATH=path + os.pathsep + os.environ.get('PATH', ''))
  try:
    return subprocess.run([python, '-m', 'tf1prune.deploy._worker'] + args,
                          env=env, check=True, cwd=home, **kwargs)
  except subprocess.CalledProcessError as e:
    raise _WorkerDied('the deploy worker under %s failed (%s, exit status %d; '
                      'its error is printed above): check that this Python '
                      'has TensorFlow and the consumers installed'
                      % (python, args[0], e.returncode), e.returncode)


class _WorkerDied(ValueError):
  """A worker process ended with an error; `status` says how."""

  def __init__(self, message, returncode):
    super(_WorkerDied, self).__init__(message)
    self.status = 'exit status %d' % returncode
    if returncode < 0:
      try:
        self.status = 'killed by %s' % signal.Signals(-returncode).name
      except ValueError:
        self.status = 'killed by signal %d' % -returncode


def _relative_diff(got, want):
  """max |got - want| / max |want|; inf for another shape, or a NaN or inf
  in one of them only (a NaN would otherwise compare as no difference in
  the max over the outputs)."""
  if got.shape != want.shape:
    return float('inf')
  got, want = got.astype(np.float64), want.astype(np.float64)
  same = (got == want) | (np.isnan(got) & np.isnan(want))
  with np.errstate(invalid='ignore'):
    diff = np.where(same, 0.0, np.abs(got - want))
  diff = np.where(np.isnan(diff), np.inf, diff)
  finite = np.abs(want[np.isfinite(want)])
  scale = max(float(np.max(finite)) if finite.size else 0.0, 1e-12)
  return float(np.max(diff)) / scale if diff.size else 0.0


def _outcome(result, reference):
  """(status, diff, detail) of one run against its reference outputs."""
  if 'error' in result:
    return 'fails', None, result['error']
  got = np.load(result['outputs'])
  if len(got.files) != len(reference):
    return 'fails', None, 'gave %d outputs for %d' % (len(got.files),
                                                      len(reference))
  diff = max(_relative_diff(got['arr_%d' % i], want)
             for i, want in enumerate(reference))
  return ('ok' if diff <= TOLERANCE else 'wrong'), diff, ''


def _cells(specs, results):
  by_key = {(r['job'], r['stack'], r['consumer']): r for r in results}
  cells = []
  for spec in specs:
    row = '%s (made on %s)' % (spec['name'], spec['made_on'])
    outcomes = {}
    ref_error = 'no result'
    for variant in ('pb', 'control'):
      job = '%s/%s/%s' % (spec['made_on'], spec['name'], variant)
      ref = by_key.get((job, spec['made_on'], 'tf_session'))
      if ref is None or 'error' in ref:
        outcomes[variant] = None
        if variant == 'pb' and ref is not None:
          ref_error = ref['error']
        continue
      ref_npz = np.load(ref['outputs'])
      reference = [ref_npz['arr_%d' % i] for i in range(len(ref_npz.files))]
      for (j, stack, consumer), result in sorted(by_key.items()):
        if j == job:
          outcomes.setdefault(variant, {})[(stack, consumer)] = _outcome(
              result, reference)
    if outcomes.get('pb') is None:
      cells.append(Cell(row, 'tf_session @ ' + spec['made_on'], 'fails', None,
                        'the session that made it cannot run it: ' +
                        ref_error))
      continue
    control = outcomes.get('control') or {}
    for (stack, consumer), (status, diff, detail) in sorted(
        outcomes['pb'].items()):
      twin = control.get((stack, consumer))
      if status != 'ok' and twin is not None and twin[0] != 'ok':
        status = 'limit'
      cells.append(Cell(row, '%s @ %s' % (consumer, stack), status, diff,
                        detail))
  return cells


def _feeds(spec, work_dir):
  rng = np.random.RandomState(0)
  path = os.path.join(work_dir, '%s_%s_feeds.npz' % (
      spec['made_on'].replace(' ', ''), spec['name']))
  np.savez(path, *[rng.uniform(-1, 1, shape).astype(np.float32)
                   for _, shape in spec['inputs']])
  return path


def check_deploy(pythons, work_dir=None, models=None, pb=None, inputs=None,
                 outputs=None):
  """Builds (or takes) frozen graphs, runs every consumer; returns the cells.

  Args:
    pythons: list of interpreters, one per stack (e.g. the TF 2.x venv's and
      the TF 1.15 venv's); each builds the model set and runs its consumers.
    work_dir: where graphs and outputs go, kept; default a new temporary
      folder, removed when the check is done.
    models: names from `tf1prune.deploy._models.MODELS` (default all).
    pb: instead of the model set, one frozen graph to check (no control).
    inputs: with `pb`, `[[node name, shape]]`; outputs: its output nodes.

  Returns:
    A list of `Cell`.
  """
  if work_dir is None:
    with tempfile.TemporaryDirectory(prefix='check_deploy_') as scratch:
      return check_deploy(pythons, scratch, models, pb, inputs, outputs)
  # The workers run in work_dir/package: give them paths that do not depend
  # on the folder they run in (an interpreter's too: subprocess looks for a
  # relative one from there; a bare name is looked up on PATH).
  work_dir = os.path.abspath(work_dir)
  pythons = [os.path.abspath(p) if os.path.dirname(p) else p
             for p in pythons]
  home = _package_home(work_dir)
  specs = []
  if pb is not None:
    if not inputs or not outputs:
      raise ValueError('pb=%r needs inputs=[[name, shape]] and outputs=[names]'
                       % pb)
    made_on = _run_worker(pythons[0], home, ['stack'],
                          stdout=subprocess.PIPE).stdout.decode().strip()
    specs.append(dict(name=os.path.basename(pb), pb=os.path.abspath(pb),
                      control=None, inputs=inputs, outputs=outputs,
                      made_on=made_on))
  else:
    for i, python in enumerate(pythons):
      out = os.path.join(work_dir, 'stack%d' % i)
      if not os.path.isdir(out):     # a work_dir may be used again
        os.makedirs(out)
      _log('building the models with %s' % python)
      _run_worker(python, home, ['build', out,
                                 os.path.join(out, 'specs.json')] +
                  list(models or []))
      with open(os.path.join(out, 'specs.json')) as f:
        specs.extend(json.load(f))
  jobs = []
  for spec in specs:
    feeds = _feeds(spec, work_dir)
    for variant in ('pb', 'control'):
      if spec.get(variant):
        jobs.append(dict(id='%s/%s/%s' % (spec['made_on'], spec['name'],
                                          variant),
                         pb=spec[variant], inputs=spec['inputs'],
                         outputs=spec['outputs'], feeds=feeds))
  jobs_path = os.path.join(work_dir, 'jobs.json')
  with open(jobs_path, 'w') as f:
    json.dump(jobs, f, indent=1)
  results = []
  for i, python in enumerate(pythons):
    path = os.path.join(work_dir, 'results%d.jsonl' % i)
    if os.path.exists(path):
      os.remove(path)
    _log('running the consumers of %s' % python)
    results.extend(_run_consumers(python, home, jobs_path, path))
  return _cells(specs, results)


def _run_consumers(python, home, jobs_path, path):
  """Runs the `run` worker until it is done; returns its results.

  A run that kills the worker (a converter or interpreter that aborts) is
  that cell's failure: it is recorded and the worker starts again with the
  runs left.
  """
  from tf1prune.deploy import _worker  # pylint: disable=g-import-not-at-top
  while True:
    try:
      _run_worker(python, home, ['run', jobs_path, path])
      break
    except _WorkerDied as e:
      records = _worker.read_results(path)
      finished = set((r['consumer'], r['job']) for r in records
                     if 'started' not in r)
      died = [r for r in records if 'started' in r and
              (r['consumer'], r['job']) not in finished]
      if not died:
        raise
      crash = dict(died[-1])
      del crash['started']
      crash['error'] = 'it ended the process (%s)' % e.status
      _log('%s on %s ended the process (%s); running the rest' % (
          crash['consumer'], crash['stack'], e.status))
      with open(path, 'a') as f:
        f.write(json.dumps(crash) + '\n')
  return [r for r in _worker.read_results(path) if 'started' not in r]
