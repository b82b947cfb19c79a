"""The layer registry: ``engine.gluon.nn.create("Dense", units=128, activation="relu")``.

The service builds networks from JSON specs through it; names are case-insensitive and an
unknown name is an error that lists the registered ones.

>>> from engine.gluon import nn
>>> nn.create("dense", units=4).__class__.__name__
'Dense'
"""

from __future__ import annotations

from typing import Any

from ...registry import Registry

LAYERS = Registry("layer")
register = LAYERS.register


def create(name: Any, **kwargs: Any) -> Any:
    """A layer instance from its registered (class) name and constructor arguments."""
    return LAYERS.create(name, **kwargs)


def names() -> list[str]:
    return LAYERS.names()
