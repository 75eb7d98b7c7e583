"""tf1prune: TensorFlow 1.x graph-mode weight pruning (contrib model_pruning, maintained)."""

import os
import re

from setuptools import find_packages, setup

_HERE = os.path.dirname(os.path.abspath(__file__))


def _read(*parts):
  with open(os.path.join(_HERE, *parts)) as f:
    return f.read()


# The version is written once, in tf1prune/__init__.py (read here as text:
# importing the package would import TensorFlow).
_VERSION = re.search(r"^__version__ = '([^']+)'$",
                     _read('tf1prune', '__init__.py'), re.M).group(1)

setup(
    name='tf1prune',
    version=_VERSION,
    description='Drop-in TF1 graph-mode weight pruning for TensorFlow 1.15 and 2.x',
    long_description=_read('README.md'),
    long_description_content_type='text/markdown',
    # Only the library: cifar10_example/, bench/ and examples/ run from the
    # checkout (bin/ puts it on PYTHONPATH), they are not installed.
    packages=find_packages(include=['tf1prune', 'tf1prune.*']),
    python_requires='>=3.7',
    install_requires=['tensorflow>=1.15', 'numpy', 'tf-slim'],
    extras_require={'test': ['pytest', 'hypothesis', 'scikit-learn']},
    entry_points={'console_scripts': [
        'strip_pruning_vars=tf1prune.cli.strip_pruning_vars:main',
        'prune_checkpoint=tf1prune.cli.prune_checkpoint:main',
    ]},
    license='Apache-2.0',
    classifiers=[
        'Programming Language :: Python :: 3',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
)
