"""contrib's CIFAR-10 pruning example on tf1prune: no bazel, today's TensorFlow.

    >>> import tensorflow.compat.v1 as tf, tf1prune
    >>> from cifar10_example import model
    >>> with tf.Graph().as_default():
    ...   logits = model.inference(tf.zeros([4, 8, 8, 1]))
    ...   logits.shape.as_list(), len(tf1prune.get_masks())
    ([4, 10], 5)

Modules: `model` (the masked CNN), `input_data` (CIFAR-10 binary files or the
embedded scikit-learn digits, as tf.data), `download` (the official archive),
`train` and `eval` (the scripts behind bin/cifar10_train and bin/cifar10_eval),
`frozen` (inference checkpoint, frozen .pb, its accuracy and size) and
`pipeline` (bin/tf1prune_demo: dense vs pruned, end to end).
"""
