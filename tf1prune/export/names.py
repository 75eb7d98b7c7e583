"""Node and tensor names: input references, and the output names users give.

    >>> from tf1prune.export.names import output_names, split_input
    >>> output_names(' logits/BiasAdd:0, probs ,')
    ['logits/BiasAdd', 'probs']
    >>> split_input('^init'), split_input('split:1'), split_input('x')
    (('init', -1), ('split', 1), ('x', 0))

`output_names` is the one place that turns what a user passes as
`output_node_names` (a list, or a comma-separated str, of node or tensor
names) into node names, and `check_outputs` the one place that checks them
against a graph.
"""

import difflib


def split_input(name):
  """'^a' -> ('a', -1); 'a:2' -> ('a', 2); 'a' -> ('a', 0)."""
  if name.startswith('^'):
    return name[1:], -1
  node, sep, port = name.rpartition(':')
  if sep and port.isdigit():
    return node, int(port)
  return name, 0


def output_names(output_node_names):
  """Node names from a list or comma-separated str of node or tensor names.

  Blanks around names and empty entries are dropped, `:port` suffixes too
  (a node is kept whole, with all its outputs).

  Args:
    output_node_names: list of str, or one str of comma-separated names.

  Returns:
    A non-empty list of node names, in the order given.

  Raises:
    ValueError: no name is left.
  """
  if isinstance(output_node_names, str):
    output_node_names = output_node_names.split(',')
  names = [split_input(n.strip())[0] for n in output_node_names or ()
           if n.strip()]
  if not names:
    raise ValueError('output_node_names is empty; name the inference '
                     "outputs, e.g. ['logits/BiasAdd']")
  return names


def check_outputs(outputs, nodes, where):
  """Raises ValueError naming the `outputs` that are not in `nodes`.

  The message ends with the graph's nearest names to each missing one
  (difflib), e.g. `softmax_linear/softmax_linear_1` for `..._2`.

  Args:
    outputs: node names, as `output_names` returns them.
    nodes: the graph's node names (any container: a dict by name, a set).
    where: what the graph is, for the message (e.g. 'input_graph_def').
  """
  missing = [n for n in outputs if n not in nodes]
  if missing:
    hints = []
    for name in missing:
      close = difflib.get_close_matches(name, sorted(nodes), n=3, cutoff=0.6)
      if close:
        hints.append('%s for %r' % (', '.join(close), name))
    raise ValueError('output node%s %s not found in %s; check '
                     'output_node_names (the graph has %d nodes)%s' % (
                         's' if len(missing) > 1 else '',
                         ', '.join(repr(n) for n in missing), where,
                         len(nodes), '; nearest existing names: ' +
                         '; '.join(hints) if hints else ''))
