"""The TF1 graph backend, running: the mask updates beside training.

    >>> import numpy as np, tensorflow.compat.v1 as tf, tf1prune
    >>> from tf1prune import training
    >>> with tf.Graph().as_default():
    ...   w = tf.get_variable('w', initializer=np.arange(1., 5.))
    ...   _ = tf1prune.apply_mask(w, 'layer')
    ...   _ = tf.train.get_or_create_global_step()
    ...   update = training.Pruning(sparsity=tf.constant(0.5)).mask_update_op()
    ...   with tf.Session() as sess:
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = sess.run(update)
    ...     sess.run(tf1prune.get_masks()[0]).tolist()
    [0.0, 0.0, 1.0, 1.0]

- `pruning`: `Pruning`, the mask update ops of every masked weight, from
  the plan (`tf1prune.plan`), with summaries;
- `coupled`: which weights `coupled_filter` prunes per channel group, and
  which it leaves dense (the model's outputs);
- `hooks`: `PruningHook` (a `SessionRunHook`) and slim's `train`;
- `lottery`: `LotteryTicket`, iterative pruning with weight rewinding;
- `preview`: `shrink_preview`, what the exported graph would cost, from a
  session;
- `contrib_spec`: contrib's `Pruning._spec`, the hparams by attribute.
"""

from tf1prune.training.hooks import PruningHook, train
from tf1prune.training.lottery import LotteryTicket
from tf1prune.training.preview import ShrinkPreviewHook, shrink_preview
from tf1prune.training.pruning import Pruning

__all__ = ['LotteryTicket', 'Pruning', 'PruningHook', 'ShrinkPreviewHook',
           'shrink_preview', 'train']
