"""What one node does with the channels of its inputs, over any view.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.channels import GraphView, classify
    >>> with tf.Graph().as_default() as g:
    ...   a = tf.placeholder(tf.float32, [None, 4, 4, 3])
    ...   b = tf.placeholder(tf.float32, [None, 1, 1, 3])
    ...   y = tf.multiply(a, b, name='gate')
    >>> op, why = classify(GraphView(g), y.op, lambda t: True)
    >>> op.kind, op.inputs, why
    ('elementwise', [0, 1], None)

`classify(view, node, carries)` reads the node's row of the op table
(`table.RULES`) and checks the shapes: a `ChannelOp` says which inputs
carry channels (`inputs`: those `carries(tensor)` says carry them, and whose
last axis lines up with the output's), which are per-channel parameters
(`params`: a scalar, `[C]`, `[1, .., 1, C]` or a `[1, H, W, C]` map), which
are other tensors (`loose`: a tensor that carries one channel and is
broadcast over all of them, spatial attention's map, is one), and what the
op needs (`extra`: the concat
widths, the depthwise multiplier, the rows of a flatten, the pads, the
positions a slice takes, a split's axis and sizes, ...).
Otherwise it returns `(None, why)`: the channels end there, and why.
"""

import collections

import numpy as np

from tf1prune.channels.table import rule_of


class ChannelOp(collections.namedtuple('ChannelOp', [
    'kind', 'node', 'inputs', 'params', 'loose', 'extra', 'rule'])):
  """A node that keeps channels apart (see the module docstring)."""


def _nhwc(view, node):
  return view.attr(node, 'data_format', 'NHWC') in ('NHWC', 'N...C')


def per_channel(shape, channels):
  """True for a scalar, `[C]` / `[1]`, `[1, .., 1, C]` or `[1, H, W, C]`."""
  if shape is None:
    return False
  if not shape:
    return True
  if shape[-1] not in (channels, 1):
    return False
  return all(d == 1 for d in shape[:-1]) or (
      len(shape) == 4 and shape[0] == 1 and shape[-1] == channels)


def _elementwise(view, node, rule, channels, carries):
  inputs, params, loose = [], [], []
  for index, tensor in enumerate(view.inputs(node)):
    shape = view.shape(tensor)
    if carries(tensor):
      if shape and shape[-1] == 1 and channels > 1:
        loose.append(index)   # a map broadcast over the channels
        continue
      if shape is None or not shape or shape[-1] != channels:
        return None, 'its inputs do not line up channel by channel'
      inputs.append(index)
    elif per_channel(shape, channels) and (
        all(d == 1 for d in shape[:-1]) or
        view.constant(tensor) is not None):
      # A [1, H, W, C] map is a parameter only as a constant: a batch of
      # one example has that shape too.
      params.append(index)
    else:
      loose.append(index)
  if not inputs:
    return None, 'no input carries channels'
  if view.op_type(node) in ('BiasAdd', 'BiasAddV1') and \
      not _nhwc(view, node):
    return None, 'only NHWC BiasAdd is passed'
  return ChannelOp('elementwise', node, inputs, params, loose, None,
                   rule), None


def _axes(view, tensor, rank):
  value = view.constant(tensor)
  if value is None or not rank:
    return None
  return set(int(a) % rank for a in np.ravel(value))


def _reduce(view, node, rule):
  tensor = view.inputs(node)[0]
  rank = len(view.shape(tensor) or [])
  axes = _axes(view, view.inputs(node)[1], rank)
  op = view.op_type(node)
  if axes is not None and rank - 1 in axes:
    return None, ('a %s over the channel axis mixes the channels: %s is not '
                  'among the ops the shrink passes on that axis' % (op, op))
  if rank != 4 or axes != {1, 2}:
    return None, 'only a %s over height and width (NHWC) is passed' % op
  keep = view.attr(node, 'keep_dims', False)
  return ChannelOp('reduce', node, [0], [], [], keep, rule), None


def _pad(view, node, rule):
  op = view.op_type(node)
  pads = view.constant(view.inputs(node)[1])
  fill = np.zeros(())
  if op == 'PadV2':
    fill = view.constant(view.inputs(node)[2])
  if pads is None or fill is None or np.shape(pads) != (4, 2) or \
      np.any(pads[[0, 3]]) or np.size(fill) != 1:
    return None, 'only a constant %s of the height and width is passed' % op
  mode = view.attr(node, 'mode', 'CONSTANT') if op == 'MirrorPad' else \
      'CONSTANT'
  return ChannelOp('pad', node, [0], [], [], (
      np.asarray(pads)[1:3].tolist(), float(np.ravel(fill)[0]), mode),
                   rule), None


