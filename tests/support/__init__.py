"""Helpers the tests share, each written once.

    checkout      ROOT (the checkout) and SUPPORT (this folder)
    graph_mode    graph mode and a new default graph per test, for the
                  conftest.py of every folder but tests/keras/
    graphs        build and run TF1 graphs and GraphDefs, here and on the
                  other TF stack: the one GraphDef runner
    nets          small nets and checkpoints several tests build
    pruned_nets   nets pruned by coupled filter groups at 50% and
                  checkpointed (bench/ uses it too)
    flops         the FLOPs a pruned net ideally keeps
    keras_models  the Keras under test, its skips, models and data
    np_reference  NumPy references of the mask math
    docs_pages    the Markdown pages and their python blocks
    *_worker.py   scripts the tests run as processes of their own

The fixtures all folders share (other_python, tf_warnings) are in
tests/conftest.py.
"""
