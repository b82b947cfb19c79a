"""The runnable examples in the docstrings of the ndarray, random, autograd and helper
modules stay true."""

import doctest
import importlib

import pytest

MODULES = [
    "engine.ndarray", "engine.ndarray.ndarray", "engine.ndarray.fluent",
    "engine.ndarray.math_ops", "engine.ndarray.slice_ops", "engine.ndarray.select_ops",
    "engine.ndarray.update_ops", "engine.ndarray.output_ops", "engine.ndarray.higher_order",
    "engine.ndarray.linalg", "engine.ndarray.pdf_ops", "engine.ndarray.im2col_ops",
    "engine.ndarray.contrib", "engine.ndarray.sampler_ops", "engine.ndarray.interop",
    "engine.ndarray.cached_op", "engine.ndarray.random",
    "engine.random", "engine.autograd",
    "engine.base", "engine.runtime", "engine.util", "engine.test_utils",
    "engine.optimizer.contrib",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
