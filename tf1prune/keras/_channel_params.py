"""A pruned output channel's bias and batch norm, zeroed with its filter.

    >>> import numpy as np, keras
    >>> from tf1prune.keras import _channel_params, _pin
    >>> from tf1prune.keras.shrink.layer_view import LayerView
    >>> x = keras.Input((4, 4, 3))
    >>> h = keras.layers.Conv2D(4, 1, name='conv')(x)
    >>> model = keras.Model(x, keras.layers.BatchNormalization(name='bn')(h))
    >>> conv = model.get_layer('conv')
    >>> pin = _pin.pin_of(conv, 'kernel', model)
    >>> owner = _channel_params.Owner([(pin, conv, 'kernel', -1, (0, 1, 2, 3))],
    ...                               4)
    >>> params = _channel_params.find(LayerView(model), [owner], model)
    >>> [(p.name, p.what) for p in params]
    [('conv/bias', 'bias'), ('bn/gamma', 'scale'), ('bn/beta', 'offset')]
    >>> pin.set_mask(np.arange(4) != 1 + np.zeros((1, 1, 3, 4)))  # filter 1
    >>> pin.apply()
    >>> _channel_params.zero(params, [owner])
    >>> model.get_layer('bn').gamma.numpy().tolist()
    [1.0, 0.0, 1.0, 1.0]

The Keras side of `tf1prune.training.channel_params`: with a filter
granularity (`filter`, `coupled_filter`), a removed filter leaves its
channel at what its bias (or the batch norm after it) adds, and what
follows the channel can keep the shrink from removing it. With a budget
(or `prune_channel_params=True`), the `Pruner` pins, for every output
channel its masks removed, the bias of the layer that writes it and the
scale and offset (gamma, beta) of a `BatchNormalization` that reads the
layer's output directly (the layer's activation linear: as in the graph,
where the batch norm reads the bias add), to zero: the channel is exactly
0 in every forward pass, the optimizer's steps included (the pins are
constraints, `tf1prune.keras._pin`), and `strip_model` folds the zeros.

Where a layer writes its channels is the model's `LayerView`
(`tf1prune.keras.shrink.layer_view`): the node a kernel feeds, then its
layer's bias add, then the batch norm's scale node reading that output; a
depthwise kernel's channels are its input's, spread over its multiplier.
"""

import collections

import numpy as np

from tf1prune.keras import _pin

__all__ = ['Owner', 'Param', 'find', 'kept_units', 'zero']


class Owner(collections.namedtuple('Owner', ['members', 'num_units'])):
  """Weights whose output channels share units.

  Attributes:
    members: list of (`Pin`, layer, weight name, axis, units): the weight's
      entries along `axis` are its channels, `units[i]` the unit of channel
      i.
    num_units: how many units there are.
  """

  def kept(self):
    """bool [num_units]: the units the first member's mask keeps."""
    pin, _, _, axis, units = self.members[0]
    return kept_units(pin.mask, axis, units, self.num_units)


class Param(collections.namedtuple('Param', ['name', 'variable', 'pin',
                                             'owner', 'ids', 'what'])):
  """One vector zeroed with removed channels: `name` (`layer/weight`), its
  variable and `Pin`, the index of its `Owner`, `ids` (int [C], the unit of
  each of its entries) and `what` ('bias', 'scale' or 'offset')."""


def kept_units(mask, axis, units, num_units):
  """bool [num_units]: the units of which `mask` (a weight's, bool) keeps
  some entry along `axis`, `units[i]` the unit of its entry i."""
  mask = np.asarray(mask, bool)
  axis %= mask.ndim
  per_entry = mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis))
  kept = np.zeros(num_units, bool)
  np.logical_or.at(kept, np.asarray(units, np.int64), per_entry)
  return kept


def _channel_ids(view, node, member, axis, units):
  """int [C]: the unit of each channel `node` writes (a depthwise kernel's
  input units spread over its multiplier), or None when the owner's `axis`
  is not where the view has its channels."""
  ids = np.asarray(units, np.int64)
  channels = (view.shape(node.output) or [None])[-1]
  if axis != member.axis or not channels or not len(ids):
    return None
  if member.axis == 2 and channels % len(ids) == 0:
    ids = np.repeat(ids, channels // len(ids))
  return ids if channels == len(ids) else None


def _weights(layer):
  return dict((_pin.short_name(v), v) for v in layer.weights)


def _after(view, node):
  """[(layer, weight name, what)]: the bias of `node`'s layer and the gamma
  and beta of a batch norm reading the layer's output (module doc)."""
  found, tensor = [], node.output
  for reader, index in view.consumers(tensor):
    if reader.op == 'BiasAdd' and reader.call is node.call and index == 0:
      found.append((node.call.layer, 'bias', 'bias'))
      tensor = reader.output
  for reader, index in view.consumers(tensor):
    layer = reader.call.layer
    if type(layer).__name__ == 'BatchNormalization' and \
        reader.part == 'scale' and index == 0:
      weights = _weights(layer)
      found.extend((layer, name, what) for name, what in (
          ('gamma', 'scale'), ('beta', 'offset')) if name in weights)
  return found


def find(view, owners, model):
  """The `Param`s after the owners' layers, each vector once, pinned.

  Args:
    view: the model's `LayerView`.
    owners: the `Owner`s.
    model: the model (its optimizer is hooked for the pins' EMA).
  """
  found, seen = [], set()
  for position, owner in enumerate(owners):
    for _, layer, name, axis, units in owner.members:
      member = view.members.get((id(layer), name))
      if member is None:
        continue
      node = view.node(member.node)
      ids = _channel_ids(view, node, member, axis, units)
      if ids is None:
        continue
      for param_layer, weight, what in _after(view, node):
        key = '%s/%s' % (param_layer.name, weight)
        if key in seen:
          continue
        seen.add(key)
        found.append(Param(key, _pin.weight_of(param_layer, weight),
                           _pin.pin_of(param_layer, weight, model),
                           position, ids, what))
  return found


def zero(params, owners):
  """Pins each parameter of `params` to 0 at the units its owner's mask
  removed now (and releases the units it keeps)."""
  kept = {}
  for param in params:
    if param.owner not in kept:
      kept[param.owner] = owners[param.owner].kept()
    param.pin.set_mask(kept[param.owner][param.ids])
    param.pin.apply()