def _concat(view, node, rule, carries):
  inputs = view.inputs(node)
  rank = len(view.shape(view.output(node)) or [])
  axis = view.constant(inputs[-1])
  if axis is None or not rank or int(axis) % rank != rank - 1:
    return None, 'concat not on the channel axis mixes channels'
  widths = []
  for tensor in inputs[:-1]:
    shape = view.shape(tensor)
    if not shape or shape[-1] is None:
      return None, 'the channels of a concat input are unknown'
    widths.append(shape[-1])
  carried = [i for i, t in enumerate(inputs[:-1]) if carries(t)]
  loose = [i for i in range(len(inputs) - 1) if i not in carried]
  return ChannelOp('concat', node, carried, [], loose, widths, rule), None


def _reshape(view, node, rule, channels):
  source = view.shape(view.inputs(node)[0])
  out = view.shape(view.output(node))
  if not source or source[-1] is None or not out:
    return None, 'the shapes around this %s are unknown' % view.op_type(node)
  width = source[-1]
  if out[-1] == width and min(len(source), len(out)) >= 2:
    # The last axis stays the last: the channels, one position (or row)
    # after the other ([N, C] <-> [N, 1, 1, C], [N, H, W, C] <->
    # [N * H * W, C]).
    return ChannelOp('reshape', node, [0], [], [], 1, rule), None
  if view.op_type(node) == 'Reshape' and len(source) >= 3 and \
      len(out) == 2 and channels % width == 0:
    return ChannelOp('reshape', node, [0], [], [], channels // width,
                     rule), None
  return None, ('the %s to %s does not keep whole channels (only NHWC to '
                'rows [N, K], or a reshape that keeps the last axis: '
                '[N, C] <-> [N, 1, 1, C], [N, H, W, C] <-> [N * H * W, C])'
                % (view.op_type(node), out))


def _strided(view, node, rank, channels):
  """(the [H, W] slices, the channel axis's explicit end or None, None) of
  a StridedSlice that takes every channel whole, else (None, None, why)."""
  op = view.op_type(node)
  ends = [view.constant(t) for t in view.inputs(node)[1:4]]
  if any(e is None or np.shape(e) != (rank,) for e in ends):
    return None, None, 'its begin, end and strides are not constants'
  begin, end, strides = [[int(v) for v in e] for e in ends]
  if any(view.attr(node, k, 0) for k in ('ellipsis_mask', 'new_axis_mask',
                                         'shrink_axis_mask')):
    return None, None, ('only a %s without ellipsis, new or shrunk axes is '
                        'passed' % op)
  masks = [view.attr(node, k, 0) for k in ('begin_mask', 'end_mask')]
  last = rank - 1
  first = None if masks[0] & (1 << last) else begin[last]
  stop = None if masks[1] & (1 << last) else end[last]
  if strides[last] != 1 or first not in (None, 0) or \
      (stop is not None and stop < channels):
    return None, None, ('a %s of a channel range: only slices that take '
                        'the channel axis whole are passed' % op)
  cuts = [slice(None if masks[0] & (1 << a) else begin[a],
                None if masks[1] & (1 << a) else end[a], strides[a])
          for a in (1, 2)]
  return cuts, stop, None


def _plain_slice(view, node, rank, channels):
  """As `_strided`, for a Slice (begin and size)."""
  begin, size = [view.constant(t) for t in view.inputs(node)[1:3]]
  if begin is None or size is None or np.shape(begin) != (rank,) or \
      np.shape(size) != (rank,):
    return None, None, 'its begin and size are not constants'
  begin, size = [[int(v) for v in e] for e in (begin, size)]
  last = rank - 1
  if begin[last] != 0 or size[last] not in (-1, channels):
    return None, None, ('a Slice of a channel range: only slices that take '
                        'the channel axis whole are passed')
  cuts = [slice(begin[a], None if size[a] == -1 else begin[a] + size[a])
          for a in (1, 2)]
  return cuts, None if size[last] == -1 else size[last], None


def _slice(view, node, rule, channels):
  """A StridedSlice or Slice of positions (or of the batch) that keeps every
  channel: extra is the [H, W] slices and the channel axis's explicit
  end or size (None if masked or -1), which the shrink rewrites."""
  source = view.shape(view.inputs(node)[0])
  if not source or len(source) != 4 or source[-1] is None:
    return None, ('only a %s of an NHWC tensor of known channels is passed'
                  % view.op_type(node))
  take = _strided if view.op_type(node) == 'StridedSlice' else _plain_slice
  cuts, stop, why = take(view, node, 4, source[-1])
  if why is not None:
    return None, why
  if source[-1] != channels:
    return None, 'its channels do not line up'
  return ChannelOp('slice', node, [0], [], [], (cuts, stop), rule), None


