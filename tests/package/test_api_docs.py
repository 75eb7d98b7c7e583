"""docs/api.md documents the public API exactly: no name missing, none extra.

The public names are `tf1prune.__all__` and the `__all__` of the public
subpackages `tf1prune.masks`, `tf1prune.export` and `tf1prune.keras`. In
docs/api.md each has a section headed ## `tf1prune...` whose tables list the
names, in backticks, in their first column. A subpackage that cannot be
imported on this stack (tf1prune.keras on TF 1.15) is checked against the
`__all__` written in its source.
"""

import ast
import importlib
import importlib.util
import os
import re

import pytest

from tests.support.checkout import ROOT

MODULES = ['tf1prune', 'tf1prune.masks', 'tf1prune.export', 'tf1prune.keras']
_HEADING = re.compile(r'^## `(?:import )?(tf1prune[\w.]*)`', re.M)


def _api_page():
  with open(os.path.join(ROOT, 'docs', 'api.md')) as f:
    return f.read()


def documented_names(text):
  """{module: set of names} from the first table column of each section."""
  sections = _HEADING.split(text)
  names = {}
  for module, body in zip(sections[1::2], sections[2::2]):
    found = names.setdefault(module, set())
    for line in body.split('\n'):
      cells = line.split('|')
      if len(cells) < 3 or set(cells[1].strip()) <= set('-'):
        continue
      found.update(re.findall(r'`([A-Za-z_]\w*)`', cells[1]))
  return names


def _source_all(module):
  """__all__ as written in the module's source, without importing it."""
  spec = importlib.util.find_spec(module)
  with open(spec.origin) as f:
    tree = ast.parse(f.read())
  for node in tree.body:
    if (isinstance(node, ast.Assign) and
        any(getattr(t, 'id', None) == '__all__' for t in node.targets)):
      return set(ast.literal_eval(node.value))
  raise AssertionError('%s has no literal __all__' % module)


def public_names(module):
  """(set of __all__ names, the module or None when it cannot be imported)."""
  try:
    mod = importlib.import_module(module)
  except ImportError:
    return _source_all(module), None
  return set(mod.__all__), mod


def test_the_page_has_one_section_per_public_module():
  assert sorted(documented_names(_api_page())) == sorted(MODULES)


@pytest.mark.parametrize('module', MODULES)
def test_every_public_name_is_documented_and_every_documented_name_exists(
    module):
  exported, mod = public_names(module)
  documented = documented_names(_api_page()).get(module, set())
  assert sorted(exported - documented) == [], (
      'in %s.__all__, not in docs/api.md' % module)
  assert sorted(documented - exported) == [], (
      'in docs/api.md, not in %s.__all__' % module)
  if mod is not None:
    assert [n for n in sorted(exported) if not hasattr(mod, n)] == [], (
        'in %s.__all__ but not defined' % module)


def test_the_parser_reads_names_only_from_the_first_column():
  text = ('## `tf1prune.x`\n\n| names | what |\n|---|---|\n'
          '| `a`, `B_2` | uses `c` |\n\n## `import tf1prune`\n\n'
          '| names | what |\n|---|---|\n| `d` | `e` |\n')
  assert documented_names(text) == {'tf1prune.x': {'a', 'B_2'},
                                    'tf1prune': {'d'}}
