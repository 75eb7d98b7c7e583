"""The set of frozen graphs the deployment check converts, each with a control.

    >>> import json, os, tempfile
    >>> from tf1prune.deploy._models import MODELS, build
    >>> sorted(MODELS)[:2]
    ['cnn_element', 'cnn_filter_shrunk']
    >>> out = tempfile.mkdtemp()
    >>> spec = build('cnn_element', out)
    >>> spec['inputs'], spec['outputs'], os.path.exists(spec['pb']), os.path.exists(spec['control'])
    ([['x', [2, 12, 12, 3]]], ['logits/BiasAdd'], True, True)

Every model is built with tf1prune's public API in the running stack (TF 1.15
or TF 2.x), with random weights and masks at a fixed seed: `<name>.pb` is what
`strip_checkpoint` (and `shrink_pb` for `*_shrunk`) writes; `<name>_control.pb`
is the never-pruned twin, the same graph with every mask at one, frozen by
TensorFlow's own `convert_variables_to_constants`. A converter that fails on
both has met its own limit, not tf1prune's.
"""

import os
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.export import graph_io as _graph_io

_SEED = 7


def _cnn(x):
  # Non-zero biases: a pruned filter's channel is then a constant that the
  # shrink folds into the next layer (a border map where padding is SAME).
  bias = tf.random_uniform_initializer(0.05, 0.3)
  net = tf1prune.masked_conv2d(x, 16, 3, biases_initializer=bias, scope='conv1')
  net = tf.nn.max_pool(net, [1, 2, 2, 1], [1, 2, 2, 1], 'SAME')
  net = tf1prune.masked_conv2d(net, 24, 3, biases_initializer=bias,
                               scope='conv2')
  net = tf.reshape(net, [int(x.shape[0]), -1])
  return tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                         scope='logits')


def _batch_norm(net, scope):
  """Inference-form fused batch norm with variable statistics."""
  channels = int(net.shape[-1])
  rng = np.random.RandomState(sum(map(ord, scope)))
  with tf.variable_scope(scope):
    params = [tf.get_variable(name, initializer=value.astype(np.float32))
              for name, value in (
                  ('gamma', rng.uniform(0.5, 1.5, channels)),
                  ('beta', rng.uniform(-0.5, 0.5, channels)),
                  ('moving_mean', rng.uniform(-0.2, 0.2, channels)),
                  ('moving_variance', rng.uniform(0.5, 2.0, channels)))]
  out, _, _ = tf.nn.fused_batch_norm(net, params[0], params[1], params[2],
                                     params[3], is_training=False)
  return out


def _resnet(x):
  conv = lambda net, n, k, s: tf1prune.masked_conv2d(   # noqa: E731
      net, n, k, activation_fn=None, biases_initializer=None, scope=s)
  stem = tf.nn.relu(_batch_norm(conv(x, 16, 3, 'stem'), 'stem/BatchNorm'))
  branch = tf.nn.relu(_batch_norm(conv(stem, 8, 3, 'unit/conv1'),
                                  'unit/conv1/BatchNorm'))
  branch = _batch_norm(conv(branch, 16, 3, 'unit/conv2'), 'unit/conv2/BatchNorm')
  net = tf.nn.relu(stem + branch)
  net = tf.reduce_mean(net, [1, 2])
  return tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                         scope='logits')


def _conv_bn(net, outputs, kernel, scope, stride=1, padding='SAME'):
  """A slim-style conv without bias, then an inference batch norm."""
  net = tf1prune.masked_conv2d(net, outputs, kernel, stride=stride,
                               padding=padding, activation_fn=None,
                               biases_initializer=None, scope=scope)
  return _batch_norm(net, scope + '/BatchNorm')


def _slim_pad(x):
  """slim's resnet_utils.conv2d_same: an explicit Pad, a stride-2 VALID conv."""
  net = tf.nn.relu(_conv_bn(x, 16, 3, 'conv1'))
  net = tf.pad(net, [[0, 0], [1, 1], [1, 1], [0, 0]])
  net = tf.nn.relu(_conv_bn(net, 24, 3, 'conv2', 2, 'VALID'))
  net = tf.reduce_mean(net, [1, 2])
  return tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                         scope='logits')


