"""Checks a built wheel and sdist of tf1prune against the checkout (CI).

    python bin/_check_dist.py dist/tf1prune-0.1.0-py3-none-any.whl \
        dist/tf1prune-0.1.0.tar.gz

Every module of tf1prune/ is in both (and nothing else is installed), the
license file is in both, the version is tf1prune/__init__.py's, the metadata
requires no TensorFlow distribution (extras may) and declares the README as
Markdown, and the console scripts are there. twine check (README rendering)
is CI's other half. Exit status 1 with one line per problem.
"""

import email.parser
import io
import os
import re
import sys
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TF_DISTRIBUTIONS = {'tensorflow', 'tensorflow-cpu', 'tensorflow-gpu',
                    'tensorflow-macos', 'tensorflow-intel', 'tf-nightly',
                    'tf-nightly-cpu', 'intel-tensorflow'}
SCRIPTS = {'strip_pruning_vars', 'prune_checkpoint', 'check_deploy',
           'tf1prune_sensitivity'}


def _package_files():
  found = set()
  for folder, dirs, names in os.walk(os.path.join(ROOT, 'tf1prune')):
    dirs[:] = [d for d in dirs if d != '__pycache__']
    for name in names:
      if not name.endswith(('.pyc', '.pyo')):
        found.add(os.path.relpath(os.path.join(folder, name), ROOT).replace(
            os.sep, '/'))
  return found


def _version():
  with io.open(os.path.join(ROOT, 'tf1prune', '__init__.py'),
               encoding='utf-8') as f:
    return re.search(r"^__version__ = '([^']+)'$", f.read(), re.M).group(1)


def _read(name):
  with io.open(os.path.join(ROOT, name), encoding='utf-8') as f:
    return f.read()


def check_metadata(text, where):
  problems = []
  meta = email.parser.Parser().parsestr(text)
  if meta['Version'] != _version():
    problems.append('%s: Version %s, tf1prune/__init__.py says %s'
                    % (where, meta['Version'], _version()))
  for line in meta.get_all('Requires-Dist') or ():
    name = re.match(r'[A-Za-z0-9._-]+', line).group(0).lower().replace(
        '_', '-')
    if name in TF_DISTRIBUTIONS and 'extra ==' not in line:
      problems.append('%s: requires %r outside an extra: pip would install '
                      'it over the TensorFlow already there' % (where, line))
  if meta['Description-Content-Type'] != 'text/markdown':
    problems.append('%s: Description-Content-Type is %r, not text/markdown'
                    % (where, meta['Description-Content-Type']))
  return problems


def check_wheel(path):
  with zipfile.ZipFile(path) as z:
    names = set(z.namelist())
    info = {n.split('/')[0] for n in names if '.dist-info/' in n}
    if len(info) != 1:
      return ['%s: %d .dist-info folders' % (path, len(info))]
    info = info.pop()
    problems = ['%s: %s is missing' % (path, f)
                for f in sorted(_package_files() - names)]
    problems += ['%s: installs %s, which is not part of tf1prune/' % (path, n)
                 for n in sorted(names) if not n.startswith(('tf1prune/',
                                                             info + '/'))]
    licenses = [n for n in names if n.startswith(info + '/')
                and os.path.basename(n) == 'LICENSE']
    if not licenses:
      problems.append('%s: no LICENSE in %s' % (path, info))
    elif z.read(licenses[0]).decode('utf-8') != _read('LICENSE'):
      problems.append('%s: %s differs from LICENSE' % (path, licenses[0]))
    problems += check_metadata(z.read(info + '/METADATA').decode('utf-8'),
                               path)
    entry_points = z.read(info + '/entry_points.txt').decode('utf-8')
    scripts = set(re.findall(r'^(\w+) = ', entry_points, re.M))
    problems += ['%s: no console script %s' % (path, s)
                 for s in sorted(SCRIPTS - scripts)]
  return problems


def check_sdist(path):
  with tarfile.open(path) as t:
    members = t.getnames()
    top = members[0].split('/')[0]
    names = {m[len(top) + 1:] for m in members if '/' in m}
    wanted = _package_files() | {'LICENSE', 'README.md', 'setup.py',
                                 'pyproject.toml', 'MANIFEST.in'}
    problems = ['%s: %s is missing' % (path, f)
                for f in sorted(wanted - names)]
    if 'LICENSE' in names and t.extractfile(
        top + '/LICENSE').read().decode('utf-8') != _read('LICENSE'):
      problems.append('%s: LICENSE differs from the checkout' % path)
    problems += check_metadata(
        t.extractfile(top + '/PKG-INFO').read().decode('utf-8'), path)
  return problems


def main(argv):
  problems = []
  for path in argv:
    if path.endswith('.whl'):
      problems += check_wheel(path)
    elif path.endswith('.tar.gz'):
      problems += check_sdist(path)
    else:
      problems.append('%s: neither a wheel nor an sdist' % path)
  for problem in problems:
    print(problem)
  if not problems:
    print('dist ok: %s' % ', '.join(os.path.basename(p) for p in argv))
  return 1 if problems else 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
