"""Training-mode ops in a graph to freeze: batch statistics, random ops and
input pipelines.

    >>> import tensorflow.compat.v1 as tf
    >>> from tf1prune.export.training_ops import training_ops
    >>> with tf.Graph().as_default() as g:
    ...   x = tf.placeholder(tf.float32, [None, 4], name='x')
    ...   y = tf.nn.dropout(x, rate=0.5, name='y')
    >>> [(op.node, op.kind) for op in training_ops(g.as_graph_def())]
    [('y/random_uniform/RandomUniform', 'random')]

A model built for training (tf-slim's `is_training=True`) normalizes each
batch with its own statistics and drops units at random: frozen as it is, the
same image gives other outputs on every run and in every batch. Found here,
in the nodes and the function library of a GraphDef:

- `batch_norm`: a `FusedBatchNorm*` with `is_training=True`, or
  `tf.nn.moments`' batch statistics (a `SquaredDifference` of a tensor and
  the `StopGradient` of its `Mean` over the batch axis), as an unfused batch
  norm computes them; moments over other axes only (layer, instance or
  group norm) are the same for an example alone and in a batch, and are
  not listed;
- `random`: a stateful random op (`RandomUniform`, `RandomStandardNormal`,
  `TruncatedNormal`, ...: dropout, noise layers). Stateless random ops (a
  seed tensor) give the same values every run and are not listed;
- `input`: the training input in place of a placeholder, a dataset
  iterator's `IteratorGetNext` or a queue's or reader's dequeue: frozen, the
  `.pb` holds its data (or a reference to files) and takes no input. One
  behind a `PlaceholderWithDefault` is fed over and is not listed.

`check_inference` raises `TrainingGraphError` with what was found and how
to export an inference graph instead.
"""

import collections

from tf1prune.export.attrs import called_functions
from tf1prune.export.names import split_input

_RANDOM_OPS = frozenset([
    'RandomUniform', 'RandomUniformInt', 'RandomStandardNormal',
    'TruncatedNormal', 'ParameterizedTruncatedNormal', 'RandomShuffle',
    'RandomGamma', 'RandomPoisson', 'RandomPoissonV2', 'Multinomial',
    'RandomCrop', 'StatefulUniform', 'StatefulUniformInt',
    'StatefulUniformFullInt', 'StatefulStandardNormal',
    'StatefulStandardNormalV2', 'StatefulTruncatedNormal',
    'StatefulRandomBinomial', 'RandomIndexShuffle'])
_INPUT_OPS = frozenset([
    'IteratorGetNext', 'IteratorGetNextSync', 'IteratorGetNextAsOptional',
    'QueueDequeue', 'QueueDequeueV2', 'QueueDequeueMany', 'QueueDequeueManyV2',
    'QueueDequeueUpTo', 'QueueDequeueUpToV2', 'ReaderRead', 'ReaderReadV2',
    'ReaderReadUpTo', 'ReaderReadUpToV2'])
_FUSED_BATCH_NORMS = ('FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3')
_WHAT = {'batch_norm': 'batch norms using batch statistics (is_training=True)',
         'random': 'random ops (dropout, noise)',
         'input': 'an input pipeline (a dataset iterator or queue) in place of '
                  'an input placeholder'}
_EFFECT = {'batch_norm': 'the same input gives other outputs from run to run '
                         'and from batch to batch',
           'input': 'the .pb reads its data from inside itself and takes no '
                    'input'}
_EFFECT['random'] = _EFFECT['batch_norm']

TrainingOp = collections.namedtuple('TrainingOp', ['node', 'op', 'kind'])
TrainingOp.__doc__ = """A training-mode op: its node name, op type and kind.

`kind` is `'batch_norm'`, `'random'` or `'input'`; `node` is `function/node`
for a node of a library function.
"""

_FIX = ('Export an inference graph: rebuild the model with '
        'is_training=False (on a placeholder input) and freeze it with the '
        'checkpoint, '
        'tf1prune.inference_graph_def(model_fn, checkpoint_dir, '
        'output_node_names) does it (docs/exporting.md, "Models with batch '
        'norm or dropout")')


class TrainingGraphError(ValueError):
  """The graph to freeze has training-mode ops; `ops` lists them."""

  def __init__(self, message, ops):
    super(TrainingGraphError, self).__init__(message)
    self.ops = ops


def _producer(by_name, name):
  """The node of input `name` (`node`, `node:1` or a function body's
  `node:output:0`), or None."""
  return by_name.get(split_input(name)[0].split(':')[0])


