"""The pruning plan: what is pruned, to which sparsity, in which groups, when.

    >>> import tf1prune
    >>> plan = tf1prune.PruningSpec.from_hparams(tf1prune.get_pruning_hparams(
    ...     ).parse('target_sparsity=0.8,pruning_frequency=5,'
    ...             'weight_sparsity_map=[fc:0.4],global_pruning_groups=[conv],'
    ...             'do_not_prune=[logits]')).plan()
    >>> plan.is_pruning_step(10, 5), plan.is_pruning_step(9, 5)
    (True, False)
    >>> plan.weight('fc1/weights').target_sparsity, plan.weight('conv1/w').group
    (0.4, 'conv')
    >>> plan.weight('logits/w').pruned, plan.sparsity_at(100, 0.4)
    (False, 0.4)

A `PruningPlan` is made from a `tf1prune.PruningSpec` (`spec.plan()`) and
decides, in plain Python, everything both backends do alike: which weights
are pruned and how (`weight`: target sparsity, granularity, global pruning
group; `keeps_outputs`: a layer whose output channels are the model's
outputs is not pruned by a granularity that removes whole output channels
unless the user names it), which weights are ranked together
(`global_groups`), on which steps the masks are updated (`is_pruning_step`),
each weight's sparsity (`sparsity_of`), and how the kept scores are selected
(`selection`). It builds no TensorFlow ops. The graph `tf1prune.Pruning`
executes it as tensors (its predicate and schedule are tensors: pass
`tf.logical_and`, ... ) and the Keras `tf1prune.keras.Pruner` eagerly (without
the guard of the model's outputs: it has no graph to find them in), both through
`tf1prune.plan.mask_update.compute_masks`, so one plan gives one set of masks.
"""

import collections
import re

from tf1prune.masks import Block, CoupledFilter, Element

__all__ = ['PruningPlan', 'Selection', 'WeightSpec']


class WeightSpec(collections.namedtuple(
    'WeightSpec', ['name', 'pruned', 'target_sparsity', 'granularity',
                   'group'])):
  """What the plan says about one weight.

  Attributes:
    name: the weight's op name.
    pruned: False if `do_not_prune` names it (then the rest is None).
    target_sparsity: its `weight_sparsity_map` target, or None for the global
      schedule's.
    granularity: its granularity object (`tf1prune.masks`): from
      `granularity_map`, else a `Block` from `block_dims_map` or
      `block_height` x `block_width`, else `Element()`.
    group: the `global_pruning_groups` pattern it is ranked in, or None.
  """


class Selection(collections.namedtuple('Selection',
                                       ['method', 'decay', 'nbins'])):
  """How scores are kept: `threshold_method`, `threshold_decay`, `nbins`."""


def _and(a, b):
  return a and b


def _or(a, b):
  return a or b


def _case_hint(patterns, names):
  """'; regexes are case-sensitive: ...' naming the weights that `patterns`
  would match ignoring case, or ''."""
  near = ['%s matches %s' % (p, ', '.join(n for n in names
                                          if re.search(p, n, re.IGNORECASE)))
          for p in patterns
          if any(re.search(p, n, re.IGNORECASE) for n in names)]
  if not near:
    return ''
  return '; regexes are case-sensitive: ignoring case, %s' % '; '.join(near)


