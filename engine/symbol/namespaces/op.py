"""``mx.sym.op``: every operator of ``mx.sym`` (MXNet's generated operator module).

>>> import engine as mx
>>> mx.sym.op.exp(mx.sym.var('x')).name.startswith('exp')
True
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from ... import symbol

    if name.startswith("_"):
        raise AttributeError(name)
    return getattr(symbol, name)
