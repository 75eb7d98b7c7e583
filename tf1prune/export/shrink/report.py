"""What `shrink_graph_def` removed: per-layer parameters and FLOPs, and stops.

    >>> from tf1prune.export.shrink.report import LayerShrink, ShrinkReport
    >>> layer = LayerShrink('fc1/MatMul', 'MatMul', 8, 8, 4, 2, 36, 18, 64, 32)
    >>> report = ShrinkReport([layer], [], ['y'])
    >>> report.to_dict()['totals']['flops_ratio']
    0.5

FLOPs are per example: 2 x the multiply-adds of each Conv2D, MatMul and
DepthwiseConv2dNative (a MatMul of the rows `[N * H * W, C]` that a Reshape
made of an `[N, H, W, C]` tensor, a 1x1 conv, counts its `H x W` rows of
one example), and of each LRN's band sums (`2 * depth_radius + 1` per
channel and position); bias adds, activations and pools are not counted,
nor the Add of a border map, which replaces the bias add with as many
additions. Parameters are the layer's weight plus the bias right after it,
plus the constants the shrink added after it: a border map (`[1, 1,
H' x W', C]`, bias included; for a large map the table of its distinct rows
and columns) counts its entries in place of the bias's. Both columns are taken
after batch norms were folded into the layers, so "before" is the same
model, folded.
"""

import collections

from tf1prune.export.table import count, ratio, table


class LayerShrink(collections.namedtuple('LayerShrink', [
    'name', 'op', 'inputs_before', 'inputs_after', 'outputs_before',
    'outputs_after', 'params_before', 'params_after', 'flops_before',
    'flops_after'])):
  """One Conv2D, MatMul or depthwise conv layer before and after shrinking.

  Attributes:
    name, op: the layer's node name and op type.
    inputs_before, inputs_after: input channels (axis -2 of the weight).
    outputs_before, outputs_after: output channels (last axis; for a
      depthwise conv, inputs x channel multiplier).
    params_before, params_after: weight entries plus bias entries.
    flops_before, flops_after: 2 x multiply-adds per example (None if the
      conv's output size is unknown).
  """


class ShrinkStop(collections.namedtuple('ShrinkStop', [
    'layer', 'node', 'op', 'reason', 'channels'])):
  """Empty output channels of `layer` that had to stay.

  Attributes:
    layer: the layer whose filters are empty.
    node, op: where the shrink stopped: the op that pins the channels (a
      graph output, an LRN, a shape read, ...), the residual add whose other
      members keep them, or the next layer.
    reason: why, in words.
    channels: how many empty output channels stay.
  """


class ShrinkReport(object):
  """The result of `shrink_graph_def`.

  Args:
    layers: list of `LayerShrink`, in graph order.
    stops: list of `ShrinkStop`.
    output_nodes: the output node names.
    skipped: list of (node, op, reason) for Conv2D/MatMul nodes not treated
      as layers (e.g. NCHW, transposed, weight not constant).
    dropped: names of the nodes the outputs do not need, left out of the
      shrunk graph (constants aside).

  Attributes:
    check: the `tf1prune.export.verify.Comparison` of the shrunk graph's
      outputs with the given graph's on random inputs (None: not asked
      for, `check=False`).
    file_bytes_before, file_bytes_after: sizes of the .pb files, set by
      `shrink_pb` (None otherwise).
    num_nodes_before, num_nodes_after: nodes of the graphs in those files,
      set by `shrink_pb` (None otherwise).
  """

  def __init__(self, layers, stops, output_nodes, skipped=(), dropped=()):
    self.layers = list(layers)
    self.stops = list(stops)
    self.output_nodes = list(output_nodes)
    self.skipped = list(skipped)
    self.dropped = list(dropped)
    self.check = None
    self.file_bytes_before = None
    self.file_bytes_after = None
    self.num_nodes_before = None
    self.num_nodes_after = None

  def _total(self, field):
    values = [getattr(layer, field) for layer in self.layers]
    return None if None in values else sum(values)

  @property
  def params_before(self):
    return self._total('params_before')

  @property
  def params_after(self):
    return self._total('params_after')

  @property
  def flops_before(self):
    return self._total('flops_before')

  @property
  def flops_after(self):
    return self._total('flops_after')

  def to_dict(self):
    """Returns the report as a JSON-serializable dict."""
    totals = {'params_before': self.params_before,
              'params_after': self.params_after,
              'flops_before': self.flops_before,
              'flops_after': self.flops_after}
    totals['params_ratio'] = ratio(self.params_after, self.params_before)
    totals['flops_ratio'] = (ratio(self.flops_after, self.flops_before)
                             if self.flops_before is not None else None)
    return {'output_nodes': list(self.output_nodes),
            'layers': [dict(layer._asdict()) for layer in self.layers],
            'stops': [dict(stop._asdict()) for stop in self.stops],
            'skipped': [{'node': n, 'op': o, 'reason': r}
                        for n, o, r in self.skipped],
            'dropped': list(self.dropped),
            'file': {'bytes_before': self.file_bytes_before,
                     'bytes_after': self.file_bytes_after},
            'num_nodes': {'before': self.num_nodes_before,
                          'after': self.num_nodes_after},
            'check': self._check_dict(),
            'totals': totals}

  def _check_dict(self):
    return None if self.check is None else self.check.to_dict()

  def _check_line(self):
    """The table's line on the check, or None."""
    return None if self.check is None else 'check: %s' % (
        self.check.describe())

  def format_table(self):
    """Returns the report as a text table (what `--shrink` prints)."""
    def arrow(before, after):
      return '%s -> %s' % (count(before), count(after))

    rows = [(l.name, l.op, arrow(l.inputs_before, l.inputs_after),
             arrow(l.outputs_before, l.outputs_after),
             arrow(l.params_before, l.params_after),
             arrow(l.flops_before, l.flops_after)) for l in self.layers]
    total = ('total', '', '', '', arrow(self.params_before, self.params_after),
             arrow(self.flops_before, self.flops_after))
    out = table(('layer', 'op', 'inputs', 'outputs', 'params', 'FLOPs'), rows,
                total)
    flops = self.to_dict()['totals']['flops_ratio']
    params = self.to_dict()['totals']['params_ratio']
    out.append('params x%s, FLOPs x%s' % (
        'n/a' if params is None else '%.3f' % params,
        'n/a' if flops is None else '%.3f' % flops))
    if self.file_bytes_before is not None:
      out.append('file size {:,} B -> {:,} B'.format(self.file_bytes_before,
                                                     self.file_bytes_after))
    line = self._check_line()
    if line:
      out.append(line)
    for stop in self.stops:
      out.append('kept %d empty output channel(s) of %s: stopped at %s (%s): '
                 '%s' % (stop.channels, stop.layer, stop.node, stop.op,
                         stop.reason))
    for node, op, reason in self.skipped:
      out.append('not a layer: %s (%s): %s' % (node, op, reason))
    if self.dropped:
      out.append('left out %d node(s) the outputs do not need: %s' % (
          len(self.dropped), ', '.join(self.dropped)))
    return '\n'.join(out)
