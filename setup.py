"""tf1prune: TensorFlow 1.x graph-mode weight pruning (contrib model_pruning, maintained)."""

import os

from setuptools import find_packages, setup

_HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(_HERE, 'README.md')) as f:
  _LONG_DESCRIPTION = f.read()

setup(
    name='tf1prune',
    version='0.1.0',
    description='Drop-in TF1 graph-mode weight pruning for TensorFlow 1.15 and 2.x',
    long_description=_LONG_DESCRIPTION,
    long_description_content_type='text/markdown',
    packages=find_packages(include=['tf1prune', 'tf1prune.*', 'cifar10_example',
                                    'cifar10_example.*']),
    python_requires='>=3.7',
    install_requires=['tensorflow>=1.15', 'numpy', 'tf-slim'],
    extras_require={'test': ['pytest', 'hypothesis', 'scikit-learn'],
                    # bin/check_deploy's converters (TF 2.x, Python 3.8+).
                    'deploy': ['tf2onnx', 'onnxruntime', 'openvino']},
    entry_points={'console_scripts': [
        'strip_pruning_vars=tf1prune.cli.strip_pruning_vars:main',
        'prune_checkpoint=tf1prune.cli.prune_checkpoint:main',
        'check_deploy=tf1prune.cli.check_deploy:main',
    ]},
    license='Apache-2.0',
    classifiers=[
        'Programming Language :: Python :: 3',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
)
