"""Budgets: what the exported graph may cost, in place of a sparsity.

    >>> from tf1prune.plan.budget import parse_budget
    >>> budget = parse_budget('flops:0.5')
    >>> budget.kind, budget.value, budget.relative
    ('flops', 0.5, True)
    >>> parse_budget('params:2e6').relative, budget.ratio(dense=4e6)
    (False, 0.5)
    >>> parse_budget('latency:0.5').relative, parse_budget('latency:3.5ms')
    (True, Budget(kind='latency', value=3.5, absolute=True))

The `budget` hparam is `<kind>:<value>`: `flops` (2 x the multiply-adds of
the exported graph's convolutions, dense layers and LRNs per example, as
`strip_pruning_vars --shrink` reports them), `params` (their weights and
biases) or `latency` (their time on a runtime, from a latency table,
`tf1prune.latency`). A value in (0, 1] is a ratio of the dense model's cost;
for `flops` and `params` a value above 1 is the cost itself
(`flops:1.2e9`), for `latency` a value in milliseconds is written with
`ms` (`latency:3.5ms`). The schedule ramps the cost the
way `target_sparsity` ramps the sparsity: the same curve, begin and end
steps and frequency, from the dense cost (ratio 1) down to the budget
(`cost_ratio_at`).
"""

import collections
import numbers

from tf1prune.plan.schedule import sparsity_at, sparsity_tensor

__all__ = ['BUDGET_KINDS', 'CRITERIA', 'NORMALIZATIONS', 'Budget', 'amount',
           'parse_budget']

BUDGET_KINDS = ('flops', 'params', 'latency')
CRITERIA = ('l1', 'l2', 'taylor', 'bn_scale')
NORMALIZATIONS = ('mean', 'max', 'none')


class Budget(collections.namedtuple('Budget', ['kind', 'value',
                                               'absolute'])):
  """A parsed `budget` hparam: `kind` ('flops', 'params' or 'latency'),
  `value`, and `absolute` (a cost, not a ratio of the dense model's)."""

  def __new__(cls, kind, value, absolute=None):
    if absolute is None:
      absolute = kind != 'latency' and value > 1.0
    return super(Budget, cls).__new__(cls, kind, value, absolute)

  @property
  def relative(self):
    """True when `value` is a ratio of the dense cost."""
    return not self.absolute

  def ratio(self, dense):
    """The budget as a ratio of `dense`, the dense model's cost.

    Raises:
      ValueError: an absolute budget at or above the dense cost.
    """
    if self.relative:
      return float(self.value)
    if self.value >= dense:
      raise ValueError(
          'budget %s is not below the dense model\'s %s, %s: nothing would '
          'be pruned; give a lower budget, or a ratio in (0, 1] such as '
          '%s:0.5' % (self, self.kind, '%.4g ms' % dense if self.kind ==
                      'latency' else '{:,}'.format(int(dense)), self.kind))
    return float(self.value) / float(dense)

  def check_reachable(self, least, dense, minimums):
    """Raises ValueError if `least` (the cost with every group at its
    minimum) is above this budget of the `dense` cost.

    Args:
      least, dense: costs in this budget's kind (FLOPs, parameters, ms).
      minimums: what sets the minimums, for the message (e.g.
        'channel_group_min_channels=1 and 2 at least, ...').
    """
    if least <= self.ratio(dense) * dense:
      return
    raise ValueError(
        'budget %s is below what the pruned model can cost: with every '
        'group at its minimum (%s) it costs %s %s, %.4f of the dense %s; '
        'give a budget of at least %s:%.4f, or lower the minimums' % (
            self, minimums, amount(least, self.kind), self.kind,
            least / dense, amount(dense, self.kind), self.kind,
            least / dense))

  def __str__(self):
    return '%s:%g%s' % (self.kind, self.value,
                        'ms' if self.absolute and self.kind == 'latency'
                        else '')


def amount(value, kind):
  """A cost of budget kind `kind` as text: '1,234' or '3.5 ms'."""
  return ('%.4g ms' % value if kind == 'latency' else
          '{:,}'.format(int(value)))


def parse_budget(text):
  """Parses a `budget` hparam: '' -> None, 'flops:0.5' -> `Budget`.

  Raises:
    ValueError: an unknown kind, a value that is not a number, or a value
      <= 0; the message names the value and the forms allowed.
  """
  text = (text or '').strip()
  if not text:
    return None
  kind, sep, value = text.partition(':')
  kind = kind.strip().lower()
  forms = ('budget must look like flops:0.5, params:0.4 or latency:0.5 (a '
           'ratio of the dense cost, in (0, 1]), flops:1.2e9 (FLOPs per '
           'example) or latency:3.5ms')
  if not sep or kind not in BUDGET_KINDS:
    raise ValueError('%s; got %r (kinds: %s)' % (forms, text,
                                                 ', '.join(BUDGET_KINDS)))
  value = value.strip().lower()
  in_ms = kind == 'latency' and value.endswith('ms')
  try:
    number = float(value[:-2] if in_ms else value)
  except ValueError:
    raise ValueError('%s; got %r, whose value is not a number' % (forms, text))
  if not number > 0.0 or number != number or number == float('inf'):
    raise ValueError('%s; got %r: the value must be > 0 and finite'
                     % (forms, text))
  if kind == 'latency' and not in_ms and number > 1.0:
    raise ValueError('%s; got %r: a latency ratio is in (0, 1]; write a time '
                     'with ms (latency:%gms)' % (forms, text, number))
  return Budget(kind, number, True if in_ms else None)


def _checked_ratio(ratio):
  if not (isinstance(ratio, numbers.Real) and 0.0 < ratio <= 1.0):
    raise ValueError('a budget ratio must be in (0, 1], got %r' % (ratio,))
  return float(ratio)


def cost_ratio_at(step, ratio, schedule):
  """The scheduled cost ratio at `step`, as a Python float.

  Args:
    step: the global step.
    ratio: the budget as a ratio of the dense cost, in (0, 1].
    schedule: the `PolynomialDecaySparsity` whose begin and end steps and
      exponent the cost follows (its sparsities are not used).
  """
  return 1.0 - sparsity_at(step, 0.0, 1.0 - _checked_ratio(ratio),
                           schedule.begin_step, schedule.end_step,
                           schedule.exponent)


def cost_ratio_tensor(step, ratio, schedule, name=None):
  """`cost_ratio_at` as a float32 scalar tensor of the int tensor `step`."""
  return 1.0 - sparsity_tensor(step, 0.0, 1.0 - _checked_ratio(ratio),
                               schedule.begin_step, schedule.end_step,
                               schedule.exponent, name or 'budget_schedule')
