"""``mx.util``: the numpy-shape switches MXNet 1.9 code toggles (``mx.np_shape``,
``set_np_shape``, ``is_np_array``, ``use_np``).

As in MXNet 1.9, the legacy ``mx.nd`` operators never return 0-d arrays (a full reduction
has shape ``(1,)``); ``np_shape`` makes integer indexing keep 0-d results, and ``set_np``
(``npx.set_np``: code written for ``mx.np`` arrays) keeps every 0-d result. ``mx.np``'s own
functions return 0-d results whatever these say (see ``engine.ndarray.ndarray.legacy_shape``).

>>> import engine as mx
>>> with mx.np_shape(True):
...     mx.util.is_np_shape()
True
>>> mx.util.is_np_shape()
False
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .base import py_str

__all__ = [
    "getenv", "is_np_array", "is_np_default_dtype", "is_np_shape", "makedirs", "np_array",
    "np_shape", "py_str", "reset_np", "set_np", "set_np_shape", "setenv", "use_np", "use_np_array",
    "use_np_shape", "wraps_safely",
]


class _Flags(threading.local):
    np_shape = False
    np_default_dtype = False


_flags = _Flags()
_global_np_shape = False  # set_np_shape(2): numpy shapes in every thread


class _NumpyArrayScope:
    """This thread's numpy-array switch (MXNet's class of the same name): ``np_array()``
    returns one as a ``with`` scope; ``_NumpyArrayScope._current.value`` is the active one."""

    _current = threading.local()

    def __init__(self, is_np_array: bool) -> None:
        self._old_scope: _NumpyArrayScope | None = None
        self._is_np_array = bool(is_np_array)

    def __enter__(self) -> _NumpyArrayScope:
        self._old_scope = getattr(_NumpyArrayScope._current, "value", None)
        _NumpyArrayScope._current.value = self
        return self

    def __exit__(self, *exc: object) -> None:
        _NumpyArrayScope._current.value = self._old_scope


def set_np_shape(active: bool | int) -> bool:
    """Turn numpy shape semantics on or off in this thread; returns the previous setting.
    ``2`` turns them on in every thread (MXNet's global switch); off turns both off."""
    global _global_np_shape
    previous = is_np_shape()
    if active == 2:
        _global_np_shape = True
    elif not active:
        _global_np_shape = False
    _flags.np_shape = bool(active)
    return previous


def is_np_shape() -> bool:
    return _flags.np_shape or _global_np_shape


def is_np_array() -> bool:
    scope = getattr(_NumpyArrayScope._current, "value", None)
    return scope is not None and scope._is_np_array


def is_np_default_dtype() -> bool:
    return _flags.np_default_dtype


@contextmanager
def np_shape(active: bool = True) -> Iterator[None]:
    """A scope with numpy shape semantics on (or off)."""
    previous, _flags.np_shape = _flags.np_shape, bool(active)
    try:
        yield
    finally:
        _flags.np_shape = previous


def np_array(active: bool = True) -> _NumpyArrayScope:
    """A scope with numpy array semantics on (or off)."""
    return _NumpyArrayScope(active)


def set_np(shape: bool = True, array: bool = True, dtype: bool = False) -> None:
    """Turn numpy semantics on (MXNet: ``npx.set_np``)."""
    _flags.np_shape, _flags.np_default_dtype = bool(shape), dtype
    _NumpyArrayScope._current.value = _NumpyArrayScope(array)


def reset_np() -> None:
    set_np(False, False, False)


def _scoped(scope: Callable[[bool], Any]) -> Callable[[Any], Any]:
    def decorate(func: Any) -> Any:
        if isinstance(func, type):
            return func

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope(True):
                return func(*args, **kwargs)

        return wrapper

    return decorate


use_np_shape = _scoped(np_shape)
use_np_array = _scoped(np_array)


def use_np(func: Any) -> Any:
    """Decorator: run ``func`` with numpy shape and array semantics."""
    return use_np_shape(use_np_array(func))


def wraps_safely(wrapped: Any, assigned: Any = functools.WRAPPER_ASSIGNMENTS) -> Any:
    """``functools.wraps`` that skips attributes ``wrapped`` lacks."""
    return functools.wraps(wrapped, [a for a in assigned if hasattr(wrapped, a)])


def makedirs(d: str) -> None:
    """Create a directory and its parents if missing."""
    import os

    os.makedirs(os.path.expanduser(d), exist_ok=True)


def getenv(name: str) -> str | None:
    import os

    return os.environ.get(name)


def setenv(name: str, value: str | None) -> None:
    import os

    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
