"""What stripping produced: per-layer sparsity of folded weights, file sizes.

    >>> import numpy as np
    >>> from tf1prune.export._report import LayerStats, StripReport
    >>> folded = np.array([[0., 2.], [0., 0.]], np.float32)
    >>> layer = LayerStats.from_array('fc1', 'fc1/weights',
    ...                               'fc1/weights/masked_weight', folded)
    >>> layer.nonzeros, layer.sparsity
    (1, 0.75)
    >>> report = StripReport('ckpt', 'out.pb', ['y'], [layer], 100, 40, 100, 60)
    >>> report.to_dict()['totals']
    {'size': 4, 'nonzeros': 1, 'sparsity': 0.75}

The numbers come from the constants actually written (`weight * mask` after
folding), not from the masks' names or the schedule: a layer's sparsity is the
fraction of exact zeros in its folded constant. The "dense" sizes are those of
the same graph holding the raw, unmasked weights.
"""

import collections

import numpy as np

from tf1prune.export.table import count, ratio, table


class LayerStats(collections.namedtuple(
    'LayerStats', ['name', 'weight', 'node', 'shape', 'dtype', 'size',
                   'nonzeros'])):
  """One folded weight.

  Attributes:
    name: the layer (the mask's scope, e.g. 'conv1').
    weight: the raw weight node it came from (e.g. 'conv1/weights').
    node: the constant in the stripped graph (the former masked_weight Mul).
    shape: list of ints.
    dtype: numpy dtype name, e.g. 'float32'.
    size: number of weights.
    nonzeros: number of weights that are not exactly zero after folding.
  """

  @classmethod
  def from_array(cls, name, weight, node, value):
    """Counts the nonzeros of folded constant `value` (an ndarray)."""
    value = np.asarray(value)
    return cls(name=name, weight=weight, node=node, shape=list(value.shape),
               dtype=value.dtype.name, size=int(value.size),
               nonzeros=int(np.count_nonzero(value)))

  @property
  def sparsity(self):
    """Fraction of zeros, in [0, 1]."""
    return 1.0 - self.nonzeros / float(self.size) if self.size else 0.0

  def to_dict(self):
    out = dict(self._asdict())
    out['sparsity'] = self.sparsity
    return out


