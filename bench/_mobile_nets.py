"""Mobile nets written as TF1 code with tf-slim and tf.nn, for the shrink.

    >>> import tensorflow.compat.v1 as tf
    >>> from bench._mobile_nets import build
    >>> with tf.Graph().as_default():
    ...   images, logits = build('mobilenet_v1', 32, num_classes=10)
    ...   logits.shape.as_list()
    [None, 10]

tf_slim has no MobileNet in its nets, so they are written here, each after
its paper at a reduced width: MobileNet v1 (depthwise separable blocks),
MobileNet v2 (inverted residuals, linear bottlenecks, relu6), an SE-ResNet
(basic blocks with squeeze-and-excitation gates), an EfficientNet-B0-style
net (MBConv blocks with SE, swish, 3x3 and 5x5 depthwise convs, residuals)
and a MobileNet-v3-small-style net (SE with hard-sigmoid, hard-swish). The
SE gate is `net * reshape(sigmoid(fc(fc(mean(net)))), [-1, 1, 1, C])`, as
the Keras and TF-Hub versions build it.

Every conv has batch norm, in inference mode (as at export) unless built
with `is_training=True` (to train); on TF 2.x, where `tf_slim.batch_norm`
cannot be built, `tf1prune.slim_compat.use_tf1prune_batch_norm()` puts
`tf1prune.batch_norm` in its place. The kernels (`weights`) are masked by
`tf1prune.pruning_scope()`, the logits' too (exclude them from pruning with
`do_not_prune=[logits]`); depthwise kernels (`depthwise_weights`) are not
masked: their channels follow the layer before.
"""

import contextlib

import tensorflow.compat.v1 as tf

import tf1prune

NAMES = ('mobilenet_v1', 'mobilenet_v2', 'se_resnet', 'efficientnet_b0',
         'mobilenet_v3_small')

# (stride, filters) of MobileNet v1's 13 depthwise separable blocks.
_V1 = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512),
       (1, 512), (1, 512), (1, 512), (1, 512), (2, 1024), (1, 1024)]
# (expansion, filters, repeats, stride) of MobileNet v2.
_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
# (expansion, filters, repeats, stride, kernel) of EfficientNet-B0.
_B0 = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
       (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]
# (kernel, expanded, filters, SE, hard-swish, stride) of MobileNet v3 small.
_V3 = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
       (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
       (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
       (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1),
       (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1),
       (5, 576, 96, True, True, 1)]


def _slim():
  import tf_slim  # pylint: disable=g-import-not-at-top
  return tf_slim


def _depth(filters, width, divisor=8):
  """`filters * width` rounded to a multiple of `divisor` (at least 8)."""
  scaled = filters * width
  rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
  return rounded + divisor if rounded < 0.9 * scaled else rounded


def swish(x):
  return x * tf.sigmoid(x)


def hard_sigmoid(x):
  return tf.nn.relu6(x + 3.0) / 6.0


def hard_swish(x):
  return x * hard_sigmoid(x)


def _se(net, ratio, gate, scope):
  """Squeeze and excitation: `net` times a per-channel gate in [0, 1]."""
  slim = _slim()
  channels = net.shape.as_list()[-1]
  with tf.variable_scope(scope):
    squeezed = tf.reduce_mean(net, [1, 2], name='squeeze')
    hidden = slim.fully_connected(squeezed, max(1, int(channels * ratio)),
                                  activation_fn=tf.nn.relu,
                                  normalizer_fn=None, scope='reduce')
    scale = slim.fully_connected(hidden, channels, activation_fn=gate,
                                 normalizer_fn=None, scope='expand')
    return net * tf.reshape(scale, [-1, 1, 1, channels])


def _mobilenet_v1(net, width):
  slim = _slim()
  net = slim.conv2d(net, _depth(32, width), 3, stride=2, scope='conv0')
  for i, (stride, filters) in enumerate(_V1):
    net = slim.separable_conv2d(net, None, 3, 1, stride=stride,
                                scope='block%d/depthwise' % (i + 1))
    net = slim.conv2d(net, _depth(filters, width), 1,
                      scope='block%d/pointwise' % (i + 1))
  return net


def _inverted_residual(net, expansion, filters, stride, kernel, act, se,
                       scope):
  """MobileNet v2 / MBConv block: expand 1x1, depthwise, (SE), project 1x1."""
  slim = _slim()
  inputs, channels = net, net.shape.as_list()[-1]
  with tf.variable_scope(scope):
    if expansion != 1:
      net = slim.conv2d(net, int(channels * expansion), 1,
                        activation_fn=act, scope='expand')
    net = slim.separable_conv2d(net, None, kernel, 1, stride=stride,
                                activation_fn=act, scope='depthwise')
    if se:
      net = _se(net, se[0] / float(net.shape.as_list()[-1]) if se[0] > 1
                else se[0], se[1], 'se')
    net = slim.conv2d(net, filters, 1, activation_fn=None, scope='project')
    if stride == 1 and channels == filters:
      net = tf.add(net, inputs, name='residual')
  return net


def _mobilenet_v2(net, width):
  slim = _slim()
  net = slim.conv2d(net, _depth(32, width), 3, stride=2, scope='conv0')
  block = 0
  for expansion, filters, repeats, stride in _V2:
    for r in range(repeats):
      block += 1
      net = _inverted_residual(net, expansion, _depth(filters, width),
                               stride if r == 0 else 1, 3, tf.nn.relu6, None,
                               'block%d' % block)
  return slim.conv2d(net, _depth(1280, max(width, 1.0)), 1, scope='conv_last')


def _se_resnet(net, width):
  slim = _slim()
  net = slim.conv2d(net, _depth(64, width), 3, scope='conv0')
  block = 0
  for filters, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2),
                          (256, 1)):
    block += 1
    filters = _depth(filters, width)
    with tf.variable_scope('block%d' % block):
      shortcut = net
      if stride != 1 or net.shape.as_list()[-1] != filters:
        shortcut = slim.conv2d(net, filters, 1, stride=stride,
                               activation_fn=None, scope='shortcut')
      residual = slim.conv2d(net, filters, 3, stride=stride, scope='conv1')
      residual = slim.conv2d(residual, filters, 3, activation_fn=None,
                             scope='conv2')
      residual = _se(residual, 0.25, tf.sigmoid, 'se')
      net = tf.nn.relu(shortcut + residual)
  return net


