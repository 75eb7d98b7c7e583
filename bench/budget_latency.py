"""Benchmark: does a `latency:0.5` budget give an export at half the latency?

    python -m bench.budget_latency --quick

For MobileNet v2 and an EfficientNet-B0-style net (`bench._mobile_nets`,
width 0.5, 224x224, batch norm in inference form, random weights and
batch-norm statistics), each runtime (a TF session, one thread; the TFLite
interpreter, one thread) and each batch size (1 and 16): the net's layers
are timed on that runtime (`tf1prune.latency.profile`, a table per
net, runtime and batch), `Pruning` with `budget=latency:0.5` prunes it
once to the budget, the dense and the pruned checkpoints are stripped and
the pruned one shrunk, and the two `.pb` files are timed side by side on
the same runtime (interleaved medians, paired ratio). The result per case:
the budget (0.5), what the table predicted for the pruned net, what was
measured, and the FLOPs ratio beside them. Results:
bench/results/budget_latency.json (`--quick`: MobileNet v2 at 64x64, batch
1, the TF session only, a coarse grid: budget_latency_quick.json).
"""

import argparse
import os
import tempfile
import time

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench import _mobile_nets
from tests.support.pruned_nets import randomize_batch_norm
from bench._paired import (interleaved_samples, load_average, medians,
                           paired_ratio)
from bench._timing import one_thread_session, write_results

NETS = ('mobilenet_v2', 'efficientnet_b0')
RUNTIMES = ('tf', 'tflite')


def _prune(name, size, width, runtime, batch, work, fractions, repeats):
  """Checkpoints the dense net and the net pruned to latency:0.5; returns
  (output name, the budget report)."""
  table = os.path.join(work, 'latency.json')
  hparams = ('budget=latency:0.5,sparsity_function_end_step=1,'
             'pruning_frequency=1,do_not_prune=[logits],latency_table=%s,'
             'latency_runtime=%s,latency_batch=%d' % (table, runtime, batch))
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    _, logits = _mobile_nets.build(name, size, 1000, width)
    step = tf.train.get_or_create_global_step()
    # The table is timed here with the grid asked for; the latency budget
    # then reads it (it fits the layers and the runtime).
    layers = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
        'budget=params:1,name=layers')).budget_plan().model.layers
    started = time.time()
    tf1prune.latency.profile(layers, runtime, 1, batch, fractions,
                             repeats=repeats, find_step=True).save(table)
    seconds = time.time() - started
    pruning = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(hparams))
    update = pruning.mask_update_op()
    rs = np.random.RandomState(0)
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      randomize_batch_norm(sess, rs)
      saver.save(sess, os.path.join(work, 'dense', 'model.ckpt'))
      sess.run(tf.assign(step, 1))
      sess.run(update)
      report = pruning.budget_report(sess)
      saver.save(sess, os.path.join(work, 'pruned', 'model.ckpt'))
  return logits.op.name, report, seconds


def _runner(runtime, path, output, shape):
  """A function feed -> output running the `.pb` at `path` on `runtime`."""
  if runtime == 'tflite':
    model = tf.lite.TFLiteConverter.from_frozen_graph(
        path, ['images'], [output], {'images': shape}).convert()
    interpreter = tf.lite.Interpreter(model_content=model, num_threads=1)
    interpreter.allocate_tensors()
    source = interpreter.get_input_details()[0]['index']
    sink = interpreter.get_output_details()[0]['index']

    def run(feed):
      interpreter.set_tensor(source, feed)
      interpreter.invoke()
      return interpreter.get_tensor(sink)
    return run
  sess = one_thread_session(path)
  return lambda feed: sess.run(output + ':0', {'images:0': feed})


def measure(name, size, width, runtime, batch, repeats, fractions,
            profile_repeats):
  """One case (see the module docstring); a dict for the results."""
  with tempfile.TemporaryDirectory(prefix='budget_latency_') as work:
    output, report, seconds = _prune(name, size, width, runtime, batch, work,
                                     fractions, profile_repeats)
    dense = os.path.join(work, 'dense.pb')
    small = os.path.join(work, 'shrunk.pb')
    tf1prune.strip_checkpoint(os.path.join(work, 'dense'), [output], dense)
    tf1prune.strip_checkpoint(os.path.join(work, 'pruned'), [output], small)
    shrink = tf1prune.shrink_pb(small, [output])
    shape = [batch, size, size, 3]
    runners = {'dense': _runner(runtime, dense, output, shape),
               'pruned': _runner(runtime, small, output, shape)}
    feed = np.random.RandomState(1).uniform(0, 1, shape).astype(np.float32)
    load = load_average()
    samples = interleaved_samples(
        {k: (lambda run=run: run(feed)) for k, run in runners.items()},
        repeats)
    measured = paired_ratio(samples, 'pruned', 'dense')
    predicted = report.total('latency') / report.total('latency', False)
    result = dict(
        net=name, size=size, width=width, runtime=runtime, batch=batch,
        budget=0.5, predicted=predicted, measured=measured,
        flops_ratio=shrink.flops_after / float(shrink.flops_before),
        stops=len(shrink.stops), profile_seconds=seconds,
        table_ms=report.total('latency', False), medians_s=medians(samples),
        load_before=load, load_after=load_average())
  print('%s %dx%d batch %d on %s: budget 0.5, predicted %.3f, measured %.3f '
        '(FLOPs %.3f), table timed in %.0f s, load %.1f' % (
            name, size, size, batch, runtime, predicted, measured,
            result['flops_ratio'], seconds, load or 0.0), flush=True)
  return result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--nets', default=','.join(NETS))
  parser.add_argument('--runtimes', default=','.join(RUNTIMES))
  parser.add_argument('--batches', default='1,16')
  parser.add_argument('--size', type=int, default=224)
  parser.add_argument('--repeats', type=int, default=15)
  args = parser.parse_args(argv)
  tf.disable_eager_execution()
  nets, runtimes = args.nets.split(','), args.runtimes.split(',')
  batches = [int(b) for b in args.batches.split(',')]
  size, fractions, profile_repeats = args.size, (0.0, 0.25, 0.5, 0.75,
                                                 1.0), 11
  if args.quick:
    nets, runtimes, batches, size = ['mobilenet_v2'], ['tf'], [1], 64
    fractions, profile_repeats, args.repeats = (0.0, 0.5, 1.0), 3, 5
  if tf.__version__.startswith('1.'):
    runtimes = [r for r in runtimes if r != 'tflite']
  cases = [measure(net, size, 0.5, runtime, batch, args.repeats, fractions,
                   profile_repeats)
           for net in nets for runtime in runtimes for batch in batches]
  path = write_results('budget_latency_quick' if args.quick
                       else 'budget_latency', {'cases': cases})
  print('wrote %s' % path)


if __name__ == '__main__':
  main()
