"""What the shrink tests share: weights, a shrink checked against the graph
it came from, and the stop reasons docs/structured.md lists.

    >>> from tests.support.shrunk_graphs import biases, glorot, is_documented
    >>> [w.shape for w in glorot(0, [3, 3, 2, 4], [4, 2])]
    [(3, 3, 2, 4), (4, 2)]
    >>> (biases(0, 3, negative=[1]) > 0).tolist()
    [True, False, True]
    >>> is_documented('it is a graph output'), is_documented('it is late')
    (True, False)
"""

import os
import re

import numpy as np
import tensorflow.compat.v1 as tf

import tf1prune
from tests.support.checkout import ROOT
from tests.support.graphs import run_graph_def


def glorot(seed, *shapes):
  """float32 weights from TF's own `glorot_uniform_initializer`, one per
  shape, made in a graph of their own (the test's graph holds the model)."""
  with tf.Graph().as_default(), tf.Session() as sess:
    init = tf.glorot_uniform_initializer(seed=seed)
    return sess.run([init(shape) for shape in shapes])


def biases(seed, count, negative=()):
  """float32 [count] from TF's truncated normal initializer, |b| > 0.1,
  the `negative` ones below 0 (a relu makes their channel 0) and the others
  above (a relu keeps their constant)."""
  with tf.Graph().as_default(), tf.Session() as sess:
    b = sess.run(tf.truncated_normal_initializer(seed=seed)([count]))
  b = np.abs(b) + 0.1
  b[list(negative)] *= -1.0
  return b.astype(np.float32)


def shrink_same(feed, outputs=('y',), **kwargs):
  """Shrinks the default graph; asserts each output is what it was, to
  1e-5 of its largest value. Returns (shrunk GraphDef, report)."""
  graph_def = tf.get_default_graph().as_graph_def()
  small, report = tf1prune.shrink_graph_def(graph_def, list(outputs),
                                            **kwargs)
  for name in outputs:
    want = run_graph_def(graph_def, feed, name + ':0')
    got = run_graph_def(small, feed, name + ':0')
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max(), name
  return small, report


def stops(report):
  """[(layer, node, op, reason, channels)] of the report's stops."""
  return [(s.layer, s.node, s.op, s.reason, s.channels)
          for s in report.stops]


def documented_stops():
  """The stop reasons docs/structured.md lists (between its shrink-stops
  markers), as patterns: `<...>` is a name the stop fills in, `...` any
  text."""
  with open(os.path.join(ROOT, 'docs', 'structured.md')) as f:
    text = f.read()
  listed = text.split('<!-- shrink-stops -->')[1].split(
      '<!-- /shrink-stops -->')[0]
  spans = re.findall(r'`([^`]+)`', listed, re.S)
  return [' '.join(span.split()) for span in spans
          if len(span) >= 12 and ' ' in span]


def is_documented(reason, patterns=None):
  """True if the stop `reason` is one of `documented_stops()`."""
  for pattern in patterns or documented_stops():
    regex = re.escape(pattern).replace(re.escape('...'), '.*')
    regex = re.sub(re.escape('<') + r'[^>]*' + re.escape('>'), '.+', regex)
    if re.match(regex + '$', reason):
      return True
  return False
