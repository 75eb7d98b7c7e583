"""A physically smaller Keras model: the layers' emptied channels removed.

    >>> import tf1prune.keras as tk
    >>> from tf1prune.keras.shrink import model
    >>> model.shrink_model is tk.shrink_model
    True

`model.shrink_model` is the entry point (`tf1prune.keras.shrink_model`); the
steps, one module each: `layers` (what each Keras layer does to channels),
`plan` (which channels go), `values` (what a removed channel leaves behind),
`borders` (zero padding around a removed constant), `rebuild` (the new
model) and `report`.
"""
