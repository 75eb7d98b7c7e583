"""What removed channels gave a padded conv, as extra input channels of it.

    >>> import numpy as np
    >>> from tf1prune.export.shrink.extra_channels import extra_channels
    >>> kernel = np.ones([3, 3, 2, 1])            # two removed input channels
    >>> pattern, rows, _ = extra_channels(np.array([[[2.0, 0.5]]]), kernel)
    >>> pattern is None, rows.shape, float(rows[0, 0, 0, 0])   # ones channel
    (True, (3, 3, 1, 1), 2.5)

A removed input channel of a conv that pads with zeros is not a constant the
bias can take: near the borders some taps read padding. Its exact
contribution is a conv of the removed values, so the conv gets it by reading
them itself, folded into as few extra input channels as there are distinct
value vectors over the positions:

    conv(concat([x_kept, ones * pattern]), concat([w_kept, rows], axis=2))

`ones` is `Fill(Shape(x_kept[..., :1]), 1)` (any batch size, any height and
width) where the input's shape is not known; where it is (batch size
included), `ones * pattern` is one `[N, H, W, k]` constant (`.../map`),
built once: no op runs per call but the ConcatV2; `pattern` (`[1, H, W, k]`, left out when it is all ones) holds the
indicator of each distinct value vector, or the removed values themselves
when there are fewer channels than vectors; `rows` is what each extra channel
is worth to the conv. Every deployment stack computes this form exactly.
With objective 'flops' the shrink uses it only where the cheaper border map
(`border_maps`: the same values added with the conv's bias, no
multiply-add) cannot be used: the conv's output height or width is not
static, or the conv is a graph output.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.names import split_input

SUFFIX = '/shrink_ones'


def extra_channels(x, kernel, fold=False):
  """The extra input channels that give what removed channels `x` gave.

  Args:
    x: float64 `[1, 1, R]` (a constant per channel) or `[H, W, R]` (a map):
      the removed channels' values at the conv's input.
    kernel: `[kh, kw, R, O]`, the conv's weights on those channels.
    fold: the conv does not pad, so that a value the same at every position
      can go to its bias: the most frequent value vector (the interior) is
      taken out of the map and returned as `base`, one channel fewer.

  Returns:
    (pattern, rows, base): `pattern` None (one channel of ones) or float64
    `[H, W, k]`; `rows` float64 `[kh, kw, k, O]`, the extra weights; `base`
    None or float64 `[R]`, the value taken out (its contribution is the same
    at every position, for the bias).
  """
  kernel = np.asarray(kernel, np.float64)
  flat = x.reshape(-1, x.shape[-1])
  vectors, inverse, counts = np.unique(flat, axis=0, return_inverse=True,
                                       return_counts=True)
  base = None
  if fold and len(vectors) > 1:
    base = vectors[int(np.argmax(counts))]
    vectors = vectors - base
  if len(vectors) == 1:
    return None, np.tensordot(vectors[0], kernel, axes=([0], [2]))[:, :, None], base
  inverse = inverse.reshape(-1)
  used = [q for q in range(len(vectors)) if vectors[q].any()]
  if len(used) >= x.shape[-1]:
    return np.array(x if base is None else x - base, np.float64), kernel, base
  pattern = np.stack([(inverse == q).reshape(x.shape[:2]) for q in used],
                     axis=-1).astype(np.float64)
  rows = np.tensordot(vectors[used], kernel, axes=([1], [2]))  # k, kh, kw, O
  return pattern, np.transpose(rows, (1, 2, 0, 3)), base


def _const(value, dtype):
  node = tf.NodeDef(op='Const')
  node.attr['dtype'].type = tf.as_dtype(dtype).as_datatype_enum
  node.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(
      value, dtype=dtype, shape=np.shape(value)))
  return node


def _op(op, inputs, **types):
  node = tf.NodeDef(op=op, input=inputs)
  for key, dtype in types.items():
    node.attr[key].type = tf.as_dtype(dtype).as_datatype_enum
  return node


def _nodes(dtype, form):
  """{suffix: NodeDef} of the extra channels of `form` (None: ones, 'mul':
  ones * pattern, 'pad': padded ones). Inputs are suffixes, '.' the data
  input, '>' the tensor whose N, H, W the ones take."""
  nodes = {
      '/begin': _const([0, 0, 0, 0], np.int32),
      '/end': _const([0, 0, 0, 1], np.int32),
      '/strides': _const([1, 1, 1, 1], np.int32),
      '/slice': _op('StridedSlice', ['>', '/begin', '/end', '/strides'],
                    T=dtype, Index=tf.int32),
      '/shape': _op('Shape', ['/slice'], T=dtype, out_type=tf.int32),
      '/one': _const(np.ones([], dtype), dtype),
      '/fill': _op('Fill', ['/shape', '/one'], T=dtype, index_type=tf.int32),
      '/axis': _const(np.int32(3), np.int32),
      '': _op('ConcatV2', ['.', {None: '/fill', 'mul': '/mul',
                                 'pad': '/pad'}[form], '/axis'],
              T=dtype, Tidx=tf.int32),
  }
  nodes['/slice'].attr['begin_mask'].i = 7     # N, H, W whole; channel 0:1
  nodes['/slice'].attr['end_mask'].i = 7
  nodes[''].attr['N'].i = 2
  if form == 'mul':
    nodes['/mul'] = _op('Mul', ['/fill', '/pattern'], T=dtype)
  if form == 'pad':
    nodes['/pad'] = _op('Pad', ['/fill', '/paddings'], T=dtype,
                        Tpaddings=tf.int32)
  return nodes


def append_channels(g, layer, pattern, rows, pad=None):
  """Feeds conv `layer` its input plus the extra channels, `rows` appended
  to its weight (input axis).

  Args:
    g: the `FrozenGraph`.
    layer: the conv `Layer`.
    pattern: None or float64 `[H, W, k]`, as `extra_channels` returns.
    rows: `[kh, kw, k, O]`.
    pad: None, or (tensor, paddings) when `pattern` is ones padded with
      zeros: the ones then take their shape from that tensor and are padded
      by the int32 `[4, 2]` paddings, with no pattern constant.

  Returns:
    The names of the new float constants.
  """
  weight = g.value(layer.weight)
  dtype = weight.dtype
  source = layer.node.input[0]
  base, i = layer.node.name + SUFFIX, 1
  while any(n == base or n.startswith(base + '/') for n in g.nodes):
    base, i = '%s_%d' % (layer.node.name + SUFFIX, i), i + 1
  shape = g.shapes.get(split_input(source)[0])
  if split_input(source)[1] == 0 and shape and None not in shape:
    return _append_constant(g, layer, base, shape, pattern, rows, pad)
  form = 'pad' if pad is not None else (None if pattern is None else 'mul')
  nodes = _nodes(dtype, form)
  if form == 'mul':
    nodes['/pattern'] = _const(pattern[None].astype(dtype), dtype)
  if form == 'pad':
    nodes['/paddings'] = _const(np.asarray(pad[1], np.int32), np.int32)
  probe = pad[0] if pad is not None else source
  for suffix, node in nodes.items():
    node.name = base + suffix
    node.input[:] = [{'.': source, '>': probe}.get(ref, base + ref)
                     for ref in node.input]
  _insert(g, layer, base, nodes)
  name, port = split_input(source)
  shape = g.shapes.get(name) if port == 0 else None
  probe_shape = g.shapes.get(split_input(probe)[0])
  if probe_shape:
    g.shapes[base + '/slice'] = probe_shape[:-1] + [1]
    g.shapes[base + '/fill'] = probe_shape[:-1] + [1]
  if shape:
    g.shapes[base + ('/mul' if form == 'mul' else '/pad')] = shape[:-1] + [1]
    g.shapes[base] = shape[:-1] + [None if shape[-1] is None else
                                   shape[-1] + rows.shape[2]]
  g.set_value(layer.weight, np.concatenate([weight, rows.astype(dtype)],
                                           axis=2))
  g.extra.setdefault(layer.node.name, []).append((rows.shape[2], pattern))
  return [base + '/one'] + ([base + '/pattern'] if form == 'mul' else [])


def _insert(g, layer, base, nodes):
  """Adds `nodes` to `g` and makes `base` (their ConcatV2) `layer`'s input."""
  for node in nodes.values():
    added = g.graph_def.node.add()
    added.CopyFrom(node)
    g.nodes[added.name] = added
  for suffix in nodes:
    node = g.nodes[base + suffix]
    for index, ref in enumerate(node.input):
      name, port = split_input(ref)
      g.users[name].append((node, index, port))
  name, _ = split_input(layer.node.input[0])
  g.users[name] = [u for u in g.users[name] if u[0] is not layer.node]
  g.users[base].append((layer.node, 0, 0))
  layer.node.input[0] = base


