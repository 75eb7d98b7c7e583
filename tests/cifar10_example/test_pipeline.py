"""cifar10_example end to end on the embedded digits: the model, the training
and eval scripts, and the demo (dense vs pruned, stripped, frozen .pb)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import tf1prune
from cifar10_example import cli, eval as cifar10_eval, frozen, input_data
from cifar10_example import compare, model, pipeline, train
from tests.support.checkout import ROOT
from tests.support.graphs import read_graph_def, run_graph_def

STEPS = 30


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
  return env


# --------------------------------------------------------------------- model


@pytest.mark.parametrize('shape, flat', [([2, 24, 24, 3], 2304),
                                         ([2, 8, 8, 1], 256),
                                         ([2, 32, 20, 3], 2560)])
def test_model_sizes_follow_the_input(shape, flat):
  logits = model.inference(tf.zeros(shape), num_classes=7)
  assert logits.op.name == 'logits' and logits.shape.as_list() == [2, 7]
  weights = {w.op.name: w.shape.as_list() for w in tf1prune.get_weights()}
  assert weights == {
      'conv1/weights': [5, 5, shape[3], 64], 'conv2/weights': [5, 5, 64, 64],
      'local3/weights': [flat, 384], 'local4/weights': [384, 192],
      'softmax_linear/weights': [192, 7]}
  assert [m.op.name for m in tf1prune.get_masks()] == [
      name + '/mask' for name in model.LAYERS]
  assert len(tf.losses.get_regularization_losses()) == 2  # local3, local4


def test_model_needs_known_image_size():
  with pytest.raises(ValueError, match='known height, width and channels, '
                                       r'got \((\?|None), '):
    model.inference(tf.placeholder(tf.float32, [None, None, None, 3]))


def test_model_needs_two_classes():
  with pytest.raises(ValueError, match='num_classes must be an int >= 2, got 1'):
    model.inference(tf.zeros([1, 8, 8, 1]), num_classes=1)


def test_loss_is_cross_entropy_plus_weight_decay():
  logits = model.inference(tf.zeros([4, 8, 8, 1]), weight_decay=0.5)
  labels = tf.constant([0, 1, 2, 3])
  total = model.loss(logits, labels)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    weights = {w.op.name: w for w in tf1prune.get_weights()}
    out, z, w3, w4 = sess.run([total, logits, weights['local3/weights'],
                               weights['local4/weights']])
  z = z - z.max(1, keepdims=True)
  ce = -np.mean((z - np.log(np.exp(z).sum(1, keepdims=True)))[range(4), [0, 1, 2, 3]])
  decay = 0.5 * (np.sum(w3 ** 2) + np.sum(w4 ** 2)) / 2
  np.testing.assert_allclose(out, ce + decay, rtol=1e-5)


# ------------------------------------------------------------- pruning spec


def test_pruning_spec_scales_with_max_steps():
  hp = train.pruning_spec(1000).values()
  assert (hp['name'], hp['target_sparsity']) == ('cifar10_pruning', 0.9)
  assert (hp['begin_pruning_step'], hp['end_pruning_step'],
          hp['pruning_frequency']) == (200, 600, 10)
  assert (hp['sparsity_function_begin_step'],
          hp['sparsity_function_end_step']) == (200, 600)


def test_pruning_spec_applies_old_flag_syntax_last():
  hp = train.pruning_spec(1000, 'target_sparsity=0.95,pruning_frequency=5,'
                                'do_not_prune=[conv1,softmax]')
  assert (hp.target_sparsity, hp.pruning_frequency) == (0.95, 5)
  assert hp.do_not_prune == ['conv1', 'softmax']
  assert hp.begin_pruning_step == 200


def test_pruning_spec_rejects_unknown_name():
  with pytest.raises(ValueError, match='unknown hparam bogus'):
    train.pruning_spec(100, 'bogus=1')


# --------------------------------------------------------------------- demo


@pytest.fixture(scope='module')
def demo(tmp_path_factory):
  """Runs the demo once on the digits with a few steps."""
  out = str(tmp_path_factory.mktemp('demo'))
  lines = []
  source = input_data.DigitsSource()
  with tf.Graph().as_default():
    summary = pipeline.run_demo(source, out, max_steps=STEPS, batch_size=32,
                                log_every_secs=0.0,
                                log=lambda fmt, *a: lines.append(fmt % a))
  return {'out': out, 'summary': summary, 'lines': lines, 'source': source}


def test_demo_summary_content(demo):
  s = demo['summary']
  assert s['data']['name'] == 'digits'
  assert (s['data']['num_train'], s['data']['num_test']) == (1437, 360)
  assert s['runs'] == ['dense', 'pruned', 'filters']
  for run in s['runs']:
    r = s[run]
    assert isinstance(r['accuracy'], float) and 0.0 <= r['accuracy'] <= 1.0
    assert r['count'] == 360 and r['correct'] == round(r['accuracy'] * 360)
    assert r['steps'] == STEPS
    assert os.path.getsize(r['pb_path']) == r['pb_bytes'] > 0
    assert 0 < r['pb_gzip_bytes'] < r['pb_bytes']
    assert r['accuracy_drop'] == s['dense']['accuracy'] - r['accuracy']
    for batch in ('1', '256'):
      t = r['latency'][batch]
      assert 0 < t['min'] <= t['median'] <= t['max']
  assert s['dense']['sparsity'] == 0.0
  assert [l['name'] for l in s['layers']] == list(model.LAYERS)
  for layer in s['layers']:
    assert layer['dense_sparsity'] == 0.0
    # The schedule reached 0.9 (step 18 of 30, masks updated every step).
    assert layer['pruned_sparsity'] == pytest.approx(0.9, abs=1e-3)
  assert s['pruned']['sparsity'] == pytest.approx(0.9, abs=1e-3)
  assert s['pruned']['pb_gzip_bytes'] < 0.5 * s['dense']['pb_gzip_bytes']
  assert s['accuracy_drop'] == s['pruned']['accuracy_drop']
  with open(os.path.join(demo['out'], 'summary.json')) as f:
    assert json.load(f) == json.loads(json.dumps(s))


def _weights(pb_path):
  """The weight constants of each layer of a frozen .pb, by layer name."""
  graph_def = read_graph_def(pb_path)
  consts = {n.name: tf.make_ndarray(n.attr['value'].tensor)
            for n in graph_def.node if n.op == 'Const'}
  layers = {}
  for node in graph_def.node:
    if node.op in ('Conv2D', 'MatMul'):
      weight = consts.get(node.input[1].split(':')[0])
      if weight is not None:
        layers[node.name.split('/')[0]] = weight
  return layers


def test_demo_filters_model_loses_whole_filters_and_shrinks_exactly(demo):
  s = demo['summary']
  folder = os.path.dirname(s['filters']['pb_path'])
  unshrunk = _weights(os.path.join(folder, 'model_unshrunk.pb'))
  # Pruned to a FLOPs budget of x0.3: whole filters are zero (a filter is
  # kept or gone), the logits layer keeps all of its 10 outputs, and the
  # shrink removes every emptied channel.
  empty = {name: np.all(weight.reshape(-1, weight.shape[-1]) == 0, axis=0)
           for name, weight in unshrunk.items()}
  assert not empty['softmax_linear'].any()
  assert empty['conv1'].any() or empty['conv2'].any()
  assert s['filters']['budget'] == 'flops:0.3'
  assert s['filters']['shrink_report']['stops'] == []
  assert 0.29 * s['dense']['flops'] < s['filters']['flops'] <= \
      0.3 * s['dense']['flops']
  # The shrunk .pb computes what the unshrunk one does, on the test images.
  images, _ = frozen.test_arrays(demo['source'])
  outputs = []
  for path in (os.path.join(folder, 'model_unshrunk.pb'),
               s['filters']['pb_path']):
    outputs.append(run_graph_def(compare.load_graph_def(path),
                                 {'images:0': images}, 'logits:0'))
  scale = np.max(np.abs(outputs[0]))
  np.testing.assert_allclose(outputs[1], outputs[0], atol=1e-5 * scale)
  # Parameters and FLOPs are the shrink report's, which counts the layers of
  # the written graph; the dense and pruned graphs keep every entry.
  report = s['filters']['shrink_report']['totals']
  assert s['filters']['params'] == report['params_after']
  assert s['filters']['flops'] == report['flops_after']
  assert report['params_before'] == s['dense']['params'] == s['pruned']['params']
  assert report['flops_before'] == s['dense']['flops'] == s['pruned']['flops']
  assert s['filters']['params'] < s['dense']['params']
  assert s['filters']['flops'] < s['dense']['flops']


def test_demo_params_are_the_layer_entries_of_the_graph(demo):
  layers = _weights(demo['summary']['dense']['pb_path'])
  biases = sum(w.shape[-1] for w in layers.values())
  assert demo['summary']['dense']['params'] == sum(
      w.size for w in layers.values()) + biases


def test_demo_plot_is_a_png(demo):
  path = demo['summary']['plot']
  if path is None:
    pytest.skip('matplotlib is not installed: the demo writes no plot')
  with open(path, 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'


def test_demo_logs_progress(demo):
  progress = [l for l in demo['lines'] if l.startswith('step ')]
  assert progress[-1].startswith('step %d/%d  loss ' % (STEPS, STEPS))
  assert all('examples/sec  sparsity ' in l for l in progress)
  assert any('sparsity 90.0% (schedule 90.0%)' in l for l in progress)
  # The filters model: its FLOPs reached the budget with the schedule.
  assert progress[-1].endswith(', schedule x0.300)')
  assert ' (flops x0.' in progress[-1]
  assert any(l.startswith('pruned: frozen .pb ') for l in demo['lines'])
  assert any(l.startswith('filters: shrunk ') for l in demo['lines'])


def test_demo_table(demo):
  table = pipeline.format_table(demo['summary'])
  s = demo['summary']
  assert 'test accuracy, frozen .pb' in table
  for run in s['runs']:
    assert '%.2f%%' % (100 * s[run]['accuracy']) in table
  assert '{:,} (x%.2f)'.format(s['filters']['flops']) % (
      s['filters']['flops'] / float(s['dense']['flops'])) in table
  assert '{:,} (x1.00)'.format(s['pruned']['params']) in table
  assert 'latency, batch 256' in table
  assert 'local3          256x384' in table
  assert 'the shrink of the filters model:' in table
  assert table.splitlines()[0].startswith('data: the 8x8 handwritten digits')
  # The budget the filters model was given, and what its export reached.
  assert 'budget of the filters model: FLOPs x0.3: the exported graph has ' \
      'x%.3f' % (s['filters']['flops'] / float(s['dense']['flops'])) in table
  assert s['filters']['budget_predicted'] == \
      s['filters']['history'][-1]['cost_ratio']


def test_demo_latency_budget_gets_a_table_file_and_its_batch(tmp_path):
  out = str(tmp_path)
  specs = pipeline._specs(train, 100, '', 'budget=latency:0.6,'
                          'latency_batch=16', out)
  assert specs['filters'].latency_table == os.path.join(out, 'latency.json')
  assert pipeline._latency_batches((1, 256), specs['filters']) == (1, 16, 256)
  # Given its own table, and a batch that is timed anyway: both kept.
  specs = pipeline._specs(train, 100, '', 'budget=latency:0.6,'
                          'latency_table=/t/l.json,latency_batch=256', out)
  assert specs['filters'].latency_table == '/t/l.json'
  assert pipeline._latency_batches((1, 256), specs['filters']) == (1, 256)
  # A FLOPs budget has no table.
  specs = pipeline._specs(train, 100, '', '', out)
  assert specs['filters'].latency_table == ''
  assert pipeline._latency_batches((1, 256), specs['filters']) == (1, 256)


def test_demo_latency_budget_line_compares_the_table_and_the_timing():
  spec = train.pruning_spec(100, pipeline.FILTER_HPARAMS).parse(
      'budget=latency:0.5,latency_table=/t/l.json,latency_batch=16')
  timing = {'16': {'median': 0.004}, '1': {'median': 0.001}}
  summary = {'dense': {'latency': timing},
             'filters': {'budget': 'latency:0.5', 'budget_predicted': 0.5,
                         'pruning_hparams': spec.values(),
                         'latency': {'16': {'median': 0.003},
                                     '1': {'median': 0.0009}}}}
  assert pipeline._budget_line(summary) == (
      'budget of the filters model: latency x0.5 at batch 16 (tf, 1 '
      'thread(s); layer times in /t/l.json): the table predicts x0.50, '
      'measured x0.75')
  summary['filters']['budget'] = None
  assert pipeline._budget_line(summary) is None


def test_frozen_pb_has_no_masks_and_matches_the_checkpoint(demo):
  pb = demo['summary']['pruned']['pb_path']
  graph_def = read_graph_def(pb)
  ops = {n.op for n in graph_def.node}
  names = [n.name for n in graph_def.node]
  assert not ops & {'VariableV2', 'VarHandleOp', 'ReadVariableOp'}
  assert not [n for n in names if n.endswith('/mask') or 'threshold' in n]
  assert 'images' in names and 'logits' in names
  checkpoint = tf.train.latest_checkpoint(
      os.path.join(demo['out'], 'pruned', 'train'))
  result = cifar10_eval.evaluate(demo['source'], checkpoint)
  assert result['global_step'] == STEPS
  assert result['correct'] == demo['summary']['pruned']['correct']


def test_frozen_pb_loads_and_scores_the_same_on_the_other_stack(
    demo, other_python, tmp_path):
  images, labels = frozen.test_arrays(demo['source'])
  np.save(str(tmp_path / 'images.npy'), images)
  np.save(str(tmp_path / 'labels.npy'), labels)
  script = textwrap.dedent("""
      import sys, numpy as np, tensorflow.compat.v1 as tf
      tf.disable_eager_execution()
      from cifar10_example import frozen
      print(frozen.evaluate_pb(sys.argv[1], np.load(sys.argv[2]),
                               np.load(sys.argv[3]))['correct'])
  """)
  out = subprocess.check_output(
      [other_python, '-c', script, demo['summary']['pruned']['pb_path'],
       str(tmp_path / 'images.npy'), str(tmp_path / 'labels.npy')],
      env=_env(), stderr=subprocess.DEVNULL)
  assert int(out.decode().split()[-1]) == demo['summary']['pruned']['correct']


# ------------------------------------------------------------------ scripts


def test_train_and_eval_scripts(tmp_path):
  train_dir = str(tmp_path / 'train')
  args = ['--data_dir', str(tmp_path / 'none'), '--train_dir', train_dir,
          '--max_steps', '12', '--batch_size', '16', '--log_every_secs', '0',
          '--pruning_hparams', 'target_sparsity=0.5,pruning_frequency=1']
  run = subprocess.run([sys.executable, '-m', 'cifar10_example.train'] + args,
                       env=_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
  assert run.returncode == 0, run.stderr
  lines = [l for l in run.stderr.splitlines() if l[:2].isdigit()]
  assert 'data: the 8x8 handwritten digits' in lines[0]
  assert any(' step 12/12  loss ' in l and ' examples/sec  sparsity 50.0%' in l
             for l in lines), lines
  assert tf.train.latest_checkpoint(train_dir).endswith('model.ckpt-12')
  assert any(n.startswith('events.out.tfevents') for n in os.listdir(train_dir))
  run = subprocess.run(
      [sys.executable, '-m', 'cifar10_example.eval', '--run_once',
       '--data_dir', str(tmp_path / 'none'), '--checkpoint_dir', train_dir,
       '--eval_dir', str(tmp_path / 'eval')],
      env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      universal_newlines=True)
  assert run.returncode == 0, run.stderr
  assert 'model.ckpt-12: precision @ 1 = ' in run.stderr
  assert '/360) at step 12' in run.stderr


def test_scripts_fail_with_one_line(tmp_path, capsys):
  (tmp_path / 'data_batch_1.bin').write_bytes(b'\0' * 3073)
  status = cli.run(pipeline.main, ['--data_dir', str(tmp_path),
                                   '--output_dir', str(tmp_path / 'out')])
  err = capsys.readouterr().err
  assert status == 2
  assert err.startswith('error: %s holds part of CIFAR-10 but not '
                        'data_batch_2.bin' % tmp_path)
  assert err.count('\n') == 1
  status = cli.run(train.main, ['--data_dir', str(tmp_path / 'none'),
                                '--pruning_hparams', 'bogus=1'])
  assert status == 2
  assert capsys.readouterr().err.splitlines()[-1].startswith(
      'error: unknown hparam bogus in ')
  status = cli.run(cifar10_eval.main, ['--run_once', '--data_dir',
                                       str(tmp_path / 'none'),
                                       '--checkpoint_dir', str(tmp_path)])
  assert status == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      'error: no checkpoint to evaluate in --checkpoint_dir=%s: train first, '
      'or pass the folder holding one' % tmp_path)


@pytest.mark.parametrize('script', [train.main, pipeline.main])
def test_max_steps_zero_is_refused_not_read_as_the_default(script, tmp_path,
                                                           capsys):
  """`--max_steps=0` trained the default 3000 steps (100000 on CIFAR-10)."""
  status = cli.run(script, ['--max_steps', '0', '--data_dir',
                            str(tmp_path / 'none'), '--train_dir' if
                            script is train.main else '--output_dir',
                            str(tmp_path / 'out')])
  assert status == 2
  assert capsys.readouterr().err == ('error: --max_steps must be >= 1, got 0; '
                                     'leave it out for the default\n')
  assert not os.path.exists(str(tmp_path / 'out'))


def test_save_checkpoint_secs_zero_is_refused(tmp_path, capsys):
  """With 0 no checkpoint was written, not even the last, and the script
  still said 'done ... checkpoints in <train_dir>'."""
  status = cli.run(train.main, ['--save_checkpoint_secs', '0', '--max_steps',
                                '2', '--data_dir', str(tmp_path / 'none'),
                                '--train_dir', str(tmp_path / 'train')])
  assert status == 2
  assert capsys.readouterr().err == (
      'error: --save_checkpoint_secs must be >= 1, got 0: then no checkpoint '
      'is written, not even the last; a large value writes only the last\n')
  assert not os.path.exists(str(tmp_path / 'train'))


def test_a_tf2_op_error_is_reported_by_its_own_line(capsys):
  """TF 2.x starts an op error with 'Graph execution error:', which was all
  the one `error:` line said (e.g. for cifar10_eval --batch_size=0)."""
  message = ('Graph execution error:\n\nDetected at node \'BatchDatasetV2\' '
             'defined at (most recent call last):\n    File "eval.py", line '
             '55, in evaluate\nNode: \'BatchDatasetV2\'\nBatch size must be '
             'greater than zero.\n\t [[{{node BatchDatasetV2}}]]')

  def main(argv):
    raise tf.errors.InvalidArgumentError(None, None, message)

  assert cli.run(main, []) == 2
  assert capsys.readouterr().err == (
      'error: Batch size must be greater than zero.\n')


def test_eval_says_it_waits_for_a_checkpoint(tmp_path, capsys, monkeypatch):
  """Without --run_once and without a checkpoint it waited without a word."""
  sleeps = []

  def sleep(secs):
    sleeps.append(secs)
    if len(sleeps) == 2:
      raise KeyboardInterrupt

  monkeypatch.setattr(cifar10_eval.time, 'sleep', sleep)
  status = cli.run(cifar10_eval.main, ['--data_dir', str(tmp_path / 'none'),
                                       '--checkpoint_dir', str(tmp_path),
                                       '--eval_interval_secs', '7'])
  assert (status, sleeps) == (130, [7, 7])
  lines = capsys.readouterr().err.splitlines()
  assert [l.split(' ', 1)[1] for l in lines[1:-1]] == [
      'no checkpoint in --checkpoint_dir=%s yet: looking again every 7 s'
      % tmp_path]
  assert lines[-1] == 'interrupted'


@pytest.mark.parametrize('value', ['0', '-1'])
def test_num_epochs_per_decay_must_be_positive(value, tmp_path, capsys):
  """0 or less decayed the learning rate x0.1 at every step: the loss did not
  move, without a word."""
  status = cli.run(train.main, ['--num_epochs_per_decay', value,
                                '--max_steps', '2', '--data_dir',
                                str(tmp_path / 'none'), '--train_dir',
                                str(tmp_path / 'train')])
  assert status == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      'error: num_epochs_per_decay must be > 0 and decay_factor in (0, 1], '
      'got %s and 0.1' % float(value))


def test_eval_interval_secs_must_not_be_negative(tmp_path, capsys):
  status = cli.run(cifar10_eval.main, ['--data_dir', str(tmp_path / 'none'),
                                       '--checkpoint_dir', str(tmp_path),
                                       '--eval_interval_secs', '-5'])
  assert status == 2
  assert capsys.readouterr().err == (
      'error: --eval_interval_secs must be >= 0, got -5\n')


def test_demo_refuses_output_dir_it_did_not_make(tmp_path):
  (tmp_path / 'dense').mkdir()
  with pytest.raises(ValueError, match='was not made by tf1prune_demo'):
    pipeline.run_demo(input_data.DigitsSource(), str(tmp_path), max_steps=2)
