"""The runnable examples in every engine module's docstrings stay true.

The modules are discovered, not listed: a new module with a ``>>>`` example is tested
without anyone remembering to add it here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import engine

_FINDER = doctest.DocTestFinder(exclude_empty=True)


def _modules_with_examples() -> list[str]:
    names = ["engine"] + [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")]
    found = []
    for name in names:
        module = importlib.import_module(name)
        if any(test.examples for test in _FINDER.find(module, name)):
            found.append(name)
    return found


MODULES = _modules_with_examples()


def test_discovery_finds_the_packages_that_document_by_example():
    assert {"engine.gluon.trainer", "engine.serialization", "engine.ndarray.ndarray",
            "engine.optimizer", "engine.kvstore.teststore"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS,
                             report=True)
    assert result.attempted > 0
    assert result.failed == 0
