"""Benchmark: MobileNet v1, v2 and an EfficientNet-B0-style net, shrunk at 50%.

    python -m bench.shrink_mobile --quick

Builds each net of `bench._mobile_nets` (width 0.5, 1000 classes, batch
norm in inference mode) under `tf1prune.pruning_scope()`, prunes every conv
but the logits by `coupled_filter` at 50% with random weights and batch-norm
statistics (`tests.support.pruned_nets.prune_and_save`, as the shrink's tests
do), strips the checkpoint and shrinks it. Reports the shrink's
parameter and FLOPs ratios, its stops, the outputs' largest difference, and
the latency of the shrunk graph against the unshrunk one at batch 1, 16 and
32 (`--batches`), both timed in this process, interleaved, one intra-op
thread each (paired ratios), with the machine's load average: once with the
graphs as exported (any batch size) and once with the input's batch size
fixed before shrinking (`--forms` picks; where the shrink still makes extra
input channels, they are built per call in the first and are constants in
the second; its border maps are constants in both).

Beside the graphs as exported, a third graph is timed: the shrunk graph with
each border map replaced by a plain bias (its interior value), which is what
a net built with the shrunk layer sizes and never pruned would run (not
exact at the borders: timed only). Shrunk over it is what the exact borders
cost; it over unshrunk is how TensorFlow's kernels follow the FLOPs. The
`tflite` form converts both graphs with TensorFlow's TFLite converter and
times them in its interpreter, one thread (XNNPACK on TF 2.x), what a phone
runs. Results: bench/results/shrink_mobile.json (`--quick`: MobileNet v2
only, 32x32 input, batch 1 and 2, written to shrink_mobile_quick.json).
"""

import argparse
import os
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from bench import _mobile_nets
from bench._paired import interleaved_samples, load_average, medians, paired_ratio
from bench._timing import one_thread_session, write_results
from tests.support.pruned_nets import prune_and_save
from tf1prune.export.shrink.border_maps import SUFFIX as MAP_SUFFIX

NETS = ('mobilenet_v1', 'mobilenet_v2', 'efficientnet_b0')
FORMS = ('any_batch', 'fixed_batch', 'tflite')
MAP_ADD = MAP_SUFFIX + '/add'   # the border map's Add (border_maps.py)


def _prune(name, size, width, directory):
  """Checkpoints net `name` pruned at 50%; returns its output node name."""
  return prune_and_save(
      lambda: _mobile_nets.build(name, size, 1000, width), directory).output


def _with_batch(graph_def, batch):
  """A copy of `graph_def` whose `images` placeholder has batch `batch`."""
  fixed = tf.GraphDef()
  fixed.CopyFrom(graph_def)
  for node in fixed.node:
    if node.name == 'images':
      node.attr['shape'].shape.dim[0].size = batch
  return fixed


