"""What is pruned, how much, when: one plan for both backends.

    >>> import tf1prune
    >>> from tf1prune.plan import PruningSpec
    >>> plan = PruningSpec.from_hparams(tf1prune.get_pruning_hparams().parse(
    ...     'target_sparsity=0.8,do_not_prune=[logits]')).plan()
    >>> plan.weight('conv1/weights').pruned, plan.weight('logits/w').pruned
    (True, False)

The graph backend (`tf1prune.Pruning`) and the Keras one
(`tf1prune.keras.Pruner`) read the same hparams and run the same plan:

- `hparams`: contrib's `HParams` and `get_pruning_hparams`, in TF1's syntax;
- `regex_maps`: the `regex:value` maps and regex lists of the hparams;
- `schedule`: the gradual sparsity schedule, `step -> sparsity`, and the
  lottery rounds' `round_sparsity`;
- `spec`: `PruningSpec`, every hparam parsed and validated once;
- `pruning_plan`: `PruningPlan`, what the spec says about each weight, each
  global group and each step;
- `mask_update`: a plan's masks as TF ops (`compute_masks`), in a graph or
  eagerly;
- `coupled`: which weights are pruned per channel group (`coupled_filter`)
  and which stay dense, and the units a lock keeps.
"""

from tf1prune.plan.hparams import HParams, get_pruning_hparams
from tf1prune.plan.pruning_plan import PruningPlan, Selection, WeightSpec
from tf1prune.plan.schedule import PolynomialDecaySparsity, round_sparsity
from tf1prune.plan.spec import PruningSpec

__all__ = ['HParams', 'PolynomialDecaySparsity', 'PruningPlan', 'PruningSpec',
           'Selection', 'WeightSpec', 'get_pruning_hparams', 'round_sparsity']
