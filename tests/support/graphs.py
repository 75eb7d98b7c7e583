"""Building and running TF1 graphs and GraphDefs, here and on the other stack.

    >>> import numpy as np
    >>> import tensorflow.compat.v1 as tf
    >>> from tests.support.graphs import const, run_graph_def
    >>> with tf.Graph().as_default() as graph:
    ...   x = tf.placeholder(tf.float32, [2], name='x')
    ...   y = tf.identity(x * const([2.0, 3.0]), name='y')
    >>> run_graph_def(graph.as_graph_def(), np.ones(2, np.float32)).tolist()
    [2.0, 3.0]

The one way the tests run a GraphDef: `run_graph_def` (or, for several runs
in one session, `graph_def_session`) imports a copy of it, unprefixed, into
a new graph; `run_in_process` runs GraphDefs under another interpreter (the
other TF stack) in a process of its own. A feed is {tensor name: value}, or
one value for `x:0`.
"""

import contextlib
import json
import os
import subprocess

import numpy as np
import tensorflow.compat.v1 as tf


@contextlib.contextmanager
def control_flow(v2):
  """Control flow v2 (TF 2.x graphs) or v1 (TF 1.x, `disable_v2_behavior()`)
  inside the block; the setting restored after."""
  was = tf.control_flow_v2_enabled()
  switch = {True: tf.enable_control_flow_v2,
            False: tf.disable_control_flow_v2}
  switch[v2]()
  try:
    yield
  finally:
    switch[was]()


def const(value):
  """A float32 constant of `value`."""
  return tf.constant(np.asarray(value, np.float32))


def consts(graph_def):
  """{name: ndarray} of the Const nodes of `graph_def`."""
  return {n.name: tf.make_ndarray(n.attr['value'].tensor)
          for n in graph_def.node if n.op == 'Const'}


def read_graph_def(path):
  """The GraphDef in the binary file at `path`."""
  graph_def = tf.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  return graph_def


def read_graph(path):
  """A new tf.Graph with the GraphDef at `path` imported, unprefixed."""
  graph = tf.Graph()
  with graph.as_default():
    tf.import_graph_def(read_graph_def(path), name='')
  return graph


def _feed_dict(feed):
  if feed is None:
    return {}
  return dict(feed) if isinstance(feed, dict) else {'x:0': feed}


@contextlib.contextmanager
def graph_def_session(graph_def):
  """A session on a new graph holding a copy of `graph_def`, unprefixed.

  A copy: `tf.import_graph_def` adds default attributes to what it imports.
  """
  copy = tf.GraphDef()
  copy.CopyFrom(graph_def)
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(copy, name='')
    with tf.Session(graph=graph) as sess:
      yield sess


def run_graph_def(graph_def, feed=None, output='y:0'):
  """`output` (a tensor name, or a list of them) of `graph_def` for `feed`."""
  with graph_def_session(graph_def) as sess:
    return sess.run(output, _feed_dict(feed))


_RUN = '''
import json, sys, numpy as np, tensorflow.compat.v1 as tf
tf.disable_eager_execution()
spec = json.loads(sys.argv[1])
values = np.load(spec['feed'])
feed = {name: values['arr_%d' % i] for i, name in enumerate(spec['names'])}
outputs = []
for path in spec['graphs']:
  graph_def = tf.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  with tf.Graph().as_default():
    tf.import_graph_def(graph_def, name='')
    with tf.Session() as sess:
      outputs.append(sess.run(spec['output'], feed))
np.savez(spec['out'], *outputs)
'''


def run_in_process(python, graph_defs, feed, directory, output='y:0',
                   stderr=False):
  """Runs `output` of each of `graph_defs` under interpreter `python` (the
  other TF stack, or this one in a fresh process), through files in
  `directory`.

  Returns:
    The list of outputs, one per GraphDef; with `stderr`, also what the
    process logged (errors included: TF logs some errors, such as a
    grappler pass that failed, once per process only).

  Raises:
    AssertionError: the process failed (with what it logged).
  """
  feed = _feed_dict(feed)
  spec = dict(names=list(feed), output=output, graphs=[],
              feed=os.path.join(directory, 'feed.npz'),
              out=os.path.join(directory, 'outputs.npz'))
  np.savez(spec['feed'], *feed.values())
  for i, graph_def in enumerate(graph_defs):
    spec['graphs'].append(os.path.join(directory, 'graph_%d.pb' % i))
    with open(spec['graphs'][-1], 'wb') as f:
      f.write(graph_def.SerializeToString())
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='1' if stderr else '2')
  run = subprocess.run([python, '-c', _RUN, json.dumps(spec)], env=env,
                       stderr=subprocess.PIPE, universal_newlines=True)
  if run.returncode:
    raise AssertionError('%s failed:\n%s' % (python, run.stderr))
  with np.load(spec['out']) as saved:
    outputs = [saved['arr_%d' % i] for i in range(len(graph_defs))]
  return (outputs, run.stderr) if stderr else outputs