class PruningPlan(object):
  """The decisions of one `PruningSpec`; see the module docstring.

  Args:
    spec: a `tf1prune.PruningSpec`.
  """

  def __init__(self, spec):
    self._spec = spec

  @property
  def spec(self):
    """The `PruningSpec` this plan decides from."""
    return self._spec

  @property
  def name(self):
    """The `name` hparam: the scope of the graph's pruning ops and summaries."""
    return self._spec.name

  @property
  def schedule(self):
    """The spec's `PolynomialDecaySparsity`."""
    return self._spec.schedule

  @property
  def selection(self):
    """The `Selection` of `threshold_method`, `threshold_decay`, `nbins`."""
    spec = self._spec
    return Selection(spec.threshold_method, float(spec.threshold_decay),
                     spec.nbins)

  # ------------------------------------------------------------ what, how

  def is_pruned(self, name, mask_name=None):
    """False if a `do_not_prune` regex matches `name` or `mask_name`.

    contrib matched `do_not_prune` against the mask's name, tf1prune against
    either name.
    """
    return not self._spec.do_not_prune.matches(name, mask_name)

  def group(self, name):
    """Returns the `global_pruning_groups` pattern matching `name`, or None.

    Raises:
      ValueError: two groups match, or `name` is also in
        `weight_sparsity_map` (a group has one sparsity).
    """
    hits = self._spec.global_pruning_groups.matches(name)
    if len(hits) > 1:
      raise ValueError('weight %s matches several global_pruning_groups: %s; '
                       'make them exclusive' % (name, ', '.join(hits)))
    if hits and self._spec.weight_sparsity_map.lookup(name) is not None:
      raise ValueError('weight %s is in global_pruning_groups (%s) and in '
                       'weight_sparsity_map; a group has one sparsity, '
                       'remove it from one of them' % (name, hits[0]))
    return hits[0] if hits else None

  def granularity(self, name, previous_mask=None):
    """Returns the granularity object of weight `name`.

    Args:
      name: the weight's op name.
      previous_mask: its current mask (variable or tensor); frozen N:M
        (`2of4_frozen`) keeps its pattern.

    Raises:
      ValueError: `name` is in both `granularity_map` and `block_dims_map`,
        or is frozen N:M and `previous_mask` is None.
    """
    spec = self._spec
    structured = spec.granularity_map.lookup(name)
    if spec.budget is not None and (structured is None or
                                    structured.kind == 'filter'):
      # A budget removes whole channels: filters by channel group.
      if spec.block_dims_map.lookup(name) is None:
        return CoupledFilter(spec.group_importance, *spec.channel_groups)
    if structured is not None:
      if spec.block_dims_map.lookup(name) is not None:
        raise ValueError('weight %s is in both granularity_map and '
                         'block_dims_map; keep it in one of them' % name)
      return structured.build(spec.group_importance, previous_mask,
                              spec.channel_groups)
    height, width, pooling = spec.block
    dims = spec.block_dims_map.lookup(name, (height, width))
    if tuple(dims) == (1, 1):
      return Element()
    return Block(dims[0], dims[1], pooling)

  def weight(self, name, mask_name=None, previous_mask=None):
    """Returns the `WeightSpec` of weight `name`.

    Args:
      name: the weight's op name.
      mask_name: optional, its mask's name: `do_not_prune` matches it too.
      previous_mask: optional, its current mask, read by frozen N:M.

    Raises:
      ValueError: a list matches `name` twice, or its settings conflict.
    """
    if not self.is_pruned(name, mask_name):
      return WeightSpec(name, False, None, None, None)
    target = self._spec.weight_sparsity_map.lookup(name)
    group = self.group(name)
    return WeightSpec(name, True, target,
                      self.granularity(name, previous_mask), group)

  def _granularity_text(self, name):
    """The `granularity_map` value of weight `name` as written, or None."""
    value = self._spec.granularity_map.lookup(name)
    if value is None:
      return None if self._spec.budget is None else 'coupled_filter'
    if value.kind == 'block':
      return 'block' + 'x'.join(str(d) for d in value.args)
    if value.kind == 'nm':
      return '%dof%d%s' % (value.args + ('_frozen' if value.frozen else '',))
    return value.kind

  def names_layer(self, name, names):
    """True if the user named weight `name` in `granularity_map`.

    An entry names it when it matches `name` and not every weight of `names`:
    `.*:filter` names no layer, `Logits:filter` names `Logits/weights`.
    """
    for pattern in self._spec.granularity_map.patterns:
      regex = re.compile(pattern)
      if regex.search(name) and not all(regex.search(n) for n in names):
        return True
    return False

  def keeps_outputs(self, weight, shape, outputs, names):
    """True if `weight` stays dense because it would remove the model's outputs.

    The guard of the model's outputs: a weight whose output channels are the
    model's outputs (they reach a softmax, a softmax loss, an argmax or a
    top-k, or nothing reads them) is not pruned by a granularity that removes
    whole output channels (`filter`, `coupled_filter`, blocks over every
    input) unless the user names it (`names_layer`). Only `granularity_map`
    (and a budget's default `coupled_filter`) is guarded: contrib's
    `block_dims_map` / `block_height` x `block_width` keep contrib's
    behaviour, whatever their blocks span.

    Args:
      weight: its `WeightSpec`.
      shape: its static shape, a list of ints.
      outputs: None, or why its output channels are the model's outputs
        (`tf1prune.ChannelGroup.outputs`).
      names: the names of every masked weight.
    """
    if not weight.pruned or not outputs:
      return False
    if (self._granularity_text(weight.name) is None and
        self._spec.budget is None):
      return False    # contrib's blocks prune as contrib did (drop-in)
    return (weight.granularity.removes_outputs(list(shape)) and
            not self.names_layer(weight.name, names))

  def outputs_warning(self, weights, outputs):
    """The warning for `weights` (names) that `keeps_outputs` leaves dense.

    It names them, says why their channels are the model's outputs
    (`outputs`), and how to prune them anyway.
    """
    text = self._granularity_text(weights[0])
    return ('%s: %s stay dense: their output channels are the model\'s '
            'outputs (%s), and %s pruning would remove outputs. Name the layer '
            'in granularity_map (e.g. \'%s:%s\') to prune it anyway, or '
            'do_not_prune it to silence this.'
            % (text, ', '.join(weights), outputs, text,
               weights[0].rsplit('/', 1)[0], text))

  def unmatched(self, names, mask_names=()):
    """Returns [(hparam, patterns)] of the entries that match no weight.

    `do_not_prune` entries may match `names` or `mask_names`.
    """
    spec = self._spec
    found = [(hparam, getattr(spec, hparam).unmatched(names))
             for hparam in ('weight_sparsity_map', 'block_dims_map',
                            'granularity_map')]
    found.append(('do_not_prune', spec.do_not_prune.unmatched(
        list(names) + list(mask_names))))
    return [(hparam, patterns) for hparam, patterns in found if patterns]

  def unmatched_warnings(self, names, mask_names=()):
    """The warnings, one per hparam, for the entries `unmatched` finds.

    Each names the hparam, its entries, the weights (`names`) and, for an
    entry that would match some of them ignoring case, which.
    """
    return ['%s entries %s match no masked weight (%s)%s' % (
        hparam, patterns, ', '.join(names), _case_hint(patterns, names))
            for hparam, patterns in self.unmatched(names, mask_names)]

  def global_groups(self, items, group_of):
    """Returns {pattern: [items]} of every `global_pruning_groups` pattern.

    Args:
      items: what is pruned (weights, or coupled channel groups), in the order
        their scores are ranked (ties keep the earliest).
      group_of: item -> its group pattern, or None.

    Returns:
      An OrderedDict in the hparam's order; a pattern no item is in maps to
      an empty list.
    """
    groups = collections.OrderedDict(
        (pattern, []) for pattern in self._spec.global_pruning_groups.patterns)
    for item in items:
      pattern = group_of(item)
      if pattern is not None:
        groups[pattern].append(item)
    return groups

  # ------------------------------------------------------------ when

  def is_pruning_step(self, step, last_update_step, logical_and=_and,
                      logical_or=_or):
    """Whether the masks are updated at `step`.

    `begin_pruning_step <= step`, (`step <= end_pruning_step` or
    `end_pruning_step == -1`) and `last_update_step + pruning_frequency <=
    step`. With ints it returns a bool; with tensors pass `tf.logical_and`
    and `tf.logical_or`.
    """
    spec = self._spec
    in_range = logical_and(step >= spec.begin_pruning_step,
                           logical_or(step <= spec.end_pruning_step,
                                      spec.end_pruning_step < 0))
    return logical_and(in_range,
                       last_update_step + spec.pruning_frequency <= step)

  # ------------------------------------------------------------ how much

  def sparsity_at(self, step, target=None):
    """The spec's schedule at the int `step` (Python float).

    Args:
      step: int.
      target: optional, a `weight_sparsity_map` target that replaces
        `target_sparsity` (the same curve ending there).
    """
    schedule = self.schedule
    if target is not None:
      schedule = schedule.with_target(target)
    return schedule.sparsity_at(step)

  def sparsity_of(self, target, sparsity, schedule=None, evaluate=None,
                  minimum=min):
    """The sparsity of a weight whose `weight_sparsity_map` target is `target`.

    Args:
      target: the weight's target (`WeightSpec.target_sparsity`), or None.
      sparsity: the global sparsity now (float or float32 scalar tensor).
      schedule: the schedule that gave `sparsity`, or None when it was given
        directly.
      evaluate: schedule -> its sparsity now (`schedule.sparsity_at(step)`,
        or `schedule(step)` as a tensor).
      minimum: `min`, or `tf.minimum` for tensors.

    Returns:
      `sparsity` when `target` is None; else `schedule.with_target(target)`
      now if the schedule has `with_target`; else `sparsity * target /
      target_sparsity` (0 when `target_sparsity` is 0), at most 1.
    """
    if target is None:
      return sparsity
    if schedule is not None and hasattr(schedule, 'with_target'):
      return evaluate(schedule.with_target(target))
    global_target = self._spec.target_sparsity
    scale = target / global_target if global_target else 0.0
    return minimum(sparsity * scale, 1.0)

  def __repr__(self):
    return 'PruningPlan(%r)' % (self._spec.name,)
