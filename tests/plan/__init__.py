"""Tests of tf1prune.plan: hparams, the spec, the schedule, the plan."""
