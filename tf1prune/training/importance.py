"""The importance of a budget's channels: `tf1prune.channels.importance`.

    >>> from tf1prune.training import importance
    >>> from tf1prune.channels import importance as shared
    >>> importance.magnitude is shared.magnitude
    True

The pure functions live in `tf1prune.channels.importance`, where the Keras
`Pruner` reads them too; this path gives the same names.
"""

from tf1prune.channels.importance import (Touch, bn_scales, magnitude,
                                          per_channel, summed)

__all__ = ['Touch', 'bn_scales', 'magnitude', 'per_channel', 'summed']
