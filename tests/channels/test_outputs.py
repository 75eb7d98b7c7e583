"""A layer whose channels are the model's outputs is not filter-pruned."""

import pytest
import tensorflow.compat.v1 as tf

import tf1prune


def _net(head='training'):
  """Conv1 (8) -> mean -> Logits (10) -> `head`.

  head: 'training' (a softmax and a softmax loss), 'softmax', 'inference'
  (nothing reads the logits), 'summary' (an identity read by a histogram
  summary only) or 'loss' (a mean of squares, no softmax, reads them).
  """
  tf.set_random_seed(0)
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  net = tf1prune.masked_conv2d(x, 8, 3, scope='Conv1')
  net = tf.reduce_mean(net, [1, 2])
  logits = tf1prune.masked_fully_connected(net, 10, activation_fn=None,
                                           scope='Logits')
  if head in ('training', 'softmax'):
    tf.nn.softmax(logits, name='predictions')
  if head == 'training':
    labels = tf.placeholder(tf.int64, [2])
    tf.losses.sparse_softmax_cross_entropy(labels, logits)
  if head == 'summary':
    tf.summary.histogram('logits', tf.identity(logits, name='output'))
  if head == 'loss':
    tf.reduce_mean(tf.square(logits), name='loss')


def _masks(text):
  step = tf.train.get_or_create_global_step()
  p = tf1prune.Pruning(tf1prune.get_pruning_hparams().parse(
      'target_sparsity=0.5,sparsity_function_end_step=1,' + text))
  update = p.mask_update_op()
  p.conditional_mask_update_op()
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


def test_coupled_filter_leaves_the_logits_dense_and_says_so_once(tf_warnings):
  _net()
  masks = _masks('granularity_map=[.*:coupled_filter],do_not_prune=[logits]')
  assert (masks['Logits/weights'] == 1).all()
  kept = masks['Conv1/weights'].reshape(-1, 8).all(axis=0)
  assert kept.sum() == 4
  unmatched = [w for w in tf_warnings if 'match no masked weight' in w]
  assert len(unmatched) == 1
  assert 'ignoring case, logits matches Logits/weights' in unmatched[0]
  outputs = [w for w in tf_warnings if "the model's outputs" in w]
  assert len(outputs) == 1
  assert outputs[0].startswith('coupled_filter: Logits/weights stay dense')
  assert 'they reach Softmax' in outputs[0]


def test_naming_the_output_layer_prunes_it(tf_warnings):
  _net()
  masks = _masks('granularity_map=[Conv:coupled_filter,Logits:coupled_filter]')
  kept = masks['Logits/weights'].all(axis=0)
  assert kept.sum() == 5
  assert not [w for w in tf_warnings if "the model's outputs" in w]


def _outputs(tf_warnings):
  return [w for w in tf_warnings if "the model's outputs" in w]


def _filters_kept(mask):
  return int(mask.reshape(-1, mask.shape[-1]).all(axis=0).sum())


@pytest.mark.parametrize('head,why', [
    ('inference', 'nothing reads them (Logits/BiasAdd:0)'),
    ('summary', 'nothing reads them (output:0)'),
    ('softmax', 'they reach Softmax (predictions)')])
def test_the_final_layer_is_the_model_output(head, why):
  _net(head)
  groups = tf1prune.find_channel_groups()
  assert [(str(g), g.outputs) for g in groups] == [
      ('8 channels: Conv1/weights', None),
      ('10 channels: Logits/weights', why)]


def test_logits_a_loss_reads_are_no_model_output():
  _net('loss')
  assert [g.outputs for g in tf1prune.find_channel_groups()] == [None, None]


def test_a_side_branch_nothing_reads_does_not_make_a_hidden_layer_an_output():
  x = tf.placeholder(tf.float32, [2, 6, 6, 3])
  net = tf1prune.masked_conv2d(x, 8, 3, scope='Conv1')
  tf.check_numerics(net, 'nan', name='unread_check')     # read by nothing
  tf.shape(net, name='shape_only')
  net = tf1prune.masked_conv2d(net, 4, 3, scope='Conv2')
  tf.shape(net, name='shape_of_the_output')              # no read of values
  assert [(str(g), g.outputs) for g in tf1prune.find_channel_groups()] == [
      ('8 channels: Conv1/weights', None),
      ('4 channels: Conv2/weights', 'nothing reads them (Conv2/Relu:0)')]


@pytest.mark.parametrize('granularity', ['coupled_filter', 'filter'])
@pytest.mark.parametrize('head,why', [
    ('inference', 'nothing reads them (Logits/BiasAdd:0)'),
    ('softmax', 'they reach Softmax (predictions)')])
def test_filter_pruning_leaves_the_final_layer_dense_and_says_so_once(
    tf_warnings, granularity, head, why):
  _net(head)
  masks = _masks('granularity_map=[.*:%s]' % granularity)
  assert (masks['Logits/weights'] == 1).all()
  assert _filters_kept(masks['Conv1/weights']) == 4
  assert _outputs(tf_warnings) == [
      "%s: Logits/weights stay dense: their output channels are the model's "
      "outputs (%s), and %s pruning would remove outputs. Name the layer in "
      "granularity_map (e.g. 'Logits:%s') to prune it anyway, or "
      "do_not_prune it to silence this." % (granularity, why, granularity,
                                            granularity)]


@pytest.mark.parametrize('granularity', ['coupled_filter', 'filter'])
@pytest.mark.parametrize('head', ['inference', 'softmax'])
def test_naming_the_final_layer_prunes_it(tf_warnings, granularity, head):
  _net(head)
  masks = _masks('granularity_map=[Conv:%s,Logits:%s]' % (granularity,
                                                          granularity))
  assert _filters_kept(masks['Logits/weights']) == 5
  assert _filters_kept(masks['Conv1/weights']) == 4
  assert not _outputs(tf_warnings)


def test_filter_pruning_prunes_logits_a_loss_reads(tf_warnings):
  _net('loss')
  masks = _masks('granularity_map=[.*:filter]')
  assert _filters_kept(masks['Logits/weights']) == 5
  assert not _outputs(tf_warnings)


def test_do_not_prune_logits_on_a_logits_scope_gives_the_case_hint(tf_warnings):
  _net('inference')
  masks = _masks('granularity_map=[.*:filter],do_not_prune=[logits]')
  assert (masks['Logits/weights'] == 1).all()
  unmatched = [w for w in tf_warnings if 'match no masked weight' in w]
  assert unmatched == [
      "do_not_prune entries ['logits'] match no masked weight (Conv1/weights, "
      "Logits/weights); regexes are case-sensitive: ignoring case, logits "
      "matches Logits/weights"]
  assert len(_outputs(tf_warnings)) == 1


@pytest.mark.parametrize('text,guarded', [
    ('granularity_map=[.*:block-1x2]', True),     # blocks over every input
    ('granularity_map=[.*:block2x2]', False),
    ('granularity_map=[.*:input_channel]', False),
    ('granularity_map=[.*:kernel]', False),
    ('granularity_map=[.*:element]', False),
    ('block_dims_map=[.*:-1x1]', False),          # contrib's, as contrib
    ('block_height=-1,block_width=2', False),
    ('block_height=2,block_width=2', False)])
def test_the_guard_covers_the_granularities_that_remove_whole_outputs(
    tf_warnings, text, guarded):
  _net('inference')
  masks = _masks(text)
  assert (masks['Logits/weights'] == 1).all() == guarded
  assert len(_outputs(tf_warnings)) == int(guarded)
