"""``mx.sym.linalg``: the ``linalg_*`` operators under their short names.

>>> import engine as mx
>>> mx.sym.linalg.gemm2(mx.sym.var('a'), mx.sym.var('b')).infer_shape(a=(2, 3), b=(3, 4))[1]
[(2, 4)]
"""

from __future__ import annotations

from typing import Any

from ..build import make_generic


def __getattr__(name: str) -> Any:
    from ..generic import generic_spec

    if name.startswith("_") or generic_spec(f"linalg_{name}") is None:
        raise AttributeError(f"module 'engine.symbol.linalg' has no attribute {name!r}")

    def make(*args: Any, name: str | None = None, attr: Any = None, **kwargs: Any) -> Any:
        return make_generic(f"linalg_{op}", args, kwargs, name, attr)

    op = name
    make.__name__ = name
    return make
