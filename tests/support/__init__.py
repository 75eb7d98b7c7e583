"""Helpers the tests share, each written once.

    checkout      ROOT (the checkout) and SUPPORT (this folder)
    graphs        build and run TF1 graphs and GraphDefs, here and on the
                  other TF stack: the one GraphDef runner
    nets          small nets and checkpoints several tests build
    pruned_nets   nets pruned by coupled filter groups at 50% and
                  checkpointed (bench/ uses it too)
    flops         the FLOPs a pruned net ideally keeps
    keras_models  the Keras under test, its skips, models and data
    np_reference  NumPy references of the mask math
    *_worker.py   scripts the tests run as processes of their own

Nothing here imports pytest fixtures: the fixtures are in tests/conftest.py
and tests/keras/conftest.py.
"""
