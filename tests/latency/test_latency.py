"""Latency tables: interpolation, files, timing, and a `latency:` budget."""


import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from tf1prune.channels.cost import CostModel, Geometry, Layer, Width
from tf1prune.latency import (LatencyCost, LatencyTable, LayerTimes, profile,
                              signature)

TF1 = tf.__version__.startswith('1.')


def test_times_interpolate_bilinearly_and_extrapolate_linearly():
  times = LayerTimes('c', 'conv', (1, 5, 9), (2, 6),
                     ((1.0, 3.0), (2.0, 6.0), (4.0, 10.0)))
  assert times.at(5, 6) == 6.0
  assert times.at(3, 4) == pytest.approx(
      0.25 * (1.0 + 3.0 + 2.0 + 6.0))           # the cell's middle
  assert times.at(9, 8) == pytest.approx(10.0 + (10.0 - 4.0) / 4 * 2)
  assert LayerTimes('d', 'depthwise', (4, 8), (8,), ((1.0,), (3.0,))).at(
      6) == 2.0


def test_a_table_saves_loads_and_knows_what_it_was_measured_for(tmp_path):
  table = LatencyTable([LayerTimes('c', 'conv', (1, 4), (2, 8),
                                   ((1.0, 2.0), (3.0, 4.0)))], 'tf', 1, 1,
                       step=8, machine={'cpu': 'x'},
                       signature={'c': ['conv', [8, 8]]})
  path = str(tmp_path / 'latency.json')
  table.save(path)
  loaded = LatencyTable.load(path)
  assert loaded.to_dict() == table.to_dict()
  assert loaded.matches({'c': ['conv', [8, 8]]}, 'tf', 1, 1)
  assert not loaded.matches({'c': ['conv', [8, 8]]}, 'tf', 2, 1)
  assert not loaded.matches({'c': ['conv', [4, 4]]}, 'tf', 1, 1)
  with open(path, 'w') as f:
    f.write('[]')
  with pytest.raises(ValueError, match="latency_table='.*' is not a latency "
                     "table"):
    LatencyTable.load(path)


def _conv(name, c_in, c_out, width_in, width_out, size=6):
  return Layer(name, 'conv', width_in, width_out, 9, 1, size * size, True,
               Geometry((size, size), (3, 3), (1, 1), 'SAME', (1, 1), 'Relu',
                        (c_in, c_out)))


def test_profile_times_every_layer_on_its_grid():
  layers = [_conv('a', 3, 8, Width(3, ()), Width(8, ())),
            Layer('d', 'depthwise', Width(8, ()), Width(8, ()), 9, 1, 36,
                  True, Geometry((6, 6), (3, 3), (1, 1), 'SAME', (1, 1),
                                 'Relu6', (8, 8)))]
  table = profile(layers, fractions=(0.0, 0.5, 1.0), repeats=3, copies=2)
  a, d = table['a'], table['d']
  assert (a.inputs, a.outputs) == ((1, 2, 3), (1, 4, 8))
  assert (d.inputs, d.outputs) == ((1, 4, 8), (8,))
  for times in (a, d):
    ms = np.asarray(times.ms)
    assert (ms >= 0).all()
    assert (np.diff(ms, axis=0) >= 0).all() and (np.diff(ms, axis=1) >= 0).all()
  assert table.signature == signature(layers) == {
      'a': ['conv', [6, 6], [3, 3], [1, 1], 'SAME', [1, 1], 'Relu', [3, 8]],
      'd': ['depthwise', [6, 6], [3, 3], [1, 1], 'SAME', [1, 1], 'Relu6',
            [8, 8]]}
  assert (table.runtime, table.threads, table.batch) == ('tf', 1, 1)


@pytest.mark.skipif(not TF1, reason='TF 2.x has a TFLite converter')
def test_tflite_timing_needs_tensorflow_2():
  with pytest.raises(ValueError, match="latency_runtime='tflite' needs "
                     "TensorFlow 2.x"):
    profile([], runtime='tflite')


def _chain():
  """x (3) -> a (units 0-3) -> b (units 4-7) -> y (2), with a table."""
  a = Width(0, tuple((u, 1) for u in range(4)))
  b = Width(0, tuple((u, 1) for u in range(4, 8)))
  model = CostModel(8, [_conv('a', 3, 4, Width(3, ()), a),
                        _conv('b', 4, 4, a, b),
                        _conv('y', 4, 2, b, Width(2, ()))])
  rs = np.random.RandomState(0)
  grid = (1, 2, 4)
  table = LatencyTable([
      LayerTimes(name, 'conv', (1, 3) if name == 'a' else grid,
                 (2,) if name == 'y' else grid,
                 tuple(tuple(sorted(rs.uniform(0, 1, 1 if name == 'y'
                                               else 3)))
                       for _ in range(2 if name == 'a' else 3)))
      for name in ('a', 'b', 'y')], 'tf', 1, 1)
  return model, table


