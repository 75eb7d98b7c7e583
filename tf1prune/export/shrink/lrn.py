"""An LRN whose input lost channels, rewritten exactly over the kept ones.

    >>> import numpy as np
    >>> from tf1prune.export.shrink.lrn import band
    >>> band(np.array([0, 1, 3]), depth_radius=1, alpha=2.0).tolist()
    [[2.0, 2.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 2.0]]

TF's LRN (NHWC, over the last axis) computes, for channel c of its input,
`y[c] = x[c] / (bias + alpha * sum(x[e]**2 for |e - c| <= depth_radius)) **
beta`. A removed channel that is 0 at the LRN adds nothing to those sums and
gives 0 (`tf1prune.channels`' LRN row), so it may go; but the kept channels'
indices change, and the LRN op sums over index windows. Over the kept
channels K (their indices in the original input) the sums are a 1x1 conv of
`x**2` with `band(K)`, so `rewrite(g, node, kept)` turns the LRN node into

    Mul(x, Pow(AddV2(Conv2D(Square(x), band(K)), bias), -beta))

named `<lrn>/square`, `<lrn>/band` (with its weight `<lrn>/band/weight`),
`<lrn>/sum`, `<lrn>/scale` and the LRN's own name for the `Mul`, so its
consumers read it as before. All are stock ops of every deployment stack.
The band conv costs `2 * H * W * |K|**2` FLOPs per example: the shrink
report lists it as a layer of its own, op `LRN`, with nothing before.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.shrink.frozen_graph import split_input

SUFFIXES = ('/square', '/band', '/band/weight', '/sum', '/sum/bias',
            '/scale', '/scale/exponent')


def rewritten_lrn(g, name):
  """The LRN that node `name` of `g` was rewritten from, or None."""
  for suffix in SUFFIXES:
    if name.endswith(suffix) and name[:-len(suffix)] in g.lrn:
      return name[:-len(suffix)]
  return name if name in g.lrn else None


def band(kept, depth_radius, alpha):
  """float64 `[K, K]`: `alpha` where two kept channels are within
  `depth_radius` of each other in the original indexing, else 0."""
  kept = np.asarray(kept)
  return np.where(np.abs(kept[:, None] - kept[None, :]) <= depth_radius,
                  float(alpha), 0.0)


def _const(name, value, dtype):
  node = tf.NodeDef(name=name, op='Const')
  node.attr['dtype'].type = tf.as_dtype(dtype).as_datatype_enum
  node.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(
      np.asarray(value, dtype), dtype=dtype, shape=np.shape(value)))
  return node


def _op(name, op, inputs, dtype):
  node = tf.NodeDef(name=name, op=op, input=inputs)
  node.attr['T'].type = tf.as_dtype(dtype).as_datatype_enum
  return node


def rewrite(g, node, kept):
  """Rewrites LRN `node` of `FrozenGraph` `g` over the channels `kept`.

  Args:
    g: the `FrozenGraph`.
    node: the LRN NodeDef; its input already holds only the kept channels.
    kept: int array, the original indices of the kept channels, ascending.

  Returns:
    The name of the band conv's weight constant.
  """
  attr = lambda key, default: g.attr(node, key, default)
  dtype = attr('T', np.float32)   # a frozen graph may leave out defaults
  base, source = node.name, node.input[0]
  weight = band(kept, attr('depth_radius', 5), attr('alpha', 1.0))
  new = [
      _op(base + '/square', 'Square', [source], dtype),
      _const(base + '/band/weight', weight[None, None], dtype),
      _op(base + '/band', 'Conv2D', [base + '/square', base + '/band/weight'],
          dtype),
      _const(base + '/sum/bias', attr('bias', 1.0), dtype),
      _op(base + '/sum', 'AddV2', [base + '/band', base + '/sum/bias'], dtype),
      _const(base + '/scale/exponent', -attr('beta', 0.5), dtype),
      _op(base + '/scale', 'Pow', [base + '/sum', base + '/scale/exponent'],
          dtype),
  ]
  conv = new[2]
  conv.attr['strides'].list.i.extend([1, 1, 1, 1])
  conv.attr['padding'].s = b'VALID'
  conv.attr['data_format'].s = b'NHWC'
  g.users[split_input(source)[0]] = [
      u for u in g.users[split_input(source)[0]] if u[0] is not node]
  for added in new:
    g.add(added)
  node.attr.clear()
  node.attr['T'].type = tf.as_dtype(dtype).as_datatype_enum
  node.op = 'Mul'
  node.input[:] = [source, base + '/scale']
  g.users[split_input(source)[0]].append((node, 0, split_input(source)[1]))
  g.users[base + '/scale'].append((node, 1, 0))
  shape = g.shapes.get(base)
  if shape:
    shape = shape[:-1] + [len(kept)]
    for suffix in ('/square', '/band', '/sum', '/scale', ''):
      g.shapes[base + suffix] = shape
  return base + '/band/weight'
