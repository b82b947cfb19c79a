"""``out=`` for every operator, and MXNet's fluent NDArray methods (``x.slice_axis(...)``).

MXNet lets every operator write its result into an existing array (``nd.square(x,
out=y)``) and offers most operators as methods. Instead of threading ``out`` through each
function, :func:`accepting_out` wraps an operator once; :func:`install_methods` turns
operators into methods with the array as first argument. numpy's own functions use the
methods too: ``numpy.argmax(x, axis=1)`` calls ``x.argmax(axis=1, out=None)`` and so
returns an NDArray, as with MXNet.

>>> from engine import nd
>>> y = nd.zeros((2,))
>>> nd.square(nd.array([2, 3]), out=y) is y, y.asnumpy().tolist()
(True, [4.0, 9.0])
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .ndarray import NDArray, write_out


def takes_out(fn: Callable[..., Any]) -> bool:
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return True


def accepting_out(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that also accepts ``out=`` (the result written into it, ``out`` returned)."""
    if takes_out(fn):
        return fn

    @functools.wraps(fn)
    def with_out(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        return result if out is None else write_out(result, out)

    return with_out


def ignoring_unknown_keywords(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that drops keywords it has no parameter for (``out=`` passes through)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return fn
    known = set(params) | {"out"}

    @functools.wraps(fn)
    def tolerant(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **{k: v for k, v in kwargs.items() if k in known})

    return tolerant


def install_methods(functions: Mapping[str, Callable[..., Any]], names: Iterable[str],
                    replace: bool = False) -> None:
    """Make ``functions[name]`` a method of NDArray for each name (``self`` first)."""
    cls: Any = NDArray
    for name in names:
        if not replace and name in vars(cls):
            continue
        fn = accepting_out(functions[name])

        def method(self: NDArray, *args: Any, _fn: Callable[..., Any] = fn, **kwargs: Any):
            return _fn(self, *args, **kwargs)

        method.__name__ = name
        method.__doc__ = f"Fluent form of ``nd.{name}(self, ...)``."
        setattr(cls, name, method)


def methods_accept_out(names: Iterable[str]) -> None:
    """Let existing NDArray methods take ``out=`` (numpy passes ``out=None`` to them)."""
    cls: Any = NDArray
    for name in names:
        current = getattr(cls, name)
        if not takes_out(current):
            setattr(cls, name, accepting_out(current))
