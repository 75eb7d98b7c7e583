"""The console scripts: flags in, calls into `tf1prune` out.

`strip_pruning_vars` (`tf1prune.cli.strip_pruning_vars`) freezes and strips a
checkpoint; `prune_checkpoint` (`tf1prune.cli.prune_checkpoint`) prunes a saved
checkpoint. Each has `main(argv=None) -> exit status`.

    >>> from tf1prune.cli import strip_pruning_vars
    >>> strip_pruning_vars.main(['--checkpoint_dir=/no/such/dir',
    ...                          '--output_node_names=y'])
    1
"""
