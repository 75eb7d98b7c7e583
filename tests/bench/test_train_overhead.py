"""The training-overhead bench: which candidates it times, against what, and
that each masked way steps its own graph."""

import pytest

from bench import train_overhead
from bench._timing import cpu_model


def test_all_candidates_by_default():
  assert train_overhead.with_bases(None) == list(train_overhead.CANDIDATES)


@pytest.mark.parametrize('ways,timed', [
    (['masked_same_run'],
     ['unmasked', 'masked_same_run', 'unmasked_again']),
    (['masked_pruning_hook'],
     ['unmasked', 'unmasked_monitored', 'masked_pruning_hook',
      'monitored_again']),
    (['unmasked_again'], ['unmasked', 'unmasked_again']),
    (['monitored_again', 'masked_no_update'],
     ['masked_no_update', 'unmasked', 'unmasked_again', 'unmasked_monitored',
      'monitored_again'])])
def test_a_subset_brings_its_bases(ways, timed):
  assert train_overhead.with_bases(ways) == timed
  bases = train_overhead.bases_of(timed)
  assert all(set(b) <= set(timed) and b for b in bases.values())
  assert bases['unmasked'] == ['unmasked']


def test_an_unknown_way_is_named():
  with pytest.raises(ValueError, match=r'--ways masked_same_run,hook: no '
                     r'candidate hook; the candidates are masked_no_update'):
    train_overhead.with_bases(['masked_same_run', 'hook'])


def test_the_same_run_way_updates_once_every_frequency_of_its_own_steps():
  # Sharing its graph with the masks-only way, it saw the step move twice
  # a round, and its update came every FREQUENCY / 2 of its steps.
  repeats = 1
  result = train_overhead.measure(
      batch=2, repeats=repeats, ways=['masked_no_update', 'masked_same_run'])
  assert sorted(result['samples']) == [
      'masked_no_update', 'masked_same_run', 'unmasked', 'unmasked_again']
  steps = (repeats + 1) * train_overhead.FREQUENCY  # one warm-up repeat
  assert result['masked_graph_final']['global_step'] == steps


def test_cpu_model_names_the_vector_extensions():
  text = ('processor\t: 0\nmodel name\t: AMD EPYC 9R14\n'
          'flags\t\t: fpu sse avx2 avx512f avx512_bf16\n\n'
          'processor\t: 1\nmodel name\t: AMD EPYC 9R14\n')
  assert cpu_model(text) == 'AMD EPYC 9R14 [avx2 avx512f avx512_bf16]'
  assert cpu_model('model name : Old CPU\nflags : fpu sse2\n') == 'Old CPU'
  assert cpu_model('') == ''
