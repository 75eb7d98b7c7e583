"""A layer whose channels are the model's outputs is not filter-pruned."""

import pytest
import tensorflow.compat.v1 as tf

import tf1prune


@pytest.fixture
def warnings(monkeypatch):
  said = []
  monkeypatch.setattr(tf.logging, 'warning',
                      lambda text, *args: said.append(text % args))
  return said


def _net():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  net = tf1prune.masked_conv2d(x, 8, 3, scope='Conv1')
  net = tf.reduce_mean(net, [1, 2])
  logits = tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                           scope='Logits')
  labels = tf.placeholder(tf.int64, [2])
  tf.nn.softmax(logits, name='predictions')
  tf.losses.sparse_softmax_cross_entropy(labels, logits)


def _masks(text):
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=1,' + text))
  update = p.mask_update_op()
  p.coupled_groups()
  p.coupled_groups()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 10))
    sess.run(update)
    return {r.name: sess.run(r.mask)
            for r in tf1prune.masked_weight_records()}


def test_the_logits_group_says_it_is_the_model_output():
  _net()
  groups = tf1prune.find_channel_groups()
  assert [(str(g), g.outputs is not None) for g in groups] == [
      ('8 channels: Conv1/weights', False),
      ('10 channels: Logits/weights', True)]
  assert groups[1].outputs.startswith('they reach Softmax')


def test_coupled_filter_leaves_the_logits_dense_and_says_so_once(warnings):
  _net()
  masks = _masks('granularity_map=[.*:coupled_filter],do_not_prune=[logits]')
  assert (masks['Logits/weights'] == 1).all()
  kept = masks['Conv1/weights'].reshape(-1, 8).all(axis=0)
  assert kept.sum() == 4
  unmatched = [w for w in warnings if 'match no masked weight' in w]
  assert len(unmatched) == 1
  assert 'ignoring case, logits matches Logits/weights' in unmatched[0]
  outputs = [w for w in warnings if "the model's outputs" in w]
  assert len(outputs) == 1
  assert outputs[0].startswith('coupled_filter: Logits/weights stay dense')
  assert 'they reach Softmax' in outputs[0]


def test_naming_the_output_layer_prunes_it(warnings):
  _net()
  masks = _masks('granularity_map=[Conv:coupled_filter,Logits:coupled_filter]')
  kept = masks['Logits/weights'].all(axis=0)
  assert kept.sum() == 5
  assert not [w for w in warnings if "the model's outputs" in w]
