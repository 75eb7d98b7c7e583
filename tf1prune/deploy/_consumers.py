"""The deployment consumers: each converts a frozen `.pb` and runs it.

    >>> from tf1prune.deploy._consumers import available
    >>> 'tf_session' in available()
    True

A consumer is `run(pb_path, inputs, outputs, feeds) -> [numpy arrays]`:
`inputs` is `[[node name, shape]]`, `outputs` node names, `feeds` one array
per input. It raises on a conversion or run failure. Which consumers exist
depends on the stack: TF 1.15 has its session and its TFLite converter (TOCO);
TF 2.x its session, its MLIR TFLite converter, and, when installed (`pip
install tf1prune[deploy]`), tf2onnx + onnxruntime and OpenVINO.
"""

import importlib

import numpy as np
import tensorflow.compat.v1 as tf


def _graph_def(pb_path):
  graph_def = tf.GraphDef()
  with open(pb_path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  return graph_def


def tf_session(pb_path, inputs, outputs, feeds):
  """TensorFlow's own session, on the graph as written."""
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(_graph_def(pb_path), name='')
    with tf.Session(graph=graph) as sess:
      return sess.run([o + ':0' for o in outputs],
                      {name + ':0': value for (name, _), value in
                       zip(inputs, feeds)})


def tflite(pb_path, inputs, outputs, feeds):
  """The TFLite converter of the running TensorFlow, then its interpreter."""
  converter = tf.lite.TFLiteConverter.from_frozen_graph(
      pb_path, [name for name, _ in inputs], list(outputs),
      {name: shape for name, shape in inputs})
  return run_tflite(converter.convert(), feeds)


def run_tflite(model, feeds):
  """Runs a TFLite flatbuffer on `feeds`; returns its outputs in order."""
  interpreter = tf.lite.Interpreter(model_content=model)
  interpreter.allocate_tensors()
  for detail, value in zip(interpreter.get_input_details(), feeds):
    interpreter.set_tensor(detail['index'], value)
  interpreter.invoke()
  return [interpreter.get_tensor(d['index'])
          for d in interpreter.get_output_details()]


def onnxruntime(pb_path, inputs, outputs, feeds):
  """tf2onnx's converter (opset 13), run by onnxruntime on the CPU."""
  tf2onnx = importlib.import_module('tf2onnx')
  ort = importlib.import_module('onnxruntime')
  model, _ = tf2onnx.convert.from_graph_def(
      _graph_def(pb_path), input_names=[n + ':0' for n, _ in inputs],
      output_names=[o + ':0' for o in outputs], opset=13)
  session = ort.InferenceSession(model.SerializeToString(),
                                 providers=['CPUExecutionProvider'])
  return session.run([o + ':0' for o in outputs],
                     {name + ':0': value for (name, _), value in
                      zip(inputs, feeds)})


def openvino(pb_path, inputs, outputs, feeds):
  """OpenVINO's TensorFlow front end, compiled for the CPU in float32."""
  ov = importlib.import_module('openvino')
  model = ov.convert_model(pb_path, input=[shape for _, shape in inputs],
                           output=[o + ':0' for o in outputs])
  compiled = ov.Core().compile_model(model, 'CPU',
                                     {'INFERENCE_PRECISION_HINT': 'f32'})
  result = compiled(list(feeds))
  return [np.asarray(result[compiled.output(i)]) for i in range(len(outputs))]


_ALL = (('tf_session', tf_session, None), ('tflite', tflite, None),
        ('onnxruntime', onnxruntime, 'tf2onnx'),
        ('openvino', openvino, 'openvino'))


def available():
  """{name: run function} of the consumers this stack can run."""
  found = {}
  for name, fn, module in _ALL:
    if module is not None:
      try:
        importlib.import_module(module)
      except ImportError:
        continue
    if module is not None and tf.__version__.startswith('1.'):
      continue
    found[name] = fn
  return found


def missing():
  """{name: why} of the TF 2.x consumers whose converter is not installed.

  Empty on TF 1.15, which has none of them.
  """
  if tf.__version__.startswith('1.'):
    return {}
  gone = {}
  for name, _, module in _ALL:
    if module is not None:
      try:
        importlib.import_module(module)
      except ImportError as e:
        gone[name] = str(e)
  return gone
