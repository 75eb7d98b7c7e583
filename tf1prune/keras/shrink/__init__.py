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
steps, one module each: `layers` (what each Keras layer does to channels),
`plan` (which channels go), `values` (what a removed channel leaves behind),
`borders` (zero padding around a removed constant), `rebuild` (the new
model) and `report`.
"""
