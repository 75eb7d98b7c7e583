"""What a budget reached: per layer, widths and cost before and after.

    >>> from tf1prune.channels.cost import CostModel, Layer, Width
    >>> from tf1prune.latency.budget_report import BudgetReport
    >>> from tf1prune.plan.budget import parse_budget
    >>> units = Width(0, ((0, 1), (1, 1)))
    >>> model = CostModel(2, [Layer('fc', 'dense', Width(3, ()), units, 1,
    ...                             1, 1, True)])
    >>> report = BudgetReport(parse_budget('params:0.5'), model, [1, 0], 8.0)
    >>> report.total('params', after=False), report.total('params')
    (8.0, 4.0)

The report of both backends' budgets (the graph `Pruning.budget_report`,
the Keras `Pruner.budget_report`): the `tf1prune.channels.cost.CostModel`
of the pruned layers at every unit and at the kept ones, in FLOPs,
parameters and, with a latency budget, milliseconds
(`tf1prune.latency.LatencyCost`).
"""

import numpy as np

from tf1prune.export.table import count, table

__all__ = ['BudgetReport']


class BudgetReport(object):
  """Where a budget pruned: per layer, widths and cost before and after.

  Args:
    budget: the `tf1prune.plan.budget.Budget`.
    model: the `CostModel` of the pruned layers.
    keep: 0/1 per unit of `model`, the units kept.
    allowed: the cost the schedule allows now.
    latency: the `LatencyCost` of a latency budget, or None.

  Attributes:
    budget: the `tf1prune.plan.budget.Budget`.
    allowed: the cost the schedule allows now (the budget at its end).
    rows: per layer of the cost model, (name, kind, (inputs before, after),
      (outputs before, after), {metric: (before, after)}).
  """

  def __init__(self, budget, model, keep, allowed, latency=None):
    self.budget = budget
    self.allowed = float(allowed)
    keep = np.asarray(keep, np.float64)
    dense = np.ones(model.num_units)
    costs = {m: (model.layer_costs(None, m),
                 model.layer_costs(keep, m)) for m in ('flops', 'params')}
    self.metrics = ('flops', 'params')
    if latency is not None:
      self.metrics += ('latency',)
      times = [dict((name, ms) for name, _, ms in latency.layer_ms(k))
               for k in (dense, keep)]
      costs['latency'] = tuple(
          [(l.name, l.kind, t.get(l.name, 0.0)) for l in model.layers]
          for t in times)
    self.rows = []
    for index, layer in enumerate(model.layers):
      widths = [(int(w.value(dense)), int(w.value(keep)))
                for w in (layer.inputs, layer.outputs)]
      self.rows.append((layer.name, layer.kind, widths[0], widths[1], {
          m: (costs[m][0][index][2], costs[m][1][index][2]) for m in costs}))

  def total(self, metric, after=True):
    """The model's cost in `metric` ('flops' or 'params')."""
    return sum(row[4][metric][1 if after else 0] for row in self.rows)

  def to_dict(self):
    """The report as a JSON-serializable dict."""
    return {
        'budget': str(self.budget), 'allowed': self.allowed,
        'layers': [dict([('name', n), ('kind', k), ('inputs', list(i)),
                         ('outputs', list(o))] +
                        [(m, list(c[m])) for m in self.metrics])
                   for n, k, i, o, c in self.rows],
        'totals': {m: [self.total(m, False), self.total(m)]
                   for m in self.metrics}}

  def format_table(self):
    """The report as a text table."""
    def arrow(pair, scale=int):
      return '%s -> %s' % (count(scale(pair[0])), count(scale(pair[1])))
    def ms(pair):
      return '%.3f -> %.3f' % pair
    latency = 'latency' in self.metrics
    rows = [(name, kind, arrow(i), arrow(o), arrow(c['params']),
             arrow(c['flops'])) + ((ms(c['latency']),) if latency else ())
            for name, kind, i, o, c in self.rows]
    total = ('total', '', '', '', arrow((self.total('params', False),
                                         self.total('params'))),
             arrow((self.total('flops', False), self.total('flops')))) + (
                 (ms((self.total('latency', False),
                      self.total('latency'))),) if latency else ())
    out = table(('layer', 'kind', 'inputs', 'outputs', 'params', 'FLOPs') +
                (('ms',) if latency else ()), rows, total)
    metric = self.budget.kind
    out.append('budget %s: %s x%.4f now allowed, x%.4f reached' % (
        self.budget, metric, self.allowed / self.total(metric, False),
        self.total(metric) / self.total(metric, False)))
    return '\n'.join(out)