def test_the_latency_cost_is_the_tables_at_the_widths_as_tensors():
  model, table = _chain()
  cost = LatencyCost(model, table)
  rs = np.random.RandomState(1)
  keeps = [rs.randint(0, 2, 8).astype(np.float64) for _ in range(5)]
  for keep in keeps:
    w_a, w_b = keep[:4].sum(), keep[4:].sum()
    expected = (table['a'].at(3, w_a) + table['b'].at(w_a, w_b) +
                table['y'].at(w_b, 2))
    assert cost.cost_of(keep) == pytest.approx(expected, abs=1e-12)
  keep = np.ones(8)
  with tf.Session() as sess:
    values = sess.run([cost.cost(tf.constant(k)) for k in keeps])
    marginals = sess.run(cost.marginals(tf.constant(keep * 0.5 + 0.25), 8))
  assert values == pytest.approx([cost.cost_of(k) for k in keeps], abs=1e-12)
  # The derivative of the bilinear pieces, by finite differences.
  base = keep * 0.5 + 0.25
  for unit in (0, 5):
    up = base.copy()
    up[unit] += 1e-6
    assert marginals[unit] == pytest.approx(
        (cost.cost_of(up) - cost.cost_of(base)) / 1e-6, rel=1e-4)


def _net():
  x = tf.placeholder(tf.float32, [None, 8, 8, 3], name='x')
  net = tf1prune.masked_conv2d(x, 16, 3, scope='a')
  net = tf1prune.masked_conv2d(net, 16, 3, scope='b')
  tf1prune.masked_fully_connected(tf.reduce_mean(net, [1, 2]), 10,
                                  activation_fn=None, scope='logits')
  tf.train.get_or_create_global_step()


def _hparams(text):
  return tf1prune.get_pruning_hparams().parse(text)


def test_a_latency_budget_reads_its_table_and_meets_it(tmp_path):
  _net()
  layers = tf1prune.Pruning(_hparams('budget=params:0.5',
                                     )).budget_plan().model.layers
  # Time grows with each width: a layer costs in * out / 100 ms.
  table = LatencyTable([
      LayerTimes(l.name, l.kind, (1, l.geometry.channels[0]),
                 (1, l.geometry.channels[1]),
                 ((0.01, l.geometry.channels[1] / 100.0),
                  (l.geometry.channels[0] / 100.0,
                   l.geometry.channels[0] * l.geometry.channels[1] / 100.0)))
      for l in layers], 'tf', 1, 1, step=4, signature=signature(layers))
  path = str(tmp_path / 'latency.json')
  table.save(path)
  pruning = tf1prune.Pruning(_hparams(
      'name=latency,budget=latency:0.5,sparsity_function_end_step=1,'
      'pruning_frequency=1,latency_table=%s' % path))
  plan = pruning.budget_plan()
  assert plan.multiple == 4            # the runtime's channel step
  assert plan.dense == pytest.approx(sum(
      t.at(t.inputs[-1], t.outputs[-1]) for t in table.layers))
  update = pruning.mask_update_op()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(tf.train.get_global_step(), 1))
    sess.run(update)
    report = pruning.budget_report(sess)
  # Within the budget; below it by less than the step of 4 channels of the
  # costliest layer (b: 4 * 16 / 100 ms, its input's and output's).
  assert 0.5 * plan.dense - 4 * (16 + 16) / 100.0 < report.total(
      'latency') <= 0.5 * plan.dense
  kept = [o[1] for _, _, _, o, _ in report.rows][:2]
  assert all(k % 4 == 0 for k in kept), kept
  assert report.format_table().splitlines()[0].split()[-1] == 'ms'


def test_a_latency_budget_needs_a_table_path():
  _net()
  with pytest.raises(ValueError, match=r'budget latency:0.5 needs '
                     r'latency_table=PATH'):
    tf1prune.Pruning(_hparams('budget=latency:0.5')).budget_plan()


@pytest.mark.parametrize('text,message', [
    ('latency:2', 'a latency ratio is in \\(0, 1\\]; write a time with ms '
                  '\\(latency:2ms\\)'),
    ('latency:fast', "whose value is not a number"),
])
def test_a_bad_latency_budget_names_the_fix(text, message):
  with pytest.raises(ValueError, match=message):
    tf1prune.plan.budget.parse_budget(text)
