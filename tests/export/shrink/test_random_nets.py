"""Random nets (tests/support/random_nets.py) through `shrink_graph_def`.

For each net: no exception; the shrunk graph's outputs equal the unshrunk
graph's to 1e-5 of max|y|; FLOPs never grow, nor parameters but for the
border maps of objective 'flops'; each layer's inputs and outputs after the
shrink, and the FLOPs, are what the generator's own oracle counts
(`random_nets.expected`: the channels the documented rules remove, computed
from the net it generated, not from the shrink's report logic); the
shrink's own check passes; and every stop is one docs/structured.md
lists.

The default run checks `QUICK` nets (fixed seeds, both stacks); the slow
run (TF1PRUNE_FULL=1) `TF1PRUNE_RANDOM_NETS` nets (default 1000) from
seed 1000 on. A failure names its seeds: `TF1PRUNE_RANDOM_NETS_SEED=123`
runs that one net in either test (and the slow one without
TF1PRUNE_FULL).
"""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support import random_nets
from tests.support.shrunk_graphs import documented_stops, is_documented

QUICK = 40
_SEED = os.environ.get('TF1PRUNE_RANDOM_NETS_SEED')
_STOPS = documented_stops()


def _run(graph_def, feed, outputs):
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(graph_def, name='')
    with tf.Session(graph=graph) as sess:
      return sess.run([o + ':0' for o in outputs], feed)


def _layer_name(name):
  suffix = '/shrink_unfolded'
  return name[:-len(suffix)] if name.endswith(suffix) else name


def _map_entries(graph_def):
  """The entries of the border maps (`<bias>/shrink_map`) of a graph."""
  return sum(int(np.prod([d.size for d in n.attr['value'].tensor
                          .tensor_shape.dim]))
             for n in graph_def.node if n.op == 'Const' and
             '/shrink_map/' in n.name and
             tf.as_dtype(n.attr['dtype'].type).is_floating)


def _compare(net, feed, before, small, report, objective, problems):
  """Outputs equal, nothing larger: parameters (objective 'flops' trades
  the border maps' entries for FLOPs) and FLOPs."""
  after = _run(small, feed, net.outputs)
  for name, b, a in zip(net.outputs, before, after):
    scale = float(np.abs(b).max())
    diff = float(np.abs(a - b).max()) if a.shape == b.shape else np.inf
    if not diff <= 1e-5 * max(scale, 1e-6):
      problems.append('%s: output %s differs by %.3g (max|y| %.3g)' % (
          objective, name, diff, scale))
  maps = _map_entries(small) if objective == 'flops' else 0
  if report.params_after - maps > report.params_before:
    problems.append('%s: params grew: %d -> %d (%d of them border maps)' % (
        objective, report.params_before, report.params_after, maps))
  if report.flops_before is not None and \
      report.flops_after > report.flops_before:
    problems.append('%s: FLOPs grew: %d -> %d' % (
        objective, report.flops_before, report.flops_after))


def check_net(seed):
  """Shrinks net `seed`; raises AssertionError saying what is wrong.

  Every net is shrunk with objective 'flops' (the default), and checked
  against the oracle, with the shrink's own check (it passes; where the
  height and width are unknown it does not run); one in three with
  'params' too (outputs and sizes).
  """
  net = random_nets.generate(seed)
  feed = net.feed()
  want = random_nets.expected(net, net.run_all(feed))
  before = _run(net.graph_def, feed, net.outputs)
  problems = []
  if seed % 3 == 0:
    small, report = tf1prune.shrink_graph_def(
        net.graph_def, net.outputs, objective='params', check=False)
    _compare(net, feed, before, small, report, 'params', problems)
  small, report = tf1prune.shrink_graph_def(net.graph_def, net.outputs)
  _compare(net, feed, before, small, report, 'flops', problems)
  if report.check.passed is not (True if net.static else None):
    problems.append('the self-check says %s' % report.check.describe())
  for stop in report.stops:
    if not is_documented(stop.reason, _STOPS):
      problems.append('a stop docs/structured.md does not list: %s' % (
          stop.reason,))
  got = dict((_layer_name(l.name), (l.inputs_after, l.outputs_after))
             for l in report.layers if l.op != 'LRN')
  if got != want.layers:
    problems.append('layers (inputs, outputs) after: shrink %s, oracle %s'
                    % (sorted(got.items()), sorted(want.layers.items())))
  if want.flops is not None and report.flops_after != want.flops:
    problems.append('FLOPs after: shrink %s, oracle %s' % (
        report.flops_after, want.flops))
  if problems:
    raise AssertionError('\n'.join(problems + [
        'net:', net.text, 'shrink report:', report.format_table()]))


def _check_all(seeds):
  failures = []
  for seed in seeds:
    try:
      check_net(seed)
    except Exception as e:  # pylint: disable=broad-except
      failures.append('seed %d: %s: %s' % (seed, type(e).__name__, e))
  assert not failures, '%d of %d nets fail (replay one with '\
      'TF1PRUNE_RANDOM_NETS_SEED=<seed>):\n\n%s' % (
          len(failures), len(seeds), '\n\n'.join(failures))


def test_random_nets_shrink_exactly_what_the_oracle_counts():
  _check_all([int(_SEED)] if _SEED else list(range(QUICK)))


@pytest.mark.slow
def test_many_random_nets_shrink_exactly_what_the_oracle_counts():
  count = int(os.environ.get('TF1PRUNE_RANDOM_NETS', '1000'))
  _check_all([int(_SEED)] if _SEED else list(range(1000, 1000 + count)))
