"""Packaging for tf1prune: the one place its metadata is written.

    pip install .           # or: pip install -e .   (pip 19.x and newer)
    python -m build         # a wheel and an sdist in dist/

setup.py (not pyproject.toml's [project]) holds the metadata so that the pips
of TF 1.15 environments (19.x-21.x, whose `pip install -e .` runs `setup.py
develop` with the environment's own setuptools) read the same metadata as
current pip. pyproject.toml keeps only [build-system].

No TensorFlow distribution is a dependency: TensorFlow ships as tensorflow,
tensorflow-cpu, tensorflow-gpu (1.15), tensorflow-macos, tensorflow-intel and
tf-nightly, and a requirement on one of them makes pip install it over the
others. The extras let pip choose one: `tf1prune[tf]` (TensorFlow 2.x) or
`tf1prune[tf1]` (TensorFlow 1.15, Python 3.7).
"""

import io
import os
import re

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def read(name):
  with io.open(os.path.join(HERE, name), encoding='utf-8') as f:
    return f.read()


def version():
  """__version__ of tf1prune/__init__.py, read as text (no TensorFlow)."""
  match = re.search(r"^__version__ = '([^']+)'$",
                    read(os.path.join('tf1prune', '__init__.py')), re.M)
  if not match:
    raise RuntimeError("tf1prune/__init__.py has no line __version__ = '...'")
  return match.group(1)


if __name__ == '__main__':
  setup(
      name='tf1prune',
      version=version(),
      description=('Drop-in TF1 graph-mode weight pruning for TensorFlow 1.15 '
                   'and 2.x'),
      long_description=read('README.md'),
      long_description_content_type='text/markdown',
      license='Apache-2.0',
      license_files=['LICENSE'],
      python_requires='>=3.7',
      # Only the library: cifar10_example/, bench/ and examples/ run from the
      # checkout (bin/ puts it on PYTHONPATH), they are not installed.
      packages=find_packages(include=['tf1prune', 'tf1prune.*']),
      install_requires=['numpy', 'tf-slim'],
      extras_require={
          'tf': ['tensorflow>=2'],
          'tf1': ['tensorflow==1.15.*', 'numpy<1.19', 'protobuf<3.21'],
          'test': ['pytest', 'pytest-xdist', 'hypothesis', 'scikit-learn'],
          # bin/check_deploy's converters (TensorFlow 2.x, Python 3.8+).
          'deploy': ['tf2onnx', 'onnxruntime', 'openvino'],
      },
      entry_points={
          'console_scripts': [
              'strip_pruning_vars = tf1prune.cli.strip_pruning_vars:main',
              'prune_checkpoint = tf1prune.cli.prune_checkpoint:main',
              'check_deploy = tf1prune.cli.check_deploy:main',
              'tf1prune_sensitivity = tf1prune.cli.sensitivity:main',
          ],
      },
      classifiers=[
          'Programming Language :: Python :: 3',
          'Topic :: Scientific/Engineering :: Artificial Intelligence',
      ],
  )
