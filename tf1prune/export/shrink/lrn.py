"""An LRN whose input lost channels, rewritten exactly: the kept channels put
back in their places, the LRN, the kept channels taken out again.

    >>> import numpy as np
    >>> from tf1prune.export.shrink.lrn import places
    >>> places(np.array([0, 1, 3]), 5).tolist()     # 3 kept of 5; 3: a zero
    [0, 1, 3, 2, 3]

TF's LRN (NHWC, over the last axis) computes, for channel c of its input,
`y[c] = x[c] / (bias + alpha * sum(x[e]**2 for |e - c| <= depth_radius)) **
beta`. A removed channel that is 0 at the LRN adds nothing to those sums and
gives 0 (`tf1prune.channels`' LRN row), so it may go; but the kept channels'
indices change, and the LRN op sums over index windows. `rewrite(g, node,
kept, channels)` therefore runs the same LRN over the original channels,
with zeros where the removed ones were:

    GatherV2(LRN(GatherV2(Pad(x, one zero channel), places)), kept)

named `<lrn>/pad`, `<lrn>/places` (the gather putting each kept channel in
its place and the zero channel in the others, with `<lrn>/places/indices`
and `<lrn>/axis`), `<lrn>/full` (the LRN, its attributes unchanged) and the
LRN's own name for the last gather (`<lrn>/kept`), so that its consumers
read it as before. Every kept channel's output is the LRN's own: the same
op on the same values. The gathers only move values; the LRN costs what it
cost before (the shrink report lists every LRN, with the FLOPs of its band
sums, `2 * (2 * depth_radius + 1)` per channel and position).
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink.frozen_graph import split_input

SUFFIXES = ('/pad', '/pad/paddings', '/places', '/places/indices', '/axis',
            '/full', '/kept')


def rewritten_lrn(g, name):
  """The LRN that node `name` of `g` was rewritten from, or None."""
  for suffix in SUFFIXES:
    if name.endswith(suffix) and name[:-len(suffix)] in g.lrn:
      return name[:-len(suffix)]
  return name if name in g.lrn else None


def places(kept, channels):
  """int32 [channels]: for each original channel, its index among the kept
  ones, or `len(kept)` (the zero channel) where it was removed."""
  kept = np.asarray(kept)
  where = np.full(channels, len(kept), np.int32)
  where[kept] = np.arange(len(kept), dtype=np.int32)
  return where


def flops(depth_radius, channels, positions):
  """The FLOPs of an LRN's band sums: `2 * (2 r + 1)` per channel and
  position (None where the positions are unknown)."""
  if positions is None:
    return None
  return 2 * (2 * int(depth_radius) + 1) * int(channels) * int(positions)


def _const(name, value, dtype):
  node = tf.NodeDef(name=name, op='Const')
  node.attr['dtype'].type = tf.as_dtype(dtype).as_datatype_enum
  node.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(
      np.asarray(value, dtype), dtype=dtype, shape=np.shape(value)))
  return node


def _gather(name, params, indices, axis, dtype):
  node = tf.NodeDef(name=name, op='GatherV2', input=[params, indices, axis])
  node.attr['Tparams'].type = tf.as_dtype(dtype).as_datatype_enum
  node.attr['Tindices'].type = tf.int32.as_datatype_enum
  node.attr['Taxis'].type = tf.int32.as_datatype_enum
  node.attr['batch_dims'].i = 0
  return node


def rewrite(g, node, kept, channels):
  """Rewrites LRN `node` of `FrozenGraph` `g` over the channels `kept`.

  Args:
    g: the `FrozenGraph`.
    node: the LRN NodeDef; its input already holds only the kept channels.
    kept: int array, the original indices of the kept channels, ascending.
    channels: how many channels the LRN had.

  Returns:
    The name of the constant holding `kept`.
  """
  dtype = g.attr(node, 'T', np.float32)   # a frozen graph may leave defaults
  base, source = node.name, node.input[0]
  full = tf.NodeDef()
  full.CopyFrom(node)
  full.name, full.input[:] = base + '/full', [base + '/places']
  pad = tf.NodeDef(name=base + '/pad', op='Pad',
                   input=[source, base + '/pad/paddings'])
  pad.attr['T'].type = tf.as_dtype(dtype).as_datatype_enum
  pad.attr['Tpaddings'].type = tf.int32.as_datatype_enum
  new = [
      _const(base + '/pad/paddings', [[0, 0], [0, 0], [0, 0], [0, 1]],
             np.int32),
      pad,
      _const(base + '/axis', 3, np.int32),
      _const(base + '/places/indices', places(kept, channels), np.int32),
      _gather(base + '/places', base + '/pad', base + '/places/indices',
              base + '/axis', dtype),
      full,
      _const(base + '/kept', np.asarray(kept, np.int32), np.int32),
  ]
  g.users[split_input(source)[0]] = [
      u for u in g.users[split_input(source)[0]] if u[0] is not node]
  for added in new:
    g.add(added)
  node.Clear()
  node.CopyFrom(_gather(base, base + '/full', base + '/kept', base + '/axis',
                        dtype))
  g.users[base + '/full'].append((node, 0, 0))
  g.users[base + '/kept'].append((node, 1, 0))
  g.users[base + '/axis'].append((node, 2, 0))
  shape = g.shapes.get(base)
  if shape:
    g.shapes[base + '/pad'] = shape[:-1] + [len(kept) + 1]
    g.shapes[base + '/places'] = shape[:-1] + [channels]
    g.shapes[base + '/full'] = shape[:-1] + [channels]
    g.shapes[base] = shape[:-1] + [len(kept)]
  return base + '/kept'
