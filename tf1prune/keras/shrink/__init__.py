"""A physically smaller Keras model: the layers' emptied channels removed.

`model.shrink_model` is the entry point (`tf1prune.keras.shrink_model`); the
steps, one module each: `layers` (what each Keras layer does to channels),
`plan` (which channels go), `values` (what a removed channel leaves behind),
`borders` (zero padding around a removed constant), `rebuild` (the new
model) and `report`.
"""
