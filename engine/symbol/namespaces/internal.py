"""``mx.sym._internal``: MXNet's internal operators (the ``_``-prefixed ones, such as
``_plus_scalar`` or ``_identity_with_attr_like_rhs``), callable like the public ones.

>>> import engine as mx
>>> w = mx.sym.var('w')
>>> mx.sym._internal._identity_with_attr_like_rhs(mx.sym.var('x'), w).infer_shape(w=(2, 3))[1]
[(2, 3)]
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from ..build import _make_op, make_generic
    from ..generic import generic_spec
    from ..ops import OPS

    if name.startswith("__"):
        raise AttributeError(name)
    if name in OPS and generic_spec(name) is None:
        def make(*args: Any, name: str | None = None, attr: Any = None, **kwargs: Any) -> Any:
            return _make_op(op, args, kwargs, name, attr)
    elif generic_spec(name) is not None:
        def make(*args: Any, name: str | None = None, attr: Any = None, **kwargs: Any) -> Any:
            return make_generic(op, args, kwargs, name, attr)
    else:
        raise AttributeError(f"module 'engine.symbol._internal' has no attribute {name!r}")
    op = name
    make.__name__ = name
    return make
