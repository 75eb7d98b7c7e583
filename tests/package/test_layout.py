"""The package's layout: which subpackage may import which, and no circle.

The subpackages are layered (docs/development.md): a module imports its own
subpackage and the layers before it, never one after it, and the Keras
backend imports nothing of the TF1 graph backend. The imports are read from
the source (`ast`), at module level and inside functions alike.
"""

import ast
import collections
import os

from tests.support.checkout import ROOT

PACKAGE = os.path.join(ROOT, 'tf1prune')
LAYERS = ['masks', 'plan', 'graph', 'channels', 'export', 'latency',
          'training', ('keras', 'cli', 'deploy')]
# Modules of the top level: the public API and the compatibility paths
# import everything; _moved imports nothing of the package.
TOP = ('tf1prune', 'tf1prune.pruning', 'tf1prune._moved')


def _rank(module):
  """The layer index of a tf1prune module, or None for the top level."""
  parts = module.split('.')
  if module in TOP or len(parts) < 2:
    return None
  for index, layer in enumerate(LAYERS):
    if parts[1] in (layer if isinstance(layer, tuple) else (layer,)):
      return index
  raise AssertionError('%s is in no layer of test_layout.LAYERS: add its '
                       'subpackage there and to docs/development.md' % module)


def _modules():
  """{module name: path} of every module of tf1prune."""
  found = {}
  for folder, _, files in os.walk(PACKAGE):
    for name in files:
      if not name.endswith('.py'):
        continue
      path = os.path.join(folder, name)
      parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
      if parts[-1] == '__init__':
        parts.pop()
      found['.'.join(parts)] = path
  return found


def _imports(path, module):
  """[(imported tf1prune module, at module level)] of a source file."""
  with open(path) as f:
    tree = ast.parse(f.read())
  top = set(id(n) for n in tree.body)
  found = []
  for node in ast.walk(tree):
    names = []
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      if node.module == 'tf1prune' or node.module.startswith('tf1prune.'):
        for alias in node.names:
          full = node.module + '.' + alias.name
          names.append(full if full in MODULES else node.module)
    elif isinstance(node, ast.Import):
      names = [a.name for a in node.names if a.name.startswith('tf1prune')]
    found.extend((name, id(node) in top) for name in names)
  del module
  return found


MODULES = _modules()


def test_every_import_goes_to_its_own_layer_or_an_earlier_one():
  wrong = []
  for module, path in sorted(MODULES.items()):
    rank = _rank(module)
    if rank is None:
      continue
    for target, _ in _imports(path, module):
      other = _rank(target)
      if other is not None and other > rank:
        wrong.append('%s imports %s' % (module, target))
  assert wrong == []


def test_the_keras_backend_imports_nothing_of_the_graph_backend():
  wrong = ['%s imports %s' % (module, target)
           for module, path in sorted(MODULES.items())
           if module.startswith('tf1prune.keras')
           for target, _ in _imports(path, module)
           if target.split('.')[1:2] in (['graph'], ['training'])]
  assert wrong == []


def test_no_circle_among_the_module_level_imports():
  edges = collections.defaultdict(set)
  for module, path in MODULES.items():
    for target, at_top in _imports(path, module):
      # A package's module imports through the package: its __init__.
      while target not in MODULES and '.' in target:
        target = target.rsplit('.', 1)[0]
      if at_top and target != module and not module.startswith(target + '.'):
        edges[module].add(target)
  state, circle = {}, []

  def visit(node, trail):
    state[node] = 'open'
    for nxt in sorted(edges[node]):
      if state.get(nxt) == 'open':
        circle.append(trail[trail.index(nxt):] + [nxt] if nxt in trail
                      else trail + [nxt])
      elif nxt not in state:
        visit(nxt, trail + [nxt])
    state[node] = 'done'

  for module in sorted(MODULES):
    if module not in state:
      visit(module, [module])
  assert circle == []