class StripReport(object):
  """The result of `strip_checkpoint`.

  Args:
    checkpoint: the checkpoint prefix that was read.
    output_path: the `.pb` written.
    output_nodes: list of the output node names kept.
    layers: list of `LayerStats`, one per folded masked weight, graph order.
    file_bytes, file_bytes_gzip: size of the written file, raw and gzipped.
    dense_file_bytes, dense_file_bytes_gzip: the same for the graph with
      the raw (unmasked) weights in place of the folded ones.
    num_nodes: number of nodes in the written graph.
    For an export that is not one graph file (a SavedModel folder) the gzip
    and dense sizes and `num_nodes` are None, and the table leaves them out.

  Attributes:
    unshrunk_file_bytes, unshrunk_file_bytes_gzip, unshrunk_num_nodes: the
      stripped graph's figures before a shrink replaced the file
      (`record_shrink`); None when nothing was shrunk. The dense sizes stay
      those of the unshrunk graph with the raw weights: the model before
      pruning.
    shrink_report: the `ShrinkReport` of the shrink that made the file
      (`write_pb(shrink=True)`), or None.
    tflite_report: the `TFLiteReport` of the TFLite model written beside it
      (`write_pb(tflite_path=...)`), or None.
  """

  def __init__(self, checkpoint, output_path, output_nodes, layers, file_bytes,
               file_bytes_gzip, dense_file_bytes, dense_file_bytes_gzip,
               num_nodes=None):
    self.checkpoint = checkpoint
    self.output_path = output_path
    self.output_nodes = list(output_nodes)
    self.layers = list(layers)
    self.file_bytes = file_bytes
    self.file_bytes_gzip = file_bytes_gzip
    self.dense_file_bytes = dense_file_bytes
    self.dense_file_bytes_gzip = dense_file_bytes_gzip
    self.num_nodes = num_nodes
    self.unshrunk_file_bytes = None
    self.unshrunk_file_bytes_gzip = None
    self.unshrunk_num_nodes = None
    self.shrink_report = None
    self.tflite_report = None

  def record_shrink(self, file_bytes, file_bytes_gzip, num_nodes):
    """The written file is now the shrunk graph of these sizes.

    `file_bytes`, `file_bytes_gzip` and `num_nodes` become the report's;
    what they were moves to the `unshrunk_*` attributes (once: a second
    call keeps the first unshrunk figures).
    """
    if self.unshrunk_num_nodes is None:
      self.unshrunk_file_bytes = self.file_bytes
      self.unshrunk_file_bytes_gzip = self.file_bytes_gzip
      self.unshrunk_num_nodes = self.num_nodes
    self.file_bytes = file_bytes
    self.file_bytes_gzip = file_bytes_gzip
    self.num_nodes = num_nodes

  @property
  def total_size(self):
    return sum(layer.size for layer in self.layers)

  @property
  def total_nonzeros(self):
    return sum(layer.nonzeros for layer in self.layers)

  @property
  def total_sparsity(self):
    size = self.total_size
    return 1.0 - self.total_nonzeros / float(size) if size else 0.0

  def to_dict(self):
    """Returns the report as a JSON-serializable dict (with the shrink's
    report under 'shrink' and the TFLite model's under 'tflite', when
    made)."""
    out = {
        'checkpoint': self.checkpoint,
        'output_path': self.output_path,
        'output_nodes': list(self.output_nodes),
        'num_nodes': self.num_nodes,
        'layers': [layer.to_dict() for layer in self.layers],
        'totals': {'size': self.total_size, 'nonzeros': self.total_nonzeros,
                   'sparsity': self.total_sparsity},
        'file': {'bytes': self.file_bytes, 'gzip_bytes': self.file_bytes_gzip},
        'dense_file': {'bytes': self.dense_file_bytes,
                       'gzip_bytes': self.dense_file_bytes_gzip},
        'unshrunk_num_nodes': self.unshrunk_num_nodes,
        'unshrunk_file': {'bytes': self.unshrunk_file_bytes,
                          'gzip_bytes': self.unshrunk_file_bytes_gzip},
    }
    if self.shrink_report is not None:
      out['shrink'] = self.shrink_report.to_dict()
    if self.tflite_report is not None:
      out['tflite'] = self.tflite_report._asdict()
    return out

  def format_table(self):
    """Returns the report as the text table the strip script prints."""
    rows = [(layer.name, 'x'.join(str(d) for d in layer.shape) or 'scalar',
             count(layer.size), count(layer.nonzeros),
             '{:.2%}'.format(layer.sparsity)) for layer in self.layers]
    total = ('total (%d masked)' % len(self.layers), '',
             count(self.total_size), count(self.total_nonzeros),
             '{:.2%}'.format(self.total_sparsity))
    smaller = ratio(self.dense_file_bytes_gzip, self.file_bytes_gzip)
    shrunk = self.unshrunk_num_nodes is not None

    def unshrunk(value):
      return 'before the shrink: %s B; ' % count(value) if shrunk else ''

    out = ['checkpoint: %s' % self.checkpoint,
           'output:     %s' % self.output_path + (
               '' if self.num_nodes is None else ' (%s nodes%s; outputs %s)' % (
                   self.num_nodes, ', %s before the shrink' %
                   self.unshrunk_num_nodes if shrunk else '',
                   ', '.join(self.output_nodes)))]
    out.extend(table(('layer', 'shape', 'weights', 'nonzeros', 'sparsity'),
                     rows, total))
    out.extend(['', 'file size      %s B%s' % (
        count(self.file_bytes), '' if self.dense_file_bytes is None else
        '  (%sdense weights: %s B)' % (unshrunk(self.unshrunk_file_bytes),
                                       count(self.dense_file_bytes)))])
    if self.file_bytes_gzip is not None:
      out.append('gzip size      %s B  (%sdense weights: %s B, %s)' % (
          count(self.file_bytes_gzip), unshrunk(self.unshrunk_file_bytes_gzip),
          count(self.dense_file_bytes_gzip),
          'n/a' if smaller is None else '%.2fx smaller' % smaller))
    return '\n'.join(out)
