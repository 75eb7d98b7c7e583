"""Removes the channels pruning emptied from a frozen graph: a smaller graph.

    >>> import numpy as np, tensorflow.compat.v1 as tf
    >>> from tf1prune.export.shrink.rounds import shrink_graph_def
    >>> w1 = np.ones([3, 4], np.float32); w1[:, 1] = 0.0    # output 1 is empty
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 3], name='x')
    ...   h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), [0., 2., 0., 0.]))
    ...   y = tf.nn.bias_add(tf.matmul(h, np.ones([4, 2], np.float32)), [1., 1.],
    ...                      name='y')
    >>> small, report = shrink_graph_def(g.as_graph_def(), ['y'])
    >>> [(l.outputs_before, l.outputs_after) for l in report.layers]
    [(4, 3), (2, 2)]

The removed unit still added relu(2) * w2[1, :] to `y`; that constant is now
in `y`'s bias, so `y` is unchanged.

`shrink_graph_def` works on a frozen GraphDef whose weights are constants (the
output of `strip_pruning_vars_fn`), on the nodes its outputs need: any other
node is left out first, as freezing leaves it out (it could read channels
the shrink removes). In three steps:

1. `prepare`: constant sub-graphs are evaluated (a batch-norm scale
   computed from frozen variables), inference batch norms (FusedBatchNorm,
   V2, V3, and `tf.nn.batch_normalization`'s Rsqrt/Mul/Sub/Add once folded)
   are folded into the Conv2D, MatMul or depthwise conv before them, or kept
   as a per-channel Mul and BiasAdd.
2. `regions`: from each Conv2D (NHWC) / MatMul layer with all-zero
   filters, the region of tensors whose channels are tied to its outputs:
   through activations, per-channel constants, pools, explicit Pad, spatial
   Mean and Squeeze, residual Add/AddV2 (every member must drop a channel),
   ConcatV2 (channel offsets), depthwise convs (an input channel and its
   `multiplier` outputs go together) and a flatten into a dense layer.
3. `removed_values` and `rewrite`: what a removed channel is at each
   tensor (a constant, or a constant map after padding), and what it gave the
   next layers: added to their bias where it is the same at every output
   position; where zero padding makes it vary, a constant map over the next
   conv's output added with its bias (`border_maps`, objective 'flops'),
   else the next conv reads it as extra input channels (`extra_channels`: a
   channel of ones, maybe padded like the data or times a `[1, H, W, k]`
   pattern); every deployment stack computes both exactly
   (`fold_borders=False`: such channels stay unless their constant is 0).

Layers emptied by removed inputs are removed in the next round, until
nothing changes. Where a channel has to stay (an LRN, a graph output, a
shape read, a residual add whose other members keep it, ...), the report
says where and why.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export._lazy_graph import LazyGraph
from tf1prune.export.atomic import write_atomically
from tf1prune.export.attrs import op_defs, strip_default_attrs
from tf1prune.export.graph_index import GraphIndex
from tf1prune.export.names import check_outputs, output_names, split_input
from tf1prune.export.progress import notify
from tf1prune.export.shrink import lrn
from tf1prune.export.shrink.border_maps import add_border_maps, own_bias
from tf1prune.export.shrink.rewrite import may_shrink, shrink_region
from tf1prune.export.shrink.removed_values import extra_count
from tf1prune.export.shrink.frozen_graph import FrozenGraph, static_shapes
from tf1prune.export.shrink.lrn import rewritten_lrn
from tf1prune.export.shrink.prepare import prepare_graph_def
from tf1prune.export.shrink.regions import RegionWalk, find_layers
# ShrinkStop too: the old paths tf1prune.shrink and
# tf1prune.export.shrink.run load this module.
from tf1prune.export.shrink.report import (  # noqa: F401
    LayerShrink, ShrinkReport, ShrinkStop)
from tf1prune.export.verify import OutputsDiffer, compare_graph_defs

_MAX_ROUNDS = 32
OBJECTIVES = ('flops', 'params')


def check_objective(objective):
  """Raises ValueError unless `objective` is one of `OBJECTIVES`."""
  if objective not in OBJECTIVES:
    raise ValueError("objective must be 'flops' or 'params', got %r; 'flops' "
                     "makes the graph fastest, 'params' smallest" % (objective,))


def _stats(g, layer):
  """(inputs, outputs, params, flops) of `layer` with the current values."""
  shape = g.value(layer.weight).shape
  inputs = shape[layer.in_axis] - extra_count(g, layer)
  outputs = shape[layer.out_axis]
  if layer.kind == 'depthwise':
    outputs = shape[-2] * shape[-1]
  bias = own_bias(g, layer, outputs)
  params = int(np.prod(shape)) + (g.value(bias).size if bias else 0) + sum(
      g.value(c).size for c in g.folded.get(layer.node.name, ()) if c != bias)
  flops = 2 * int(np.prod(shape))
  if layer.kind != 'dense':
    # The positions of the output; a transposed conv's filter meets each
    # position of its input.
    out = g.shape(layer.node.input[layer.data]) if \
        layer.kind == 'conv_transpose' else g.shapes.get(layer.node.name)
    flops = flops * int(np.prod(out[1:-1])) if out and None not in \
        out[1:-1] else None
  else:
    rows = rows_per_example(g, layer.node)
    flops = None if rows is None else flops * rows
  return inputs, outputs, params, flops


def rows_per_example(g, node):
  """How many rows of MatMul `node`'s data input one example gives: the
  positions of an `[N, H, W, C]` tensor that a Reshape (keeping the last
  axis) turned into rows `[N * H * W, C]` (a 1x1 conv), None if they are
  unknown; else 1."""
  name, port = split_input(node.input[0])
  while port == 0 and name in g.nodes and g.nodes[name].op in (
      'Identity', 'Snapshot'):
    name, port = split_input(g.nodes[name].input[0])
  reshape = g.nodes.get(name)
  if port != 0 or reshape is None or reshape.op != 'Reshape':
    return 1
  source = g.shapes.get(g.key(reshape.input[0]))
  out = g.shapes.get(name)
  if not source or not out or len(source) < 3 or len(out) != 2 or \
      source[-1] is None or out[-1] != source[-1]:
    return 1
  positions = source[1:-1]
  return None if None in positions else int(np.prod(positions))


def _lrn_rows(g):
  """A `LayerShrink` per LRN of the graph, by its name: its FLOPs (its band
  sums, `lrn.flops`) are those of its original width, which it keeps when
  the shrink removed channels around it (`lrn.rewrite`)."""
  rows = []
  for node in g.graph_def.node:
    if node.op != 'LRN':
      continue
    name = rewritten_lrn(g, node.name) or node.name
    shape = g.shapes.get(node.name)
    if not shape:
      continue
    channels = shape[-1]
    kept = (len(g.value(g.lrn[name][0])) if name in g.lrn else channels)
    positions = (shape[1] * shape[2] if None not in shape[1:3] else None)
    flops = lrn.flops(g.attr(node, 'depth_radius', 5), channels, positions)
    rows.append(LayerShrink(name, 'LRN', channels, kept, channels, kept, 0,
                            0, flops, flops))
  return sorted(rows)


def _write_back(g):
  for const in g.changed:
    node = g.nodes[const]
    value = g.values[const]
    node.attr['value'].tensor.CopyFrom(
        tf.make_tensor_proto(value, dtype=node.attr['dtype'].type,
                             shape=value.shape))
  g.changed = set()


def _round(g, layers, fold_borders, objective, progress=None, stage=''):
  """One pass over the layers with empty outputs: (changed, stops)."""
  walk = RegionWalk(g, layers)
  done, stops, changed = set(), [], False
  for count, (name, layer) in enumerate(layers.items()):
    notify(progress, stage, count, len(layers))
    if layer.kind == 'depthwise' or name in done:
      continue
    if layer.node.name != name:
      # A graph output that got an Add of folded constants in this round:
      # it is `<name>/shrink_unfolded` now, which this round's walk does not
      # know; the next round (there is one: something was removed) does.
      continue
    region = walk.region(name)
    done.update(region.ids)
    if not may_shrink(g, region):
      continue
    removed, found = shrink_region(g, region, fold_borders, walk.position,
                                   objective)
    if removed:
      walk.update()
    changed = changed or removed > 0
    stops.extend(found)
  notify(progress, stage, len(layers), len(layers))
  return changed, stops


def shrink_graph_def(graph_def, output_node_names, fold_borders=True,
                     objective='flops', progress=None, check=True,
                     input_shapes=None):
  """Returns a smaller copy of frozen `graph_def` and a `ShrinkReport`.

  Args:
    graph_def: a frozen `tf.GraphDef` (weights are Const nodes, e.g. from
      `strip_pruning_vars_fn`); it is not modified.
    output_node_names: list of output node names (or a comma-separated str);
      their shapes and values do not change. Nodes they do not need are left
      out (`ShrinkReport.dropped`): list every node you fetch.
    fold_borders: when a removed channel's constant is not 0 and the next
      conv zero-pads, give that conv's output what the channel gave it: a
      constant map added with its bias (`<bias>/shrink_map`, counted in the
      report's parameters), or extra input channels (`<conv>/shrink_ones`,
      counted in the report's parameters and FLOPs; the report's `inputs`
      leave them out). False: such channels stay.
    objective: what the cost rule for removed channels that padding makes
      vary over the positions minimizes: 'flops' (default: they are always
      removed; a `[1, 1, H' x W', C]` map added with the next conv's bias where
      its output height and width are static, else at most as many extra
      channels as they were, the interior value in the bias) or 'params'
      (extra channels; they stay where the `[1, H, W, k]` pattern of the
      extra channels has more entries than the weights it replaces).
    progress: optional `progress(stage, done, total, fraction)` callable
      (`tf1prune.export.progress`): layers done of each round.
    check: run the shrunk and the given graph on random inputs in the
      running TensorFlow and compare the outputs (`tf1prune.export.verify`:
      1e-4 of max|y| for float32); the report's `check` says how it went,
      and a graph whose outputs differ is refused (`OutputsDiffer`). False:
      no check (`check` is None).
    input_shapes: None, or {placeholder name: shape} for the check, for
      inputs with unknown dimensions besides the batch size (without it
      such a graph is not checked, and the report says so).

  Returns:
    (graph_def, report): the shrunk GraphDef (the nodes the outputs need,
    under the same names, smaller weight, bias and reshape constants, batch
    norms folded, maybe `<bias>/shrink_map` border maps (the bias node
    becomes a Reshape of the same name), new `<conv>/shrink_ones` extra
    channels, or `.../shrink_fold` Add nodes of a `[C]` constant after a
    layer without a bias; no `_output_shapes` attributes, attributes at their
    default left out, so that TF 1.15 and TF 2.x both load it) and a
    `ShrinkReport` with per-layer parameters and FLOPs before and after, and
    where and why empty channels had to stay.

  Raises:
    TypeError: `graph_def` is not a `tf.GraphDef`, `fold_borders` or `check`
      not a bool, `input_shapes` not a dict.
    ValueError: an output name is not in the graph, `objective` is not
      'flops' or 'params', the graph does not import, or `input_shapes`
      names no placeholder or does not fit it.
    OutputsDiffer (a ValueError): the check found the shrunk graph's
      outputs differ from the given graph's (or it does not run).
  """
  if not isinstance(graph_def, tf.GraphDef):
    raise TypeError('graph_def must be a tf.GraphDef, got %s; parse a .pb '
                    'with tf.GraphDef.FromString(data), or give its path to '
                    'shrink_pb' % type(graph_def).__name__)
  if not isinstance(fold_borders, bool):
    raise TypeError('fold_borders must be True or False, got %r'
                    % (fold_borders,))
  if not isinstance(check, bool):
    raise TypeError('check must be True or False, got %r' % (check,))
  outputs = output_names(output_node_names)
  check_objective(objective)
  check_outputs(outputs, set(n.name for n in graph_def.node), 'graph_def')
  notify(progress, 'preparing the graph', 0, 1)
  graph_def, dropped = _needed(graph_def, outputs)
  prepared = prepare_graph_def(graph_def, outputs)
  notify(progress, 'preparing the graph', 1, 1)
  keep_two = set()
  while True:
    copy = tf.GraphDef()
    copy.CopyFrom(prepared)
    rows, stops, skipped, narrowed = _shrink(copy, outputs, fold_borders,
                                             objective, progress, keep_two)
    if narrowed <= keep_two:
      break
    keep_two |= narrowed
  report = ShrinkReport(rows, stops, outputs, skipped, dropped)
  if check:
    notify(progress, 'checking the shrunk graph', 0, 1)
    report.check = compare_graph_defs(graph_def, copy, outputs,
                                      input_shapes)
    notify(progress, 'checking the shrunk graph', 1, 1)
    if report.check.passed is False:
      raise OutputsDiffer(report.check, 'the shrunk graph', 'check=False')
  return copy, report


def _shrink(copy, outputs, fold_borders, objective, progress, keep_two):
  """The rounds on the prepared GraphDef `copy` (edited in place): (report
  rows, stops, skipped layers, the tensors that must keep two channels and
  did not: `one_channel_convs`)."""
  g = FrozenGraph(copy, outputs)
  g.keep_two = set(keep_two)
  layers, skipped = find_layers(g)
  data_inputs = dict((name, split_input(layer.node.input[0])[0])
                     for name, layer in layers.items())
  before = [_stats(g, layer) for layer in layers.values()]
  stops = []
  for round_index in range(_MAX_ROUNDS):
    # A layer that is an output and got an Add of folded constants is now
    # `<name>/shrink_unfolded` (`rewrite._insert_add`): key it so.
    layers = collections.OrderedDict(
        (layer.node.name, layer) for layer in layers.values())
    changed, stops = _round(g, layers, fold_borders, objective, progress,
                            'shrinking layers (round %d)' % (round_index + 1))
    _write_back(g)
    g.shapes = static_shapes(copy)
    if not changed:
      break
  add_border_maps(g)
  _write_back(g)
  strip_default_attrs(copy, op_defs(copy))
  after = [_stats(g, layer) for layer in layers.values()]
  rows = [LayerShrink(layer.node.name, layer.node.op, b[0], a[0], b[1], a[1],
                      b[2], a[2], b[3], a[3])
          for layer, b, a in zip(layers.values(), before, after)]
  narrowed = one_channel_convs(rows, data_inputs)
  rows.extend(_lrn_rows(g))
  return rows, stops, skipped, narrowed


def one_channel_convs(rows, data_inputs):
  """The tensors to keep two channels in, so that no Conv2D or depthwise
  conv the shrink narrowed has one input and one output channel: its
  output (where it had two or more), else its input.

  TF 2.x's oneDNN kernels compute such a conv wrongly or not at all
  (`could not create a primitive descriptor for the reorder primitive`,
  docs/deployment.md); a conv the graph had that way stays as it was.

  Args:
    rows: the `LayerShrink`s of the layers, by their names at the start
      (a graph output's is `<name>/shrink_unfolded` at the end).
    data_inputs: {layer name at the start: the tensor it reads}.
  """
  names = list(data_inputs)
  narrowed = set()
  for name, row in zip(names, rows):
    if row.op not in ('Conv2D', 'DepthwiseConv2dNative') or \
        (row.inputs_after, row.outputs_after) != (1, 1) or \
        (row.inputs_before, row.outputs_before) == (1, 1):
      continue
    narrowed.add(name if row.outputs_before > 1 else data_inputs[name])
  return narrowed


def _needed(graph_def, outputs):
  """(`graph_def`, or a copy of what `outputs` need; the names of the nodes
  left out, constants aside).

  A node the outputs do not need would read channels the shrink removes
  and silently change (or pin them and stop the shrink): it leaves the
  graph, as it does when a graph is frozen.
  """
  keep = GraphIndex(graph_def.node).reachable(outputs)
  if len(keep) == len(graph_def.node):
    return graph_def, []
  dropped = [node.name for node in graph_def.node
             if node.name not in keep and node.op != 'Const']
  return LazyGraph(graph_def).pruned(outputs).graph_def, dropped


def shrink_pb(path, output_node_names, output_path=None, objective='flops',
              progress=None, check=True, input_shapes=None):
  """Shrinks the binary frozen GraphDef file `path`; returns the report.

  Args:
    path: a `.pb` file, e.g. written by `strip_checkpoint`.
    output_node_names: list (or comma-separated str) of output node names.
    output_path: where to write the shrunk graph; default `path` itself. The
      file is replaced in one rename. Attributes at their op's default value
      are left out, so TF 1.15 loads what TF 2.x writes.
    objective: 'flops' or 'params', as for `shrink_graph_def`.
    progress: as `shrink_graph_def`'s.
    check, input_shapes: as `shrink_graph_def`'s: a shrunk graph whose
      outputs differ from the file's is not written.

  Returns:
    The `ShrinkReport`, with `file_bytes_before`, `file_bytes_after`,
    `num_nodes_before` and `num_nodes_after` set.

  Raises:
    ValueError: `path` is not a GraphDef file, or as `shrink_graph_def`
      (`OutputsDiffer`: nothing is written).
  """
  if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
    raise ValueError('path %r is not a file (%s); give the .pb that '
                     'strip_checkpoint or strip_pruning_vars wrote' % (
                         path, 'a directory' if tf.io.gfile.exists(path)
                         else 'it does not exist'))
  graph_def = tf.GraphDef()
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  try:
    graph_def.ParseFromString(data)
  except Exception as e:  # protobuf's DecodeError differs by version.
    raise ValueError('%s is not a binary GraphDef: %s' % (path, e))
  small, report = shrink_graph_def(graph_def, output_node_names,
                                   objective=objective, progress=progress,
                                   check=check, input_shapes=input_shapes)
  out = small.SerializeToString()
  with write_atomically(output_path or path) as f:
    f.write(out)
  report.file_bytes_before, report.file_bytes_after = len(data), len(out)
  report.num_nodes_before = len(graph_def.node)
  report.num_nodes_after = len(small.node)
  return report
