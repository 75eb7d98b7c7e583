"""One stack's side of the deployment check, run as a separate process.

    >>> from tf1prune.deploy._worker import stack_name
    >>> stack_name().startswith('TF ')
    True

    python -m tf1prune.deploy._worker build OUT_DIR SPECS_JSON [MODEL ...]
    python -m tf1prune.deploy._worker run JOBS_JSON RESULTS_JSON
    python -m tf1prune.deploy._worker stack

`build` makes the models of `tf1prune.deploy._models` in this stack and writes
their specs; `run` runs every consumer this stack has on every job (`pb`,
`inputs`, `outputs`, `feeds` .npz) and appends, per job and consumer, the path
of an .npz of outputs or the error's text to RESULTS_JSON (a JSON object a
line), skipping those it holds already; `stack` prints `stack_name()`. A
process per stack keeps the two TensorFlow versions apart and a crashing
converter away from the caller.
"""

import json
import os
import sys
import traceback

import numpy as np


def stack_name():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return 'TF %s' % '.'.join(tf.__version__.split('.')[:2])


def _build(out_dir, specs_path, names):
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from tf1prune.deploy import _models  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  specs = []
  for name in names or sorted(_models.MODELS):
    spec = _models.build(name, out_dir)
    spec.update(name=name, made_on=stack_name())
    specs.append(spec)
    sys.stderr.write('[check_deploy] built %s on %s\n' % (name, stack_name()))
  with open(specs_path, 'w') as f:
    json.dump(specs, f, indent=1)


_CUSTOM = 'operators for which you will need custom implementations:'


def _first_line(error):
  """The error in one line; TFLite's list of unsupported ops if it has one."""
  text = str(error)
  if _CUSTOM in text:
    ops = text.split(_CUSTOM, 1)[1].strip().splitlines()[0]
    return '%s: ops TFLite lacks: %s' % (type(error).__name__, ops)
  lines = [l.strip() for l in text.splitlines()
           if l.strip() and not l.startswith('See console')]
  return '%s: %s' % (type(error).__name__, lines[0][:200] if lines else '')


def read_results(results_path):
  """The records of `results_path` (one JSON object a line), [] if none."""
  if not os.path.exists(results_path):
    return []
  with open(results_path) as f:
    return [json.loads(line) for line in f if line.strip()]


def _run(jobs_path, results_path):
  """Runs every consumer on every job, appending to `results_path`.

  Before each run a `started` record is written, after it the result: if a
  converter kills the process, the caller sees which run did, records it,
  and starts `run` again, which skips the runs that have a result.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from tf1prune.deploy import _consumers  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.ERROR)
  with open(jobs_path) as f:
    jobs = json.load(f)
  stack = stack_name()
  for consumer, why in sorted(_consumers.missing().items()):
    sys.stderr.write('[check_deploy] %s on %s is left out of the matrix: %s '
                     '(pip install "tf1prune[deploy]")\n' % (consumer, stack,
                                                              why))
  done = set((r['consumer'], r['job']) for r in read_results(results_path)
             if 'started' not in r)
  with open(results_path, 'a') as out:
    for consumer, run in sorted(_consumers.available().items()):
      for job in jobs:
        if (consumer, job['id']) in done:
          continue
        out.write(json.dumps(dict(job=job['id'], consumer=consumer,
                                  stack=stack, started=True)) + '\n')
        out.flush()
        feeds = np.load(job['feeds'])
        feeds = [feeds['arr_%d' % i] for i in range(len(job['inputs']))]
        result = dict(job=job['id'], consumer=consumer, stack=stack)
        try:
          outputs = run(job['pb'], job['inputs'], job['outputs'], feeds)
          path = os.path.join(os.path.dirname(job['feeds']),
                              '%s.%s.%s.npz' % (
                                  job['id'].replace('/', '_').replace(' ', ''),
                                  consumer, stack.replace(' ', '')))
          np.savez(path, *outputs)
          result['outputs'] = path
        except Exception as e:  # pylint: disable=broad-except
          result['error'] = _first_line(e)
          result['traceback'] = traceback.format_exc()[-2000:]
        sys.stderr.write('[check_deploy] %s on %s: %s %s\n' % (
            consumer, stack, os.path.basename(job['pb']),
            'error' if 'error' in result else 'ran'))
        out.write(json.dumps(result) + '\n')
        out.flush()


def main(argv):
  if len(argv) >= 3 and argv[0] == 'build':
    _build(argv[1], argv[2], argv[3:])
  elif len(argv) == 3 and argv[0] == 'run':
    _run(argv[1], argv[2])
  elif argv == ['stack']:
    print(stack_name())
  else:
    sys.stderr.write(__doc__)
    return 2
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main(sys.argv[1:]))
