"""Latency on the user's runtime: per-layer tables, and the cost they give.

    >>> from tf1prune import latency
    >>> latency.RUNTIMES
    ('tf', 'tflite')

A `latency:` budget (`budget=latency:0.5`, half the measured latency) ranks
channels by what their removal saves in time, not in FLOPs:

- `profile`: each prunable layer timed alone at a few widths on the runtime
  (a TF session, one thread or more; or the TFLite interpreter);
- `table`: those times as a `LatencyTable`, a JSON file kept next to the
  checkpoint (`latency_table`) and reused while it fits the model and the
  runtime;
- `model`: `LatencyCost`, the model's latency as a function of its kept
  units, which `tf1prune.masks.budget_masks` ranks and bisects with.
"""

from tf1prune.latency.model import LatencyCost
from tf1prune.latency.timing import RUNTIMES, profile, signature
from tf1prune.latency.table import LatencyTable, LayerTimes

__all__ = ['LatencyCost', 'LatencyTable', 'LayerTimes', 'RUNTIMES', 'profile',
           'signature']
