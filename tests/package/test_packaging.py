"""The package: no TensorFlow dependency, one version, what `import` says.

`bin/run_tests` runs this file from the checkout; CI runs it once more against
the installed wheel (TF1PRUNE_EXPECT_INSTALLED=1), where the checks of setup.py
skip (the copy of the tests has no setup.py) and the installed metadata is
checked instead.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import tf1prune
from tests.support.checkout import ROOT

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(
    tf1prune.__file__)))
EXPECT_INSTALLED = os.environ.get('TF1PRUNE_EXPECT_INSTALLED') == '1'
# Every name TensorFlow is distributed under, 1.15 and 2.x.
TF_DISTRIBUTIONS = {'tensorflow', 'tensorflow-cpu', 'tensorflow-gpu',
                    'tensorflow-macos', 'tensorflow-intel', 'tf-nightly',
                    'tf-nightly-cpu', 'intel-tensorflow'}

# Makes `import tensorflow` fail in a fresh process as it does where no
# TensorFlow is installed, or (BROKEN) as a TensorFlow that is installed but
# cannot load does.
_BLOCKER = textwrap.dedent('''
    import sys
    BROKEN = %r

    class NoTensorFlow(object):
      def find_spec(self, name, path=None, target=None):
        if name == 'tensorflow' or name.startswith('tensorflow.'):
          if BROKEN:
            raise ImportError('libtensorflow_framework.so.2: cannot open')
          raise ModuleNotFoundError("No module named %%r" %% name, name=name)
        return None

    sys.meta_path.insert(0, NoTensorFlow())
    sys.path.insert(0, %r)
    try:
      import tf1prune
    except ImportError as e:
      print(e)
    else:
      print('imported')
''')


def _import_without_tensorflow(broken=False):
  result = subprocess.run(
      [sys.executable, '-c', _BLOCKER % (broken, PACKAGE_PARENT)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
  assert result.returncode == 0, result.stderr.decode()
  return result.stdout.decode()


def test_import_without_tensorflow_says_what_to_install_for_each_stack():
  message = _import_without_tensorflow()
  assert 'tf1prune needs TensorFlow 1.15 or 2.x' in message
  assert 'pip install tensorflow-cpu' in message
  assert '"tf1prune[tf]"' in message
  assert ('TensorFlow 1.15, on Python 3.7:  pip install "tensorflow==1.15.5" '
          '"numpy<1.19" "protobuf<3.21"') in message
  assert sys.executable in message


def test_import_with_a_broken_tensorflow_keeps_its_error():
  message = _import_without_tensorflow(broken=True)
  assert message.strip() == 'libtensorflow_framework.so.2: cannot open'


def _metadata():
  # pylint: disable=g-import-not-at-top
  try:
    import importlib.metadata as metadata
  except ImportError:  # Python 3.7
    try:
      import importlib_metadata as metadata
    except ImportError:
      return None
  return metadata


def _installed_distribution():
  """The distribution tf1prune was imported from, or None.

  None also when the installed metadata belongs to another copy of the
  source (an editable install of another checkout, as in the shared venvs).
  """
  metadata = _metadata()
  if metadata is None:
    return None
  try:
    dist = metadata.distribution('tf1prune')
  except metadata.PackageNotFoundError:
    return None
  init = os.path.realpath(tf1prune.__file__)
  for entry in dist.files or ():
    if str(entry).replace('\\', '/') == 'tf1prune/__init__.py':
      if os.path.realpath(str(dist.locate_file(entry))) == init:
        return dist
  direct_url = dist.read_text('direct_url.json') or ''
  match = re.search(r'"url":\s*"file://([^"]+)"', direct_url)
  if match and os.path.realpath(match.group(1)) == os.path.realpath(
      PACKAGE_PARENT):
    return dist
  egg_info = getattr(dist, '_path', None)
  if egg_info is not None and os.path.realpath(
      os.path.dirname(str(egg_info))) == os.path.realpath(PACKAGE_PARENT):
    return dist
  return None


def _distribution_or_skip():
  dist = _installed_distribution()
  if dist is None:
    assert not EXPECT_INSTALLED, (
        'tf1prune was imported from %s, not from an installed distribution'
        % tf1prune.__file__)
    pytest.skip('tf1prune is not installed from this source (%s)'
                % PACKAGE_PARENT)
  return dist


def test_version_is_the_installed_distributions():
  dist = _distribution_or_skip()
  assert dist.version == tf1prune.__version__
  assert dist.metadata['Name'] == 'tf1prune'


def test_installed_package_is_not_the_checkout():
  if not EXPECT_INSTALLED:
    pytest.skip('checked in the run against the wheel '
                '(TF1PRUNE_EXPECT_INSTALLED=1)')
  dist = _distribution_or_skip()
  assert 'site-packages' in tf1prune.__file__
  assert not (dist.read_text('direct_url.json') or '').count('"editable"')


def _requirements(requires):
  """{name: [requirement lines]} of Requires-Dist lines without an extra."""
  unconditional = {}
  for line in requires:
    if 'extra ==' in line.replace('extra==', 'extra =='):
      continue
    name = re.match(r'[A-Za-z0-9._-]+', line).group(0).lower()
    unconditional.setdefault(name.replace('_', '-'), []).append(line)
  return unconditional


def test_installed_metadata_requires_no_tensorflow():
  dist = _distribution_or_skip()
  names = set(_requirements(dist.requires or ()))
  assert not names & TF_DISTRIBUTIONS
  assert {'numpy', 'tf-slim'} <= names


def _setup_py(*args, cwd=ROOT):
  if not os.path.exists(os.path.join(ROOT, 'setup.py')):
    pytest.skip('no setup.py next to the tests (the run against the wheel)')
  result = subprocess.run([sys.executable, 'setup.py'] + list(args), cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=300)
  assert result.returncode == 0, result.stderr.decode()
  return result.stdout.decode()


def test_setup_py_reads_the_version_of_the_package():
  version = _setup_py('--version').strip().split('\n')[-1]
  with open(os.path.join(ROOT, 'tf1prune', '__init__.py')) as f:
    assert "__version__ = '%s'" % version in f.read().split('\n')
  if os.path.realpath(PACKAGE_PARENT) == os.path.realpath(ROOT):
    assert version == tf1prune.__version__


def test_setup_py_requires_no_tensorflow_and_offers_it_as_extras(tmp_path):
  _setup_py('-q', 'egg_info', '--egg-base', str(tmp_path))
  (info,) = [p for p in tmp_path.iterdir() if p.name.endswith('.egg-info')]
  requires = (info / 'requires.txt').read_text()
  # requires.txt: unconditional lines first, then one [extra] section each.
  sections = re.split(r'^\[([^\]]+)\]$', requires, flags=re.M)
  base = {re.match(r'[A-Za-z0-9._-]+', l).group(0).lower()
          for l in sections[0].split('\n') if l.strip()}
  extras = dict(zip(sections[1::2], [s.split() for s in sections[2::2]]))
  assert base == {'numpy', 'tf-slim'}
  assert extras['tf'] == ['tensorflow>=2']
  assert extras['tf1'] == ['tensorflow==1.15.*', 'numpy<1.19', 'protobuf<3.21']
  assert set(extras) >= {'tf', 'tf1', 'test', 'deploy'}


def _python37():
  path = os.environ.get('TF1PRUNE_PY37')
  if not path and shutil.which('pyenv'):
    root = subprocess.run(['pyenv', 'root'], stdout=subprocess.PIPE,
                          timeout=60).stdout.decode().strip()
    path = os.path.join(root, 'versions', '3.7.16', 'bin', 'python')
  if not path or not os.path.exists(path):
    pytest.skip('no Python 3.7 (set TF1PRUNE_PY37)')
  return path


def _run(args, cwd, env):
  # cwd: pip finds a tf1prune.egg-info in its working directory (the
  # checkout) and takes it for an installed tf1prune.
  result = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=900)
  return result.returncode, result.stdout.decode()


@pytest.mark.slow
@pytest.mark.parametrize('pip', ['19.3.1', '20.3.4', '21.2.4'])
def test_old_pips_install_the_checkout_and_no_tensorflow(pip, tmp_path):
  """The pips of TF 1.15 environments: `pip install .` and `pip install -e .`.

  Python 3.7 with NumPy 1.18 and tf-slim and no TensorFlow: both installs
  work, pip collects no TensorFlow, and the import says what to install.
  """
  if not os.path.exists(os.path.join(ROOT, 'setup.py')):
    pytest.skip('no setup.py next to the tests (the run against the wheel)')
  source = tmp_path / 'src'
  source.mkdir()
  for name in ('setup.py', 'pyproject.toml', 'README.md', 'LICENSE',
               'MANIFEST.in'):
    with open(os.path.join(ROOT, name), 'rb') as f:
      (source / name).write_bytes(f.read())
  shutil.copytree(os.path.join(ROOT, 'tf1prune'), str(source / 'tf1prune'),
                  ignore=shutil.ignore_patterns('__pycache__'))
  venv = str(tmp_path / 'venv')
  python = os.path.join(venv, 'bin', 'python')
  # pip 19.3 needs an index with Requires-Python (PyPI) to skip setuptools
  # releases that dropped Python 3.7: the machine's own pip config is left out.
  env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS='',
             PIP_DISABLE_PIP_VERSION_CHECK='1')
  env.pop('PYTHONPATH', None)
  work = str(tmp_path)
  for args in ([_python37(), '-m', 'venv', venv],
               [python, '-m', 'pip', 'install', '-q', 'pip==' + pip],
               [python, '-m', 'pip', 'install', '-q', 'numpy<1.19', 'tf-slim']):
    code, out = _run(args, work, env)
    assert code == 0, out
  for editable in ([], ['-e']):
    code, out = _run([python, '-m', 'pip', 'install'] + editable + ['.'],
                     str(source), env)
    assert code == 0, out
    assert not re.search(r'Collecting (tensorflow|tf-nightly)', out), out
    code, out = _run([python, '-c', 'import tf1prune'], work, env)
    assert code == 1 and 'tf1prune needs TensorFlow 1.15 or 2.x' in out, out
    code, out = _run([python, '-m', 'pip', 'uninstall', '-y', 'tf1prune'],
                     work, env)
    assert code == 0, out
