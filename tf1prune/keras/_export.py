"""Export: masks and locks folded into plain weights, loadable without tf1prune.

    >>> import numpy as np, keras, tf1prune.keras as tk
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    >>> _ = tk.lock(model, model.layers[0], 'kernel', np.s_[0, 0], value=0.0)
    >>> plain = tk.strip_model(model)
    >>> plain.layers[0].kernel_constraint is None, float(plain.layers[0].kernel[0, 0])
    (True, 0.0)

`strip_model(model)` clones a Sequential or functional model with every pin
removed from its layers' configs (a constraint the weight had before stays)
and the pinned values (`where(locked, values, where(mask, w, 0))`) as its
weights: a plain Keras model that saves and loads without tf1prune.
`export_saved_model(model, path)` writes that model as a TensorFlow
SavedModel (Keras 3: `model.export`, serving endpoint `serve`; Keras 2 and
tf_keras: `tf.saved_model.save`, signature `serving_default`); `export_frozen_pb(
model, path)` a frozen GraphDef (variables as constants, one `Placeholder`
input, the output's node name in the report) that loads with
`tf.compat.v1.import_graph_def`, also under TF 1.15. Both return a
`StripReport`, the report of the `strip_pruning_vars` tool: the sparsity of
each folded weight counted on the values written.
"""

import gzip
import os

import numpy as np
import tensorflow as tf

from tf1prune.export import resources
from tf1prune.export import LayerStats, StripReport
from tf1prune.keras import _pin, _version
from tf1prune.keras._strip import plain_copy
from tf1prune.keras.shrink.model import input_names, shrink_plain

__all__ = ['export_frozen_pb', 'export_saved_model', 'strip_model',
           'strip_report']


def strip_model(model, shrink=False):
  """Returns a plain copy of `model` with masks and locks folded in.

  Args:
    model: a Sequential or functional Keras model.
    shrink: also remove the channels whose filters are all zero
      (`shrink_model`, which checks the smaller model against this copy;
      its report is dropped).

  Raises:
    ValueError: `model` is a subclassed model (`clone_model` needs a
      Sequential or functional one), or Keras 3's safe mode keeps
      `clone_model` from copying a `Lambda` layer's Python function (the
      fix: `keras.config.enable_unsafe_deserialization()`).
  """
  plain = plain_copy(model)
  if shrink:
    return shrink_plain(plain, names=input_names(model))[0]
  return plain


def strip_report(model, output_path='', output_nodes=(), file_bytes=0,
                 file_bytes_gzip=0, dense_file_bytes=0,
                 dense_file_bytes_gzip=0, num_nodes=None):
  """A `StripReport` of `model`'s pinned weights (their folded values)."""
  layers = [LayerStats.from_array(layer.name, '%s/%s' % (layer.name, name),
                                  '%s/%s' % (layer.name, name),
                                  pin.fold(np.array(variable)))
            for layer, name, variable, pin in _pin.pins(model)]
  return StripReport(model.name, output_path, list(output_nodes), layers,
                     file_bytes, file_bytes_gzip, dense_file_bytes,
                     dense_file_bytes_gzip, num_nodes)


def _input_specs(model):
  inputs = getattr(model, 'inputs', None)
  if not inputs:
    raise ValueError('export needs a model with known inputs (a Sequential '
                     'with keras.Input, or a functional model); %r has none'
                     % model.name)
  return [tf.TensorSpec(x.shape, x.dtype) for x in inputs]


def export_saved_model(model, path):
  """Writes `strip_model(model)` as a SavedModel at `path`; returns the report."""
  keras = _version.keras_of(model)
  plain = strip_model(model)
  if _version.is_keras3(keras):
    plain.export(path, format='tf_saved_model', verbose=False)
  else:
    specs = _input_specs(plain)
    serve = tf.function(lambda *x: plain(list(x) if len(x) > 1 else x[0],
                                         training=False),
                        input_signature=specs)
    tf.saved_model.save(plain, path, signatures=serve)
  size = sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(path) for f in files)
  # A folder, not one graph: no gzip size, dense reference or node count.
  return strip_report(model, path, [], size, None, None, None)


def _frozen_graph_def(plain):
  specs = _input_specs(plain)
  function = tf.function(lambda *x: plain(list(x) if len(x) > 1 else x[0],
                                          training=False))
  concrete = function.get_concrete_function(*specs)
  graph_def = concrete.graph.as_graph_def()
  handles = {}
  for variable in plain.weights:
    handle = getattr(variable, 'handle', None)
    if handle is None:
      handle = variable.value.handle   # Keras 3 wraps a tf.Variable.
    handles[id(handle)] = variable
  nodes = {node.name: node for node in graph_def.node}
  frozen = []
  for external, internal in concrete.graph.captures:
    variable = handles.get(id(external))
    if variable is None:
      continue
    node = nodes[internal.op.name]
    value = np.array(variable)
    dtype = tf.as_dtype(value.dtype)
    node.op = 'Const'
    node.ClearField('attr')
    node.attr['dtype'].type = dtype.as_datatype_enum
    node.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(value))
    frozen.append(resources.Variable(node.name, dtype.as_datatype_enum,
                                     tf.TensorShape(value.shape).as_proto()))
  resources.values_for_variables(graph_def, frozen)
  inputs = [t.op.name for t in concrete.inputs if t.dtype != tf.resource]
  outputs = [t.op.name for t in concrete.outputs]
  return graph_def, inputs, outputs


def export_frozen_pb(model, path):
  """Writes `strip_model(model)` as a frozen binary GraphDef at `path`.

  Returns:
    A `StripReport`; `output_nodes` are the output node names, and
    `input_nodes` (an extra attribute) the input placeholders'.
  """
  graph_def, inputs, outputs = _frozen_graph_def(strip_model(model))
  data = graph_def.SerializeToString()
  with open(path, 'wb') as f:
    f.write(data)
  dense = _dense_reference(graph_def)
  report = strip_report(model, path, outputs, len(data),
                        len(gzip.compress(data)), len(dense),
                        len(gzip.compress(dense)), len(graph_def.node))
  report.input_nodes = inputs
  return report


def _dense_reference(graph_def):
  """The graph with every constant's zeros filled in (seeded), serialized.

  The reference for the "dense weights" sizes of the report: the same graph
  as if nothing were pruned (values of each constant's own scale).
  """
  rng = np.random.RandomState(0)
  dense = tf.compat.v1.GraphDef()
  dense.CopyFrom(graph_def)
  for node in dense.node:
    if node.op != 'Const':
      continue
    value = tf.make_ndarray(node.attr['value'].tensor)
    if value.dtype.kind != 'f' or value.size < 2 or not (value == 0).any():
      continue
    scale = float(np.abs(value).max()) or 1.0
    filled = np.where(value == 0, rng.uniform(-scale, scale, value.shape),
                      value).astype(value.dtype)
    node.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(filled))
  return dense.SerializeToString()
