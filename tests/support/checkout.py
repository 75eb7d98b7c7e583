"""Where the tests find the checkout: its root and the support scripts.

    >>> import os
    >>> from tests.support.checkout import ROOT, SUPPORT
    >>> sorted(n for n in os.listdir(ROOT) if n in ('docs', 'tests'))
    ['docs', 'tests']
    >>> os.path.basename(SUPPORT)
    'support'

ROOT is the folder that holds tests/: the checkout, or the copy of it
without tf1prune/ that bin/run_tests tests the installed wheel from.
SUPPORT is tests/support/, where the worker scripts are.
"""

import os

SUPPORT = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(SUPPORT))
