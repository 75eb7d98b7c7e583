"""Which entries of a weight an index or a bool mask selects.

    >>> import numpy as np
    >>> from tf1prune.masks import index_mask
    >>> index_mask([2, 3], np.s_[:, 0]).astype(int).tolist()
    [[1, 0, 0], [1, 0, 0]]

The one selection of locked entries: graph locks (`tf1prune.lock`), Keras
locks (`tf1prune.keras.lock`, `unlock`) and `prune_checkpoint --zero`.
"""

import numpy as np

__all__ = ['index_mask']


def index_mask(shape, index=None, mask=None, what='a weight'):
  """Returns a bool NumPy array of `shape`, True at `index` or where `mask`.

  The union of both selections, checked against the weight's shape.

  Args:
    shape: list of ints, the weight's shape.
    index: a NumPy index expression (`np.s_[:, :, 29, 13]`, an int, a slice,
      a tuple of ints/slices/Ellipsis, integer arrays, a bool array).
    mask: a bool array-like of exactly `shape`.
    what: the weight, as errors name it (e.g. 'weight conv1/weights').

  Returns:
    np.ndarray of dtype bool and shape `shape`: the union of both selections.

  Raises:
    ValueError: neither or a bad `index` / `mask` is given; the message names
      the argument, its value, `what` and the fix.
  """
  shape = tuple(int(d) for d in shape)
  if index is None and mask is None:
    raise ValueError('%s needs index= (a NumPy index such as np.s_[:, 0], '
                     'or ... for every entry) or mask= (a bool array of shape '
                     '%s); got neither' % (what, list(shape)))
  selected = np.zeros(shape, bool)
  if index is not None:
    try:
      selected[index] = True
    except (IndexError, TypeError, ValueError) as e:
      raise ValueError('index=%r does not fit %s of shape %s (%s); use a NumPy '
                       'index within the shape, such as np.s_[:, 0]'
                       % (index, what, list(shape), e))
  if mask is not None:
    array = np.asarray(mask)
    if array.dtype != bool or array.shape != shape:
      raise ValueError('mask= for %s must be a bool array of shape %s, got '
                       'dtype %s and shape %s; pass a bool NumPy array of '
                       'exactly that shape' % (what, list(shape), array.dtype,
                                               list(array.shape)))
    selected |= array
  return selected
