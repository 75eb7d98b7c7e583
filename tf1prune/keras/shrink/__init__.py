"""A physically smaller Keras model: the layers' emptied channels removed.

    >>> import numpy as np, keras
    >>> from tf1prune.keras.shrink.model import shrink_model
    >>> x = keras.Input((4,))
    >>> h = keras.layers.Dense(6, activation='relu', name='h')(x)
    >>> model = keras.Model(x, keras.layers.Dense(2, name='y')(h))
    >>> kernel = model.get_layer('h').kernel
    >>> _ = kernel.assign(kernel * (np.arange(6) < 4))     # 2 empty filters
    >>> shrink_model(model)[0].get_layer('h').units
    4

`model.shrink_model` is the entry point (`tf1prune.keras.shrink_model`); the
steps, one module each:

- `layer_calls`: the layer calls of the model, nested models followed;
- `layer_view`: the model as a view of `tf1prune.channels`: each call is the
  TF ops of the channel table it computes;
- `groups`: the `Pruner`'s channel groups (`GroupWalk` over the view);
- `channel_walk`: the shrink's walk over the view (`Forward`, seeded at every
  layer): the classes of channels that go together, and what pins them;
- `removed_values`: what a channel no example changes is at each tensor;
- `plan`: which classes go, what the layers reading them must take;
- `borders`: the conv on ones that gives back a depthwise conv's map;
- `rebuild`: the new, smaller model;
- `report`: parameters, FLOPs and stops.

How a layer treats channels is said once, by the op table of
`tf1prune.channels` through the view; this package holds no propagation of
its own.
"""
