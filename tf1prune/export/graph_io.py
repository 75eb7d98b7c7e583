"""The names of the deprecated path `tf1prune.graph_io`, from their modules.

    >>> from tf1prune.export import atomic, graph_io
    >>> graph_io.write_atomically is atomic.write_atomically
    True

`_moved` maps `tf1prune.graph_io` to this module, so
`tf1prune.graph_io.write_atomically` and the other names keep working. New
code imports from where each name lives: `names` (input and output names),
`_checkpoint` (prefix, meta graph), `attrs` (attributes at their default),
`stream` (node by node serialization, byte counts), `atomic` (atomic
files).
"""

# pylint: disable=unused-import
from tf1prune.export.atomic import write_atomically
from tf1prune.export.attrs import (attr_functions, graph_op_types, op_defs,
                                   strip_default_attrs)
from tf1prune.export._checkpoint import checkpoint_prefix, read_meta_graph
from tf1prune.export.names import split_input
from tf1prune.export.stream import (GZIP_LEVEL, ByteCounter, const_node,
                                    const_node_chunks, serialized_node)
