"""The training view and the frozen view find the same channel groups.

`find_channel_groups` walks the training `tf.Graph`; the shrink's regions
come from `RegionWalk`, the same propagation (`Forward`) over the frozen,
stripped GraphDef of the same net; plain `Forward` runs over the frozen view
as it does over the training one. All read `tf1prune.channels`; here they
must tie the same (layer, channel) pairs together, on a MobileNet-v2-style
net with SE and swish and on a tf_slim ResNet v1.
"""

import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.channels import Forward
from tf1prune.export.shrink.frozen_graph import FrozenGraph
from tf1prune.export.shrink.prepare import prepare_graph_def
from tf1prune.export.shrink.regions import RegionWalk, find_layers
from tests.support.nets import small_resnet_v1

TF1 = tf.__version__.startswith('1.')


def _weight(scope, shape):
  with tf.variable_scope(scope):
    return tf1prune.apply_mask(tf.get_variable(
        'weights', shape, initializer=tf.glorot_uniform_initializer(seed=1)))


def _conv(x, n, scope, k=1, act=tf.nn.relu6):
  w = _weight(scope, [k, k, x.shape.as_list()[-1], n])
  y = tf.nn.conv2d(x, w, [1, 1, 1, 1], 'SAME', name=scope + '/Conv2D')
  return act(y) if act else y


def _dense(x, n, scope, act=None):
  y = tf.matmul(x, _weight(scope, [x.shape.as_list()[-1], n]),
                name=scope + '/MatMul')
  return act(y) if act else y


def _swish(h):
  return tf.nn.swish(h) if TF1 else tf.nn.silu(h)


def _mobile_block(x, expand, scope):
  channels = x.shape.as_list()[-1]
  h = _conv(x, expand, scope + '/expand')
  w = _weight(scope + '/dw', [3, 3, expand, 1])
  h = _swish(tf.nn.depthwise_conv2d(h, w, [1, 1, 1, 1], 'SAME',
                                    name=scope + '/dw/depthwise'))
  gate = tf.reduce_mean(h, [1, 2])
  gate = _dense(gate, 4, scope + '/se_reduce', tf.nn.relu)
  gate = tf.sigmoid(_dense(gate, expand, scope + '/se_expand'))
  h = h * tf.reshape(gate, [-1, 1, 1, expand])
  h = _conv(h, channels, scope + '/project', act=None)
  return x + h


def _mobile_net():
  x = tf.placeholder(tf.float32, [2, 8, 8, 3], name='x')
  net = _conv(x, 8, 'stem', 3, act=None)
  net = _mobile_block(net, 16, 'block1')
  net = _mobile_block(net, 12, 'block2')
  net = tf.nn.relu6(net + 3.0) / 6.0 * net          # hard swish
  net = _conv(net, 10, 'head', act=_swish)
  logits = _dense(tf.reduce_mean(net, [1, 2]), 5, 'logits')
  return tf.nn.softmax(logits, name='y')


def _slim_resnet():
  x = tf.placeholder(tf.float32, [2, 32, 32, 3], name='x')
  return tf.identity(small_resnet_v1(x, 7), name='y')


def _layer_op(graph, record):
  """The Conv2D / MatMul / depthwise op that reads a masked weight."""
  pending = [record.masked_weight]
  while pending:
    for op in pending.pop().consumers():
      if op.type in ('Conv2D', 'MatMul', 'DepthwiseConv2dNative'):
        return op.name
      if op.type == 'Identity':
        pending.append(op.outputs[0])
  raise ValueError(record.name)


def _training_partition(graph):
  parts = {}
  records = {r.name: r for r in tf1prune.masked_weight_records(graph)}
  for index, group in enumerate(tf1prune.find_channel_groups(graph)):
    for member in group.members:
      op = _layer_op(graph, records[member.name])
      for channel, unit in enumerate(member.units):
        parts.setdefault((index, unit), set()).add((op, channel))
  return set(frozenset(p) for p in parts.values())


def _frozen_view(graph, output):
  with tf.Session(graph=graph) as sess:
    sess.run(tf.global_variables_initializer())
    frozen = tf.graph_util.convert_variables_to_constants(
        sess, graph.as_graph_def(), [output])
  stripped = tf1prune.strip_pruning_vars_fn(frozen, [output])
  return FrozenGraph(prepare_graph_def(stripped, [output]), [output])


def _forward_partition(view):
  """`Forward` over the frozen view, seeded at every layer's output."""
  spread = {}

  def keep(node, ids):
    spread[node.name] = ids
    return ids

  walk = Forward(view, keep)
  seeds = {}
  for name, layer in find_layers(view)[0].items():
    if layer.kind != 'depthwise':
      seeds[name] = walk.seed(name, view.shapes[name][-1])
  walk.run()
  parts = {}
  for op, ids in list(seeds.items()) + list(spread.items()):
    for channel, i in enumerate(ids):
      parts.setdefault(walk.sets.find(i), set()).add((op, channel))
  return set(frozenset(p) for p in parts.values())


def _frozen_partition(view):
  layers, _ = find_layers(view)
  walk = RegionWalk(view, layers)
  parts, done = {}, set()
  for name, layer in layers.items():
    if layer.kind == 'depthwise' or name in done:
      continue
    region = walk.region(name)
    done.update(region.ids)
    tensors = [(l.node.name, l.node.name) for l in region.sources]
    tensors += [(op.node.name, op.node.input[0]) for op in region.ops
                if op.kind == 'depthwise']
    for op, tensor in tensors:
      for channel, cls in enumerate(region.classes(tensor)):
        parts.setdefault((name, cls), set()).add((op, channel))
  return set(frozenset(p) for p in parts.values())


@pytest.mark.parametrize('net', ['mobile_se_swish', 'slim_resnet_v1'])
def test_training_and_frozen_views_tie_the_same_channels(net):
  with tf.Graph().as_default() as graph:
    output = (_mobile_net() if net == 'mobile_se_swish' else _slim_resnet())
    training = _training_partition(graph)
    view = _frozen_view(graph, output.op.name)
  assert len(training) > 20
  assert _frozen_partition(view) == training
  assert _forward_partition(view) == training


def test_the_logits_of_a_softmax_are_the_model_outputs():
  with tf.Graph().as_default() as graph:
    _mobile_net()
    groups = tf1prune.find_channel_groups(graph)
  marked = [(str(g), g.outputs) for g in groups if g.outputs]
  assert marked == [('5 channels: logits/weights',
                     'they reach Softmax (y)')]
