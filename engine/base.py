"""MXNet's ``mx.base`` basics: the error type the engine raises where MXNet raises
``MXNetError``, and the numeric type tuples user code checks against.

>>> from engine.base import MXNetError
>>> issubclass(MXNetError, RuntimeError)
True
"""

from __future__ import annotations

from typing import Any

import numpy

__all__ = ["MXNetError", "NotImplementedForSymbol", "integer_types", "mx_real_t",
           "numeric_types", "string_types", "py_str"]


class MXNetError(RuntimeError):
    """An operator or engine check failed (MXNet's ``mxnet.base.MXNetError``)."""


class MXNetShapeError(MXNetError, ValueError):
    """A shape check failed. MXNet raises MXNetError here; it is also a ValueError so code
    written against the engine's earlier, numpy-style errors keeps working."""


class NotImplementedForSymbol(MXNetError):
    """An NDArray-only operation was called on a Symbol (``bool(sym)``, ``sym += 1``)."""

    def __init__(self, function: Any, alias: str | None, *args: Any) -> None:
        super().__init__()
        self.function = getattr(function, "__name__", str(function))
        self.alias = alias
        self.args = [str(type(a)) for a in args]

    def __str__(self) -> str:
        text = f"Function {self.function}"
        if self.alias:
            text += f' (namely operator "{self.alias}")'
        if self.args:
            text += f" with arguments ({', '.join(self.args)})"
        return text + " is not implemented for Symbol and only available in NDArray."


mx_real_t = numpy.float32  # MXNet's default real type


class MXNetValueError(MXNetError, ValueError):
    """An operator parameter is out of its range (``normal(0, -1)``) or unknown to the
    operator (``attr={'foo': '1'}``). MXNet raises MXNetError; it is also a ValueError, the
    Python error for a bad argument value."""


integer_types = (int, numpy.integer)
numeric_types = (float, int, numpy.generic)
string_types = (str,)


def py_str(x: bytes | str) -> str:
    """Bytes decoded as UTF-8 (strings pass through)."""
    return x.decode("utf-8") if isinstance(x, bytes) else x