def _efficientnet_b0(net, width):
  slim = _slim()
  net = slim.conv2d(net, _depth(32, width), 3, stride=2, activation_fn=swish,
                    scope='stem')
  block = 0
  for expansion, filters, repeats, stride, kernel in _B0:
    for r in range(repeats):
      block += 1
      inputs = net.shape.as_list()[-1]
      net = _inverted_residual(net, expansion, _depth(filters, width),
                               stride if r == 0 else 1, kernel, swish,
                               (max(1, inputs // 4), tf.sigmoid),
                               'block%d' % block)
  return slim.conv2d(net, _depth(1280, width), 1, activation_fn=swish,
                     scope='head')


def _mobilenet_v3_small(net, width):
  slim = _slim()
  net = slim.conv2d(net, _depth(16, width), 3, stride=2,
                    activation_fn=hard_swish, scope='stem')
  for i, (kernel, expanded, filters, se, hs, stride) in enumerate(_V3):
    act = hard_swish if hs else tf.nn.relu
    expansion = _depth(expanded, width) / float(net.shape.as_list()[-1])
    net = _inverted_residual(
        net, expansion, _depth(filters, width), stride, kernel, act,
        (_depth(expanded * width / 4, 1), hard_sigmoid) if se else None,
        'block%d' % (i + 1))
  return slim.conv2d(net, _depth(576, width), 1, activation_fn=hard_swish,
                     scope='head')


_BODIES = {'mobilenet_v1': _mobilenet_v1, 'mobilenet_v2': _mobilenet_v2,
           'se_resnet': _se_resnet, 'efficientnet_b0': _efficientnet_b0,
           'mobilenet_v3_small': _mobilenet_v3_small}


def build(name, size, num_classes=10, width=0.5, batch=None,
          is_training=False, batch_norm_decay=0.999, images=None):
  """Builds net `name` on a new placeholder, kernels masked.

  Args:
    name: one of `NAMES`.
    size: input height and width.
    num_classes: outputs of the 1x1 logits conv.
    width: the width multiplier.
    batch: the placeholder's batch size (None: any).
    is_training: the batch norms' mode: False (the default) normalizes by
      the moving statistics, as at export; True by the batch's, and adds
      the moving statistics' updates to `tf.GraphKeys.UPDATE_OPS`, for a
      graph that trains (export it rebuilt with False).
    batch_norm_decay: the moving statistics' decay per step (slim's
      default; a short training wants less).
    images: a float32 [batch, size, size, 3] tensor to build on (a training
      pipeline's batches) instead of a new placeholder.

  Returns:
    (images placeholder `images` [batch, size, size, 3], or the `images`
    given, and logits tensor `output` [batch, num_classes]).

  Raises:
    ValueError: `name` is not one of `NAMES`.
  """
  if name not in _BODIES:
    raise ValueError('name must be one of %s, got %r' % (', '.join(NAMES),
                                                         name))
  slim = _slim()
  if images is None:
    images = tf.placeholder(tf.float32, [batch, size, size, 3],
                            name='images')
  compat = (contextlib.contextmanager(lambda: iter([None]))()
            if tf.__version__.startswith('1.')
            else tf1prune.graph.slim_compat.use_tf1prune_batch_norm())
  with compat:
    norm = slim.batch_norm
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                        normalizer_fn=norm, activation_fn=tf.nn.relu6), \
        slim.arg_scope([norm], is_training=is_training, scale=True,
                       decay=batch_norm_decay), \
        tf1prune.pruning_scope():
      net = _BODIES[name](images, width)
      net = tf.reduce_mean(net, [1, 2], keepdims=True, name='pool')
      net = slim.conv2d(net, num_classes, 1, activation_fn=None,
                        normalizer_fn=None, scope='logits')
  return images, tf.squeeze(net, [1, 2], name='output')