def _same_shapes(graph_def, output):
  """`graph_def` (shrunk) with each border map replaced by a BiasAdd of its
  interior value: the layer sizes of the shrunk net, no map (timing only)."""
  bases = [n.name[:-len('/add')] for n in graph_def.node
           if n.name.endswith(MAP_ADD)]
  graph = tf.Graph()
  with graph.as_default():
    tf.import_graph_def(graph_def, name='')
  with tf.Session(graph=graph) as sess:
    values = sess.run([base + '/value:0' for base in bases])
  edited = tf.GraphDef()
  edited.CopyFrom(graph_def)
  nodes = {n.name: n for n in edited.node}
  for base, value in zip(bases, values):
    _, height, width, _ = tf.make_ndarray(nodes[base + '/shape'].attr['value']
                                          .tensor)
    bias = edited.node.add(name=base + '/interior', op='Const')
    bias.attr['dtype'].type = tf.float32.as_datatype_enum
    bias.attr['value'].tensor.CopyFrom(tf.make_tensor_proto(
        value.reshape(-1, value.shape[-1])[height // 2 * width + width // 2]))
    target, = [n for n in edited.node
               if n.op == 'Reshape' and n.input[0] == base + '/add']
    target.op = 'BiasAdd'
    target.attr.clear()
    target.attr['T'].type = tf.float32.as_datatype_enum
    target.input[:] = [nodes[base + '/flat'].input[0], bias.name]
  return tf.graph_util.extract_sub_graph(edited, [output])


def _tflite_runner(graph_def, output, shape, work, tag):
  """Converts `graph_def` with TFLite's converter; a function feed -> output
  that runs it in the interpreter on one thread."""
  path = os.path.join(work, tag + '.pb')
  with open(path, 'wb') as f:
    f.write(graph_def.SerializeToString())
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


def _runners(form, graph_def, small_def, same_shapes, output, shape, work,
             entry):
  """{'unshrunk': run, 'shrunk': run[, 'same_shapes': run]} for `form`, each
  run a function of the images to the output."""
  def session(proto):
    sess = one_thread_session(proto)
    return lambda feed: sess.run(output + ':0', {'images:0': feed})

  if form == 'tflite':
    return {'unshrunk': _tflite_runner(graph_def, output, shape, work, 'big'),
            'shrunk': _tflite_runner(small_def, output, shape, work, 'small')}
  if form == 'fixed_batch':
    # As a deployment graph has it: extra channels, where the shrink still
    # makes some, are constants built once instead of per call.
    fixed = _with_batch(graph_def, shape[0])
    fixed_small, report = tf1prune.shrink_graph_def(fixed, [output])
    entry['fixed_batch_flops_ratio'] = report.flops_after / report.flops_before
    return {'unshrunk': session(fixed), 'shrunk': session(fixed_small)}
  return {'unshrunk': session(graph_def), 'shrunk': session(small_def),
          'same_shapes': session(same_shapes)}


def measure(name, size, width, batches, repeats, forms=FORMS):
  """Prunes, strips, shrinks and times net `name`; a dict for the results."""
  with tempfile.TemporaryDirectory(prefix='shrink_mobile_') as work:
    return _measure(name, size, width, batches, repeats, forms, work)


def _measure(name, size, width, batches, repeats, forms, work):
  output = _prune(name, size, width, work)
  stripped = os.path.join(work, 'stripped.pb')
  small = os.path.join(work, 'shrunk.pb')
  tf1prune.strip_checkpoint(work, [output], stripped)
  report = tf1prune.shrink_pb(stripped, [output], small)
  result = dict(net=name, size=size, width=width,
                params_ratio=report.params_after / report.params_before,
                flops_ratio=report.flops_after / report.flops_before,
                stops=[str(s) for s in report.stops], latency={})
  graph_def, small_def = tf.GraphDef(), tf.GraphDef()
  for path, proto in ((stripped, graph_def), (small, small_def)):
    with open(path, 'rb') as f:
      proto.ParseFromString(f.read())
  same_shapes = _same_shapes(small_def, output)
  rs = np.random.RandomState(1)
  for batch in batches:
    entry = result['latency'][str(batch)] = {}
    feed = rs.uniform(0, 1, [batch, size, size, 3]).astype(np.float32)
    for key in forms:
      runners = _runners(key, graph_def, small_def, same_shapes, output,
                         feed.shape, work, entry)
      want = runners['unshrunk'](feed)
      got = runners['shrunk'](feed)
      load = load_average()
      samples = interleaved_samples(
          {k: (lambda run=run: run(feed)) for k, run in runners.items()},
          repeats)
      ratio = paired_ratio(samples, 'shrunk', 'unshrunk')
      entry[key] = dict(
          ratio=ratio, medians_s=medians(samples), samples_s=samples,
          load_before=load, load_after=load_average(),
          max_diff=float(np.abs(got - want).max() / np.abs(want).max()))
      line = ('%s batch %d (%s): shrunk/unshrunk latency %.3f (FLOPs %.3f, '
              'latency/FLOPs %.2f), max diff %.1e' % (
                  name, batch, key, ratio, result['flops_ratio'],
                  ratio / result['flops_ratio'], entry[key]['max_diff']))
      if 'same_shapes' in runners:
        entry[key]['same_shapes_ratio'] = paired_ratio(
            samples, 'same_shapes', 'unshrunk')
        entry[key]['shrunk_vs_same_shapes'] = paired_ratio(
            samples, 'shrunk', 'same_shapes')
        line += '; same shapes without maps %.3f, shrunk/it %.3f' % (
            entry[key]['same_shapes_ratio'],
            entry[key]['shrunk_vs_same_shapes'])
      print(line + ', load %.1f' % (load or 0.0), flush=True)
  print('%s width %s at %dx%d: params x%.3f, FLOPs x%.3f, %d stops' % (
      name, width, size, size, result['params_ratio'], result['flops_ratio'],
      len(report.stops)))
  return result


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--repeats', type=int, default=None)
  parser.add_argument('--width', type=float, default=0.5)
  parser.add_argument('--nets', default=None,
                      help='comma-separated; default %s (--quick: '
                           'mobilenet_v2 only)' % ','.join(NETS))
  parser.add_argument('--batches', default=None,
                      help='comma-separated batch sizes; default 1,16,32 '
                           '(--quick: 1,2)')
  parser.add_argument('--forms', default=','.join(FORMS),
                      help='comma-separated, of %s' % ', '.join(FORMS))
  args = parser.parse_args(argv)
  forms = tuple(args.forms.split(','))
  if not forms or any(f not in FORMS for f in forms):
    raise ValueError('--forms must be a comma-separated list of %s, got %r'
                     % (', '.join(FORMS), args.forms))
  tf.disable_eager_execution()
  size, batches = (32, (1, 2)) if args.quick else (224, (1, 16, 32))
  if args.batches:
    batches = tuple(int(b) for b in args.batches.split(','))
  nets = args.nets or ('mobilenet_v2' if args.quick else ','.join(NETS))
  repeats = args.repeats or (3 if args.quick else 7)
  results = {'tf_version': tf.__version__, 'nets': {}}
  for name in nets.split(','):
    results['nets'][name] = measure(name, size, args.width, batches, repeats,
                                    forms)
  write_results('shrink_mobile_quick' if args.quick else 'shrink_mobile',
                results)


if __name__ == '__main__':
  main()