def _append_constant(g, layer, base, shape, pattern, rows, pad):
  """`append_channels` where the input's shape [N, H, W, C] is known: the
  extra channels are one `[N, H, W, k]` constant, built once, concatenated
  to the data (no per-call op besides the ConcatV2)."""
  weight = g.value(layer.weight)
  dtype = weight.dtype
  if pad is not None:
    size = spatial_size_of(g, pad[0])
    value = np.pad(np.ones(size + [1]), [tuple(p) for p in
                                        np.asarray(pad[1])[1:3].tolist()] +
                   [(0, 0)], 'constant')
  elif pattern is None:
    value = np.ones(shape[1:3] + [1])
  else:
    value = pattern
  value = np.broadcast_to(value[None], [shape[0]] + list(value.shape))
  nodes = {'/map': _const(value.astype(dtype), dtype),
           '/axis': _const(np.int32(3), np.int32),
           '': _op('ConcatV2', [layer.node.input[0], '/map', '/axis'],
                   T=dtype, Tidx=tf.int32)}
  nodes[''].attr['N'].i = 2
  for suffix, node in nodes.items():
    node.name = base + suffix
    node.input[:] = [ref if suffix == '' and index == 0 else base + ref
                     for index, ref in enumerate(node.input)]
  _insert(g, layer, base, nodes)
  g.shapes[base + '/map'] = list(value.shape)
  g.shapes[base] = shape[:-1] + [shape[-1] + rows.shape[2]]
  g.set_value(layer.weight, np.concatenate([weight, rows.astype(dtype)],
                                           axis=2))
  g.extra.setdefault(layer.node.name, []).append((rows.shape[2], pattern))
  return [base + '/map']


def spatial_size_of(g, tensor):
  """[H, W] of `tensor` (a name with maybe a port) from `g.shapes`."""
  return list(g.shapes[g.key(tensor)][1:3])