def _over_batch(mean, by_name):
  """Whether the `Mean` node `mean` may average over axis 0, the batch:
  True unless its axes are a constant without 0 (and without a negative
  axis other than -1, which could be 0 for some rank)."""
  axes = _producer(by_name, mean.input[1]) if len(mean.input) > 1 else None
  if axes is None or axes.op != 'Const':
    return True
  from tensorflow.compat.v1 import make_ndarray
  values = make_ndarray(axes.attr['value'].tensor).ravel().tolist()
  return any(a == 0 or a < -1 for a in values)


def _nodes_ops(nodes, prefix):
  by_name = {n.name: n for n in nodes}
  found = []
  for node in nodes:
    kind = None
    if node.op in _RANDOM_OPS:
      kind = 'random'
    elif node.op in _INPUT_OPS:
      kind = 'input'
    elif node.op in _FUSED_BATCH_NORMS:
      if 'is_training' not in node.attr or node.attr['is_training'].b:
        kind = 'batch_norm'  # is_training defaults to true.
    elif node.op == 'SquaredDifference':
      for name in node.input:
        stop = _producer(by_name, name)
        if stop is not None and stop.op == 'StopGradient' and stop.input:
          mean = _producer(by_name, stop.input[0])
          if mean is not None and mean.op == 'Mean' and \
              _over_batch(mean, by_name):
            kind = 'batch_norm'
    if kind:
      found.append(TrainingOp(prefix + node.name, node.op, kind))
  return found


def _read_when_fed(graph_def, outputs):
  """The nodes `outputs` read when every PlaceholderWithDefault is fed: its
  default is the training input (a random batch), not the model."""
  by_name = {n.name: n for n in graph_def.node}
  seen, stack = set(), [o for o in outputs if o in by_name]
  while stack:
    name = stack.pop()
    if name in seen:
      continue
    seen.add(name)
    if by_name[name].op != 'PlaceholderWithDefault':
      stack.extend(split_input(ref.lstrip('^'))[0]
                   for ref in by_name[name].input)
  return [n for n in graph_def.node if n.name in seen]


def training_ops(graph_def, outputs=None):
  """Lists the training-mode ops of `graph_def` and of its functions.

  Args:
    graph_def: a `tf.GraphDef`; prune it to what the outputs need first (the
      initializers of a training graph are random ops too).
    outputs: the output node names; when given, only what they read with
      every PlaceholderWithDefault fed counts (nodes, and the functions
      those nodes call).

  Returns:
    A list of `TrainingOp`, graph nodes first, in graph order.
  """
  nodes = graph_def.node if outputs is None else _read_when_fed(graph_def,
                                                                outputs)
  found = _nodes_ops(nodes, '')
  # With outputs, only the functions those nodes call: a fed-over dataset's
  # map function (random crops, flips) is not the model either.
  called = None if outputs is None else called_functions(graph_def, nodes)
  for function in graph_def.library.function:
    if called is None or function.signature.name in called:
      found.extend(_nodes_ops(function.node_def,
                              function.signature.name + '/'))
  return found


def check_inference(graph_def, outputs, allow_training_ops=False):
  """Raises `TrainingGraphError` if `graph_def` has training-mode ops.

  Args:
    graph_def: the graph of what `outputs` need.
    outputs: the output node names (for the message).
    allow_training_ops: return the ops instead of raising.

  Returns:
    The list of `TrainingOp` (empty, unless `allow_training_ops`).

  Raises:
    TrainingGraphError: (a ValueError) training-mode ops were found and
      `allow_training_ops` is false.
  """
  found = training_ops(graph_def, outputs)
  if not found or allow_training_ops:
    return found
  kinds = sorted(set(op.kind for op in found))
  shown = ', '.join('%s (%s)' % (op.node, op.op) for op in found[:4])
  more = ' and %d more' % (len(found) - 4) if len(found) > 4 else ''
  effects = []
  for kind in kinds:
    if _EFFECT[kind] not in effects:
      effects.append(_EFFECT[kind])
  raise TrainingGraphError(
      'the graph of outputs %s is a training graph: %d training-mode ops, '
      '%s, e.g. %s%s; frozen as it is, %s. %s. To keep these ops anyway, pass '
      'allow_training_ops=True (--allow_training_ops)'
      % (', '.join(outputs), len(found),
         ' and '.join(_WHAT[k] for k in kinds), shown, more,
         ', and '.join(effects), _FIX),
      found)
