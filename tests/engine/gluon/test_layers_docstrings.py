"""The runnable examples in the docstrings of the norm/pad layers, rnn, the new losses,
gluon.contrib, the estimator's BatchProcessor and their ops stay true."""

import doctest
import importlib

import pytest

MODULES = [
    "engine.gluon.nn.norm_layers", "engine.gluon.rnn", "engine.gluon.rnn.rnn_cell",
    "engine.gluon.rnn.cell_modifiers", "engine.gluon.rnn.rnn_layer", "engine.gluon.rnn.sequence",
    "engine.gluon.likelihood_losses", "engine.gluon.embedding_losses", "engine.gluon.contrib",
    "engine.gluon.contrib.nn", "engine.gluon.contrib.nn.basic_layers",
    "engine.gluon.contrib.estimator", "engine.gluon.estimator.batch_processor",
    "engine.ndarray.group_norm_ops", "engine.ndarray.ctc_ops", "engine.ndarray.rnn_ops",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
