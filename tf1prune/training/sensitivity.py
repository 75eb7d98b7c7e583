"""Sensitivity analysis: a metric with part of one channel group removed.

    >>> import numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> with tf.Graph().as_default():
    ...   tf.set_random_seed(0)
    ...   x = tf.constant(np.random.RandomState(0).rand(16, 8, 8, 3),
    ...                   tf.float32)
    ...   net = tf1prune.masked_conv2d(x, 8, 3, scope='a')
    ...   net = tf1prune.masked_conv2d(net, 8, 3, scope='b')
    ...   out = tf.reduce_mean(net, [1, 2, 3])
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     dense = sess.run(out)
    ...     report = tf1prune.sensitivity(
    ...         sess, lambda s: -float(np.abs(s.run(out) - dense).mean()))
    ...     masks_unchanged = all(m.min() == 1 for m in sess.run(
    ...         tf1prune.get_masks()))
    >>> [row.group for row in report.rows], report.fractions
    (['8 channels: a/weights', '8 channels: b/weights'], (0.25, 0.5, 0.75))
    >>> report.baseline, masks_unchanged
    (-0.0, True)

For each channel group that a budget would prune (the same groups and
rules: `coupled_filter` by default, blocked groups and the model's outputs
left dense), `sensitivity` removes 25%, 50% and 75% of its channels, the
least important first by `budget_criterion` (`l1`, `l2` or `bn_scale`),
with their biases and batch norm entries, leaves every other group whole,
and evaluates `metric(sess)`; then it puts every mask and parameter back.
The `SensitivityReport` has the metric per group and fraction, a table
(`format_table`), a JSON file (`save`) and a plot (`plot`).

A budget takes per-group limits from it: with
`budget_sensitivity=<the JSON file>` and `budget_max_drop=<d>`, no group
loses more of its channels than the largest fraction whose metric stayed
within `d` of the baseline (`limits`), so the global ranking cannot empty
a layer the analysis found fragile.

`metric(sess)` evaluates the model in `sess` (e.g. accuracy on a
validation set: it feeds the graph's input placeholder); higher is better
(give `higher_is_better=False` for a loss). From the shell:
`tf1prune_sensitivity --checkpoint=... --metric=module:function`.
"""

import collections
import json
import math

import numpy as np
import tensorflow.compat.v1 as tf

from tf1prune.export.atomic import write_atomically
from tf1prune.export.progress import notify
from tf1prune.export.table import table
from tf1prune.plan.hparams import HParams, get_pruning_hparams
from tf1prune.training.pruning import Pruning

__all__ = ['SensitivityReport', 'SensitivityRow', 'limits', 'sensitivity']

FRACTIONS = (0.25, 0.5, 0.75)


class SensitivityRow(collections.namedtuple(
    'SensitivityRow', ['group', 'weights', 'channels', 'metrics'])):
  """One channel group: its text (as `str(ChannelGroup)`), its weights'
  names, its number of channels, and the metric at each fraction removed."""