def _spatial(view, node, rule, channels):
  """SpaceToBatchND, BatchToSpaceND or a resize of an NHWC tensor: extra is
  (op type, block shape, [[before, after]] * 2 pads or crops), the last two
  None for a resize."""
  op = view.op_type(node)
  source = view.shape(view.inputs(node)[0])
  if not source or len(source) != 4 or source[-1] != channels:
    return None, 'only a %s of NHWC tensors is passed' % op
  if op.startswith('Resize'):
    return ChannelOp('spatial', node, [0], [], [], (op, None, None),
                     rule), None
  block, pads = [view.constant(t) for t in view.inputs(node)[1:3]]
  if block is None or pads is None or np.shape(block) != (2,) or \
      np.shape(pads) != (2, 2):
    return None, ('only a %s of the height and width by constants is '
                  'passed' % op)
  return ChannelOp('spatial', node, [0], [], [], (
      op, [int(b) for b in block], np.asarray(pads).tolist()), rule), None


def _split_sizes(view, node, inputs, width, channels):
  """The sizes of a Split's (equal parts of `width`) or SplitV's outputs
  along the split axis (-1 resolved; None where unknown, which only a split
  of the `channels` axis may not be), else (None, why)."""
  count = int(view.attr(node, 'num_split', 1))
  if view.op_type(node) == 'Split':
    if width is None:
      return [None] * count, None
    return [width // count] * count, None
  sizes = view.constant(inputs[1])
  if sizes is None or np.shape(sizes) != (count,):
    if not channels:
      return [None] * count, None
    return None, 'the size_splits of this SplitV are not a constant'
  sizes = [int(s) for s in sizes]
  if -1 in sizes:
    rest = sum(s for s in sizes if s != -1)
    sizes = [None if width is None else width - rest if s == -1 else s
             for s in sizes]
  return sizes, None


def _split(view, node, rule):
  """A Split or SplitV: extra is (axis, rank, sizes): output k takes
  `sizes[k]` entries of `axis` from the offset `sum(sizes[:k])` (the
  channels if `axis` is `rank - 1`; every channel whole otherwise)."""
  op = view.op_type(node)
  inputs = view.inputs(node)
  data, dim = (1, 0) if op == 'Split' else (0, 2)
  source = view.shape(inputs[data])
  axis = view.constant(inputs[dim])
  if not source or source[-1] is None:
    return None, 'the channels of the input of this %s are unknown' % op
  if axis is None or np.size(axis) != 1:
    return None, 'the axis of this %s is not a constant' % op
  axis = int(np.ravel(axis)[0]) % len(source)
  sizes, why = _split_sizes(view, node, inputs, source[axis],
                            axis == len(source) - 1)
  if why is not None:
    return None, why
  return ChannelOp('split', node, [data], [], [], (axis, len(source), sizes),
                   rule), None


def _depthwise(view, node, rule):
  if not _nhwc(view, node):
    return None, 'only NHWC convolutions are shrunk'
  shape = view.shape(view.inputs(node)[1])
  if not shape or len(shape) != 4 or shape[-1] is None:
    return None, 'the depthwise filter shape is unknown'
  return ChannelOp('depthwise', node, [0], [], [], shape[-1], rule), None


def classify(view, node, carries):
  """(ChannelOp, None) if `node` keeps channels apart, else (None, why).

  Args:
    view: a channel view (see `tf1prune.channels`).
    node: one of `view`'s nodes.
    carries: `tensor -> bool`, whether an input carries channels.
  """
  op = view.op_type(node)
  rule = rule_of(op)
  if rule.kind in ('stop', 'layer'):
    return None, rule.why or '%s starts new channels' % op
  if rule.kind == 'identity_n':
    return ChannelOp('identity_n', node, [
        i for i, t in enumerate(view.inputs(node)) if carries(t)], [], [],
                     None, rule), None
  if rule.kind == 'split':   # several outputs: its input's shape
    return _split(view, node, rule)
  out = view.shape(view.output(node))
  if not out or out[-1] is None:
    return None, 'its output shape is unknown'
  channels = out[-1]
  if rule.kind == 'elementwise':
    return _elementwise(view, node, rule, channels, carries)
  if rule.kind == 'reduce':
    return _reduce(view, node, rule)
  if rule.kind == 'pool':
    if len(out) != 4 or not _nhwc(view, node):
      return None, 'only NHWC pooling is shrunk'
    return ChannelOp('pool', node, [0], [], [], None, rule), None
  if rule.kind == 'pad':
    return _pad(view, node, rule)
  if rule.kind == 'concat':
    return _concat(view, node, rule, carries)
  if rule.kind == 'reshape':
    return _reshape(view, node, rule, channels)
  if rule.kind == 'slice':
    return _slice(view, node, rule, channels)
  if rule.kind == 'spatial':
    return _spatial(view, node, rule, channels)
  if rule.kind == 'lrn':
    if len(out) != 4:
      return None, 'only an LRN of NHWC tensors is passed'
    return ChannelOp('lrn', node, [0], [], [], None, rule), None
  return _depthwise(view, node, rule)
