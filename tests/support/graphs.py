"""Helpers the graph tests share: constants, running a GraphDef here and in
the other TF stack's interpreter, the control flow version."""

import contextlib
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


def run_in(python, graph_def, feed, directory, stderr=False):
  """Runs `y:0` of `graph_def` for `x:0` = `feed` under interpreter `python`
  (the other TF stack), through files in `directory`; returns the output.

  stderr: also return what the process logged (errors included): TF logs
  some errors, such as a grappler pass that failed, once per process only.
  """
  path = os.path.join(directory, 'graph.pb')
  with open(path, 'wb') as f:
    f.write(graph_def.SerializeToString())
  x, y = os.path.join(directory, 'x.npy'), os.path.join(directory, 'y.npy')
  np.save(x, feed)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='1' if stderr else '2')
  run = subprocess.run([python, '-c', _RUN_Y, path, x, y], env=env,
                       stderr=subprocess.PIPE, universal_newlines=True)
  if run.returncode:
    raise AssertionError('%s failed:\n%s' % (python, run.stderr))
  return (np.load(y), run.stderr) if stderr else np.load(y)


def read_graph(path):
  """The tf.Graph of the frozen GraphDef at `path`."""
  graph_def = tf.GraphDef()
  with tf.io.gfile.GFile(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  graph = tf.Graph()
  with graph.as_default():
    tf.import_graph_def(graph_def, name='')
  return graph


_JOIN = ('Add', 'AddV2', 'AddN', 'Sub', 'Mul', 'Maximum', 'Minimum')


def live_channels(tensor, seeds, memo):
  """bool per channel (last axis) of `tensor`: something a mask kept reaches it.

  `seeds` is {layer op name: bool per output channel}. A depthwise conv
  repeats its input's channels, element-wise joins keep what any full-width,
  non-constant input keeps, concats join, a Reshape that flattens repeats its
  input's channels, any other op passes its first input when it is as wide,
  and everything else counts as live. `memo` is {tensor name: result}.
  """
  if tensor.name in memo:
    return memo[tensor.name]
  op = tensor.op
  width = tensor.shape.as_list()[-1]
  first = op.inputs[0] if op.inputs else None
  if op.name in seeds:
    live = seeds[op.name]
  elif op.type == 'DepthwiseConv2dNative':
    live = np.repeat(live_channels(first, seeds, memo),
                     op.inputs[1].shape.as_list()[-1])
  elif op.type in _JOIN:
    parts = [live_channels(t, seeds, memo) for t in op.inputs
             if t.shape.ndims and t.shape.as_list()[-1] == width and
             t.op.type != 'Const']
    live = np.logical_or.reduce(parts) if parts else np.ones(width, bool)
  elif op.type == 'ConcatV2':
    live = np.concatenate([live_channels(t, seeds, memo)
                           for t in op.inputs[:-1]])
  elif op.type == 'Reshape' and first.shape.ndims and \
      width % first.shape.as_list()[-1] == 0:
    live = np.tile(live_channels(first, seeds, memo),
                   width // first.shape.as_list()[-1])
  elif first is not None and first.shape.ndims and op.type != 'Const' and \
      first.shape.as_list()[-1] == width:
    live = live_channels(first, seeds, memo)
  else:
    live = np.ones(width, bool)
  memo[tensor.name] = live
  return live


def ideal_flops(graph, report, seeds):
  """FLOPs of the shrink report's layers without the channels no mask kept.

  Each layer costs its FLOPs times the live fraction of its input channels,
  and of its output channels unless it is a depthwise conv (whose outputs
  are its inputs' channels). `seeds` as in `live_channels`.
  """
  memo, total = {}, 0.0
  for layer in report.layers:
    op = graph.get_operation_by_name(layer.name)
    fraction = live_channels(op.inputs[0], seeds, memo).mean()
    if op.type != 'DepthwiseConv2dNative':
      fraction *= live_channels(op.outputs[0], seeds, memo).mean()
    total += layer.flops_before * fraction
  return total
