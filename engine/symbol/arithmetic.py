"""Python operators on symbols (``a + b``, ``x * 2``, ``x ** 2``, ``-x``, ``x > 0``), built
as MXNet builds them: ``elemwise_*`` between symbols, ``_*_scalar`` with a number.

>>> import engine as mx
>>> (mx.sym.var('x') * 2 + 1).name.startswith('_plusscalar')
True
"""

from __future__ import annotations

from typing import Any


def _make_op(op: str, args: Any, kwargs: dict[str, Any], name: str | None) -> Any:
    from .build import _make_op as make  # build imports the Symbol class
    from .build import make_generic
    from .generic import generic_spec

    if generic_spec(op) is not None:  # the comparisons: served by their engine.nd functions
        return make_generic(op, tuple(args), kwargs, name)
    return make(op, args, kwargs, name)


class SymbolArithmetic:
    """The arithmetic and comparison operators of :class:`~engine.symbol.Symbol`."""

    def _binary(self, other: Any, op: str, scalar_op: str) -> Any:
        if isinstance(other, SymbolArithmetic):
            return _make_op(op, [self, other], {}, None)
        return _make_op(scalar_op, [self], {"scalar": other}, None)

    def __add__(self, other: Any) -> Any:
        return self._binary(other, "elemwise_add", "_plus_scalar")

    def __radd__(self, other: Any) -> Any:
        return self.__add__(other)

    def __sub__(self, other: Any) -> Any:
        return self._binary(other, "elemwise_sub", "_minus_scalar")

    def __rsub__(self, other: Any) -> Any:
        return _make_op("_rminus_scalar", [self], {"scalar": other}, None)

    def __mul__(self, other: Any) -> Any:
        return self._binary(other, "elemwise_mul", "_mul_scalar")

    def __rmul__(self, other: Any) -> Any:
        return self.__mul__(other)

    def __truediv__(self, other: Any) -> Any:
        return self._binary(other, "elemwise_div", "_div_scalar")

    def __rtruediv__(self, other: Any) -> Any:
        return _make_op("_rdiv_scalar", [self], {"scalar": other}, None)

    def __pow__(self, other: Any) -> Any:
        return self._binary(other, "_power", "_power_scalar")

    def __neg__(self) -> Any:
        return self.__mul__(-1.0)  # MXNet's -x is x * -1 (``_mulscalar0``)

    def __rpow__(self, other: Any) -> Any:
        return _make_op("_rpower_scalar", [self], {"scalar": other}, None)

    def __mod__(self, other: Any) -> Any:
        return self._binary(other, "_mod", "_mod_scalar")

    def __rmod__(self, other: Any) -> Any:
        return _make_op("_rmod_scalar", [self], {"scalar": other}, None)

    def __abs__(self) -> Any:
        from .build import make_generic

        return make_generic("abs", (self,), {}, None)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._binary(other, "_equal", "_equal_scalar")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._binary(other, "_not_equal", "_not_equal_scalar")

    __hash__ = object.__hash__  # symbols stay usable as dict keys (MXNet's are too)

    def __gt__(self, other: Any) -> Any:
        return self._binary(other, "_greater", "_greater_scalar")

    def __ge__(self, other: Any) -> Any:
        return self._binary(other, "_greater_equal", "_greater_equal_scalar")

    def __lt__(self, other: Any) -> Any:
        return self._binary(other, "_lesser", "_lesser_scalar")

    def __le__(self, other: Any) -> Any:
        return self._binary(other, "_lesser_equal", "_lesser_equal_scalar")