def _mobilenet(x):
  """conv, then a depthwise 3x3 (SAME: it pads) and a pointwise 1x1 conv.

  conv1's biases are of both signs: a removed channel that relu6 makes 0
  passes the depthwise as a constant; one that is not 0 is a border map
  after it, which the shrink adds with pointwise's bias (one constant map
  behind a Reshape, so that TOCO does not fold it into the bias)."""
  bias = tf.random_uniform_initializer(0.05, 0.3)
  net = tf1prune.masked_conv2d(x, 16, 3, biases_initializer=(
      tf.random_uniform_initializer(-0.3, 0.3)),
                               activation_fn=tf.nn.relu6, scope='conv1')
  with tf.variable_scope('depthwise'):
    kernel = tf.get_variable('depthwise_weights', [3, 3, 16, 1])
    net = tf.nn.depthwise_conv2d(net, kernel, [1, 1, 1, 1], 'SAME')
    net = tf.nn.relu6(tf.nn.bias_add(net, tf.get_variable(
        'biases', [16], initializer=bias)))
  net = tf1prune.masked_conv2d(net, 24, 1, biases_initializer=bias,
                               scope='pointwise')
  net = tf.reduce_mean(net, [1, 2])
  return tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                         scope='logits')


def _lstm(x, dynamic):
  cell = tf1prune.MaskedBasicLSTMCell(16)
  if dynamic:
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    last = outputs[:, -1]
  else:
    outputs, _ = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
    last = outputs[-1]
  return tf1prune.masked_fully_connected(last, 4, activation_fn=None,
                                         scope='logits')


# The same channels of the residual add's two members: the stem (it also
# feeds unit/conv1, which pads) and unit/conv2.
_COUPLED = {'stem': [1, 4, 6, 9, 10, 13], 'unit/conv2': [1, 4, 6, 9, 10, 13]}

# name -> (input shape, build fn, granularity hparam, sparsity, shrink,
#          {scope: output channels whose mask is then set to 0})
MODELS = {
    'cnn_element': ([2, 12, 12, 3], _cnn, '', 0.9, False, None),
    'cnn_filter_shrunk': ([2, 12, 12, 3], _cnn, 'conv.*:filter', 0.5, True,
                          None),
    'resnet_bn_shrunk': ([2, 12, 12, 3], _resnet, 'unit/conv1:filter', 0.5,
                         True, None),
    'resnet_coupled_shrunk': ([2, 12, 12, 3], _resnet, '', 0.0, True,
                              _COUPLED),
    'slim_pad_shrunk': ([2, 13, 13, 3], _slim_pad, 'conv1:filter', 0.5, True,
                        None),
    'mobilenet_dw_shrunk': ([2, 12, 12, 3], _mobilenet, 'conv1:filter', 0.5,
                            True, None),
    'lstm_static': ([2, 5, 6], lambda x: _lstm(x, False), '', 0.8, False,
                    None),
    'lstm_dynamic': ([2, 5, 6], lambda x: _lstm(x, True), '', 0.8, False,
                     None),
}


def _zero_channels(sess, graph, zeroed):
  """Sets the masks of output channels `zeroed` ({scope: [channel]}) to 0."""
  for record in tf1prune.masked_weight_records(graph):
    scope = record.name.rsplit('/', 1)[0]
    if scope in (zeroed or {}):
      mask = sess.run(record.mask)
      mask[..., zeroed[scope]] = 0.0
      record.mask.load(mask, sess)


def build(name, out_dir):
  """Builds model `name` into `out_dir`; returns its spec dict.

  The spec: `pb`, `control` (paths), `inputs` ([[name, shape]]), `outputs`
  (node names), `shrink` (the shrink report as text, or None).
  """
  shape, fn, granularity, sparsity, shrink, zeroed = MODELS[name]
  train_dir = tempfile.mkdtemp(prefix=name, dir=out_dir)
  with tf.Graph().as_default() as graph:
    tf.set_random_seed(_SEED)
    step = tf.train.get_or_create_global_step()
    x = tf.placeholder(tf.float32, shape, name='x')
    logits = fn(x)
    output = logits.op.name
    hparams = tf1prune.get_pruning_hparams().parse(
        'granularity_map=[%s]' % granularity if granularity else '')
    pruning = tf1prune.Pruning(hparams, global_step=step,
                               sparsity=tf.constant(sparsity))
    update = pruning.mask_update_op()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      control = tf.graph_util.convert_variables_to_constants(
          sess, graph.as_graph_def(), [output])
      sess.run(update)
      _zero_channels(sess, graph, zeroed)
      tf.train.Saver().save(sess, os.path.join(train_dir, 'model.ckpt'),
                            global_step=step)
  spec = {'pb': os.path.join(out_dir, name + '.pb'),
          'control': os.path.join(out_dir, name + '_control.pb'),
          'inputs': [['x', shape]], 'outputs': [output], 'shrink': None}
  # Attributes at their default are left out, as tf1prune's own files do,
  # so that the control made on TF 2.x loads on TF 1.15 too.
  _graph_io.strip_default_attrs(control, _graph_io.op_defs(control))
  with open(spec['control'], 'wb') as f:
    f.write(control.SerializeToString())
  tf1prune.strip_checkpoint(train_dir, [output], spec['pb'])
  if shrink:
    spec['shrink'] = tf1prune.shrink_pb(spec['pb'], [output]).format_table()
  return spec
