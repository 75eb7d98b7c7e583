"""Coupled output channels of a Keras model: which kernels go together.

    >>> import keras
    >>> from tf1prune.keras.shrink.groups import find_channel_groups
    >>> x = keras.Input((8, 8, 3))
    >>> a = keras.layers.Conv2D(8, 3, padding='same', name='a')(x)
    >>> b = keras.layers.Conv2D(4, 3, padding='same', name='b')(a)
    >>> c = keras.layers.Conv2D(8, 1, name='c')(b)
    >>> y = keras.layers.ReLU()(keras.layers.Add()([a, c]))
    >>> model = keras.Model(x, keras.layers.GlobalAveragePooling2D()(y))
    >>> for group in find_channel_groups(model):
    ...   print(group)
    8 channels: a/kernel, c/kernel
    4 channels: b/kernel

The Keras side of `tf1prune.find_channel_groups`: the same `GroupWalk`
(`tf1prune.channels.groups`) over the model's `LayerView`, so a Keras model
and a TF graph of the same layers have the same groups, blocked and output
groups included. A conv or dense kernel (`Conv2D`, `Conv1D`, `Dense`, a
`SeparableConv2D`'s pointwise kernel) writes the channels of its layer's
output, a transposed conv's kernel `[kh, kw, out, in]` along axis -2; a
depthwise kernel (`DepthwiseConv2D`, a `SeparableConv2D`'s depthwise
kernel, a `Conv2D` whose `groups` are its input channels) is a member of
its input's group, its entries along the input-channel axis.
"""

from tf1prune.channels.groups import ChannelTrace, GroupWalk
from tf1prune.keras.shrink.layer_view import LayerView

__all__ = ['find_channel_groups', 'kernel_weights', 'trace_channel_groups']

KERNELS = ('kernel', 'depthwise_kernel', 'pointwise_kernel')


def kernel_weights(model):
  """[(name, layer, weight short name, variable)] of every kernel of a
  layer of `model` (nested models' layers too), in layer order."""
  from tf1prune.keras import _pin
  out = []
  for layer in _pin._layers(model):  # pylint: disable=protected-access
    if getattr(layer, 'layers', None):
      continue
    for name, variable in _pin.named_weights(layer):
      if name in KERNELS:
        out.append(('%s/%s' % (layer.name, name), layer, name, variable))
  return out


def find_channel_groups(model, weights=None, view=None):
  """Returns the `ChannelGroup`s of `model`'s kernels.

  The groups of `trace_channel_groups`.

  Args:
    model: a Sequential or functional Keras model.
    weights: [(name, layer, weight short name, variable)] of the members
      (default: `kernel_weights(model)`); kernels that feed no conv, dense
      or depthwise conv the view knows belong to no group.
    view: the model's `LayerView` (default: made here).

  Returns:
    A list of `ChannelGroup`, members and groups in the order of `weights`.

  Raises:
    ValueError: the model cannot be traced (subclassed, a layer called
      twice; see `layer_calls.trace`).
  """
  return trace_channel_groups(model, weights, view).groups


def trace_channel_groups(model, weights=None, view=None):
  """Returns the `tf1prune.channels.groups.ChannelTrace` of `model`'s
  kernels: their groups (`find_channel_groups`, same arguments), and the
  group unit of each channel of the view's tensors."""
  view = view or LayerView(model)
  weights = kernel_weights(model) if weights is None else weights
  walk = GroupWalk(view, [w[0] for w in weights])
  for name, layer, short, variable in weights:
    member = view.members.get((id(layer), short))
    if member is None:
      continue
    if member.axis == 2 or view.op_type(view.node(member.node)) == \
        'DepthwiseConv2dNative':
      walk.depthwise(view.node(member.node), name, variable, member.axis,
                     member.multiplier)
    else:
      walk.produce(name, variable, member.axis, member.node,
                   int(variable.shape[member.axis]))
  walk.run()
  return ChannelTrace(walk)
