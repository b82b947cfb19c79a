"""The runnable examples in the docstrings of the Gluon/initializer/io/op modules stay true."""

import doctest
import importlib

import pytest

MODULES = [
    "engine.gluon", "engine.gluon.block", "engine.gluon.parameter", "engine.gluon.parameter_dict",
    "engine.gluon.loss", "engine.gluon.utils", "engine.gluon.nn", "engine.gluon.nn.registry",
    "engine.gluon.nn.activations", "engine.gluon.nn.basic_layers", "engine.gluon.nn.conv_layers",
    "engine.gluon.data", "engine.gluon.data.dataset", "engine.gluon.data.sampler",
    "engine.gluon.data.dataloader", "engine.gluon.shape_probe", "engine.initializer",
    "engine.io", "engine.npx", "engine.ndarray.conv_ops", "engine.ndarray.norm_ops",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