class SensitivityReport(object):
  """The metric of the model with part of each channel group removed.

  Attributes:
    baseline: the metric with every channel.
    fractions: the fractions of a group's channels removed.
    rows: one `SensitivityRow` per group.
    higher_is_better: how the metric reads.
  """

  def __init__(self, baseline, fractions, rows, higher_is_better=True):
    self.baseline = float(baseline)
    self.fractions = tuple(float(f) for f in fractions)
    self.rows = list(rows)
    self.higher_is_better = bool(higher_is_better)

  def drop(self, value):
    """How much worse than the baseline `value` is (>= 0 is worse)."""
    sign = 1.0 if self.higher_is_better else -1.0
    return sign * (self.baseline - value)

  def to_dict(self):
    """The report as a JSON-serializable dict."""
    return {'baseline': self.baseline, 'fractions': list(self.fractions),
            'higher_is_better': self.higher_is_better,
            'groups': [{'group': r.group, 'weights': list(r.weights),
                        'channels': r.channels, 'metrics': list(r.metrics)}
                       for r in self.rows]}

  @classmethod
  def from_dict(cls, data):
    return cls(data['baseline'], data['fractions'], [
        SensitivityRow(g['group'], tuple(g['weights']), g['channels'],
                       tuple(g['metrics'])) for g in data['groups']],
               data.get('higher_is_better', True))

  def save(self, path):
    """Writes the report as JSON to `path` (atomically)."""
    with write_atomically(path) as f:
      f.write((json.dumps(self.to_dict(), indent=2) + '\n').encode())

  @classmethod
  def load(cls, path):
    """Reads a report that `save` wrote.

    Raises:
      ValueError: `path` is not such a file.
    """
    try:
      with open(path) as f:
        return cls.from_dict(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ValueError('budget_sensitivity=%r is not a sensitivity report '
                       'that tf1prune.sensitivity saved (%s); run the '
                       'analysis and save its report there' % (path, e))

  def format_table(self):
    """The report as a text table: the metric per group and fraction."""
    rows = [(r.group, str(r.channels)) + tuple(
        '%.4f' % m for m in r.metrics) for r in self.rows]
    header = ('group', 'channels') + tuple(
        '%d%% removed' % round(100 * f) for f in self.fractions)
    total = ('baseline', '') + ('%.4f' % self.baseline,) + ('',) * (
        len(self.fractions) - 1)
    return '\n'.join(table(header, rows, total))

  def plot(self, path):
    """Writes a PNG of the metric against the fraction removed, a line per
    group (needs matplotlib). Returns `path`."""
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use('Agg')
    from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    xs = (0.0,) + self.fractions
    for row in self.rows:
      axes.plot(xs, (self.baseline,) + tuple(row.metrics), marker='o',
                label=row.group if len(row.group) < 40 else
                row.group[:37] + '...')
    axes.set_xlabel("fraction of the group's channels removed")
    axes.set_ylabel('metric')
    axes.grid(alpha=0.3)
    if len(self.rows) <= 12:
      axes.legend(fontsize='x-small')
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path


def limits(report, max_drop):
  """{weight name: the largest fraction of its group's channels that may go}:
  the largest fraction measured whose metric is within `max_drop` of the
  baseline (0 if none is)."""
  found = {}
  for row in report.rows:
    allowed = 0.0
    for fraction, value in zip(report.fractions, row.metrics):
      if report.drop(value) <= max_drop:
        allowed = max(allowed, fraction)
    for weight in row.weights:
      found[weight] = allowed
  return found


def _hparams(hparams):
  if isinstance(hparams, HParams):
    hparams = HParams(**hparams.values())
  else:
    hparams = get_pruning_hparams().parse(hparams or '')
  if hparams.budget_criterion == 'taylor':
    raise ValueError('sensitivity ranks channels by budget_criterion l1, l2 '
                     'or bn_scale; taylor needs training steps')
  hparams.budget = 'params:1'
  hparams.name = 'sensitivity'
  return hparams


def sensitivity(sess, metric, hparams='', fractions=FRACTIONS,
                higher_is_better=True, progress=None):
  """Evaluates `metric` with part of each channel group removed.

  Args:
    sess: a session of a graph with masked weights, its variables set.
    metric: `metric(sess) -> float`.
    hparams: pruning hparams (a `.parse()` string or an HParams object):
      which weights and groups (`do_not_prune`, `granularity_map`, ...) and
      the criterion (`budget_criterion`: l1, l2 or bn_scale).
    fractions: the fractions of a group's channels to remove, in (0, 1).
    higher_is_better: False for a metric such as a loss.
    progress: optional `progress(stage, done, total, fraction)` callable.

  Returns:
    A `SensitivityReport`.

  Raises:
    ValueError: a bad fraction or criterion, or no group to prune.
  """
  fractions = tuple(fractions)
  for fraction in fractions:
    if not 0.0 < fraction < 1.0:
      raise ValueError('fractions must be in (0, 1), got %r' % (fraction,))
  hparams = _hparams(hparams)
  with sess.graph.as_default():
    pruning = Pruning(hparams, global_step=tf.constant(0, tf.int64))
    plan = pruning.budget_plan()
    owners = plan.owners()
    params = pruning.channel_params()
    scores = plan.split(plan.importance(hparams.budget_criterion, params))
    variables = [r.mask for o in owners for r, _, _ in o.members] + [
        v for v, _, _, _ in params]
    loads = _Loads(variables)
    saved = sess.run(variables)
    ranks = sess.run(scores)
  total = len(plan.items) * len(fractions)
  notify(progress, 'sensitivity', 0, total)
  baseline = float(metric(sess))
  rows = []
  for index, (item, score) in enumerate(zip(plan.items, ranks)):
    order = np.lexsort((np.arange(len(score)), -score))
    values = []
    for step, fraction in enumerate(fractions):
      count = len(score) - int(math.floor(fraction * len(score) + 0.5))
      unit_keep = np.zeros(len(score), np.float32)
      unit_keep[order[:max(count, 1)]] = 1.0
      loads.run(sess, _removed(sess, item, index, unit_keep, params))
      values.append(float(metric(sess)))
      loads.run(sess, dict(zip(variables, saved)))
      notify(progress, 'sensitivity', index * len(fractions) + step + 1,
             total)
    rows.append(SensitivityRow(str(item.group), tuple(
        m.name for m in item.group.members), item.group.num_units,
                               tuple(values)))
  return SensitivityReport(baseline, fractions, rows, higher_is_better)


class _Loads(object):
  """An assign per variable, fed: one `session.run` sets several."""

  def __init__(self, variables):
    self._ops = {}
    for variable in variables:
      value = tf.placeholder(variable.dtype.base_dtype,
                             variable.get_shape())
      self._ops[variable] = (value, tf.assign(variable, value))

  def run(self, sess, values):
    """Sets each variable of {variable: value} `values`."""
    sess.run([self._ops[v][1] for v in values],
             dict((self._ops[v][0], value) for v, value in values.items()))


def _removed(sess, item, index, unit_keep, params):
  """{variable: value}: `item`'s masks and parameters with the units
  `unit_keep` leaves out removed."""
  values = {}
  for member, target in zip(item.group.members, item.targets):
    mask = target.record.mask
    shape = mask.get_shape().as_list()
    line = [1] * len(shape)
    line[member.axis % len(shape)] = len(member.units)
    kept = unit_keep[np.asarray(member.units)].reshape(line)
    values[mask] = np.broadcast_to(kept, shape).astype(
        mask.dtype.base_dtype.as_numpy_dtype)
  for variable, position, ids, _ in params:
    if position == index:
      values[variable] = sess.run(variable) * unit_keep[ids].astype(
          variable.dtype.base_dtype.as_numpy_dtype)
  return values
