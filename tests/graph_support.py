"""Helpers the frozen-graph tests share: constants, running a GraphDef here
and in the other TF stack's interpreter."""

import os
import subprocess

import numpy as np
import tensorflow.compat.v1 as tf


def const(value):
  """A float32 constant of `value`."""
  return tf.constant(np.asarray(value, np.float32))


def run(graph_def, feed, output='y:0'):
  """Runs `graph_def` in a new graph: `output` for `x:0` = `feed`."""
  with tf.Graph().as_default():
    tf.import_graph_def(graph_def, name='')
    with tf.Session() as sess:
      return sess.run(output, {'x:0': feed})


def consts(graph_def):
  """{name: ndarray} of the Const nodes of `graph_def`."""
  return {n.name: tf.make_ndarray(n.attr['value'].tensor)
          for n in graph_def.node if n.op == 'Const'}


_RUN_Y = (
    'import sys, numpy as np, tensorflow.compat.v1 as tf\n'
    'tf.disable_eager_execution()\n'
    'g = tf.GraphDef()\n'
    'g.ParseFromString(open(sys.argv[1], "rb").read())\n'
    'tf.import_graph_def(g, name="")\n'
    'with tf.Session() as s:\n'
    '  np.save(sys.argv[3], s.run("y:0", {"x:0": np.load(sys.argv[2])}))\n')


def run_in(python, graph_def, feed, directory):
  """Runs `y:0` of `graph_def` for `x:0` = `feed` under interpreter `python`
  (the other TF stack), through files in `directory`; returns the output."""
  path = os.path.join(directory, 'graph.pb')
  with open(path, 'wb') as f:
    f.write(graph_def.SerializeToString())
  x, y = os.path.join(directory, 'x.npy'), os.path.join(directory, 'y.npy')
  np.save(x, feed)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  subprocess.check_call([python, '-c', _RUN_Y, path, x, y], env=env)
  return np.load(y)
