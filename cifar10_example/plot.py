"""The demo's picture: accuracy against FLOPs, and pruning over the steps.

    >>> from cifar10_example import plot
    >>> plot.schedule_points({'target_sparsity': 0.5, 'initial_sparsity': 0.0,
    ...                       'sparsity_function_begin_step': 0,
    ...                       'sparsity_function_end_step': 10,
    ...                       'sparsity_function_exponent': 1.0}, 10, 3)
    ([0, 5, 10], [0.0, 0.25, 0.5])

`write_png(summary, path)` draws a `run_demo` summary with matplotlib (the
demo's one optional dependency: without it the demo says how to install it
and writes no picture).
"""

__all__ = ['schedule_points', 'write_png']


def schedule_points(hparams, max_steps, count=101):
  """The sparsity schedule of `hparams` at `count` steps from 0 to `max_steps`.

  Args:
    hparams: dict with the schedule's hparams (`target_sparsity`,
      `initial_sparsity`, `sparsity_function_begin_step`,
      `sparsity_function_end_step`, `sparsity_function_exponent`).
    max_steps: the last step.
    count: number of points, >= 2.

  Returns:
    `(steps, sparsities)`, two lists.
  """
  from tf1prune.plan.schedule import sparsity_at  # pylint: disable=g-import-not-at-top
  steps = [int(round(i * max_steps / float(count - 1))) for i in range(count)]
  values = [sparsity_at(s, hparams['initial_sparsity'],
                        hparams['target_sparsity'],
                        hparams['sparsity_function_begin_step'],
                        hparams['sparsity_function_end_step'],
                        hparams['sparsity_function_exponent'])
            for s in steps]
  return steps, [float(v) for v in values]


def write_png(summary, path):
  """Draws `summary` (from `pipeline.run_demo`) into the PNG file `path`.

  Returns:
    True, or False when matplotlib is not installed.
  """
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  runs = summary['runs']
  colors = dict(zip(runs, ['tab:gray', 'tab:orange', 'tab:green', 'tab:blue']))
  fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
  for name in runs:
    r = summary[name]
    left.scatter([r['flops'] / 1e6], [100 * r['accuracy']], s=60,
                 color=colors[name])
    left.annotate('%s\n%s' % (name, r['label']),
                  (r['flops'] / 1e6, 100 * r['accuracy']),
                  textcoords='offset points', xytext=(8, -4), fontsize=8)
  left.set_xlabel('MFLOPs per image (frozen .pb)')
  left.set_ylabel('test accuracy of the frozen .pb (%)')
  left.set_title('accuracy against cost')
  left.set_xlim(0, 1.3e-6 * max(summary[n]['flops'] for n in runs))
  left.grid(alpha=0.3)
  steps = summary['training']['max_steps']
  for name in runs:
    hparams = summary[name].get('pruning_hparams')
    if not hparams:
      continue
    history = summary[name].get('history') or []
    if history and 'cost_ratio' in history[0]:
      # A budget: the cost it removed, against what its schedule allowed.
      xs = [h['step'] for h in history]
      right.plot(xs, [100 * (1 - h['cost_ratio_target']) for h in history],
                 color=colors[name],
                 label='%s: FLOPs removed, schedule' % name)
      right.plot(xs, [100 * (1 - h['cost_ratio']) for h in history], 's',
                 markersize=3, color=colors[name],
                 label='%s: FLOPs removed' % name)
    else:
      xs, ys = schedule_points(hparams, steps)
      right.plot(xs, [100 * y for y in ys], color=colors[name],
                 label='%s: schedule' % name)
    if history:
      right.plot([h['step'] for h in history],
                 [100 * h['sparsity'] for h in history], 'o', markersize=3,
                 color=colors[name], label='%s: weights zero' % name)
  right.set_xlabel('training step')
  right.set_ylabel('sparsity, or FLOPs removed (%)')
  right.set_title('pruning over the steps')
  right.legend(fontsize=8)
  right.grid(alpha=0.3)
  fig.suptitle(summary['data']['description'], fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return True
