"""``npx.reshape`` with the numpy extension's shape codes, and the small array helpers of
``mx.npx`` (``arange_like``, ``nonzero``, ``constraint_check``).

>>> from engine import np, npx
>>> npx.reshape(np.ones((8, 3, 3, 3, 4, 4)), (-6, 2, -1, -4)).shape
(2, 4, 3, 3, 3, 4, 4)
>>> npx.reshape(np.ones((8, 1, 1, 1, 3)), (-2, -3, -3, -3, -2)).shape
(8, 3)
"""

from __future__ import annotations

from typing import Any

import numpy

from ..base import MXNetError
from ..ndarray import shape_ops
from ..ndarray.ndarray import NDArray, numpy_shapes


def _resolve(src: tuple[int, ...], codes: list[int]) -> list[int]:
    """The target shape for numpy-extension codes: -1 infer, -2 copy, -3 drop a 1, -4 copy
    the rest, -5 merge two, -6 split one into the next two values (one may be -1)."""
    out: list[int] = []
    i = j = 0
    while j < len(codes):
        code = codes[j]
        if code == -2:
            out.append(src[i])
            i += 1
        elif code == -3:
            if src[i] != 1:
                raise MXNetError(f"npx.reshape: -3 drops a dimension of size 1, not {src[i]}")
            i += 1
        elif code == -4:
            out.extend(src[i:])
            i = len(src)
        elif code == -5:
            out.append(src[i] * src[i + 1])
            i += 2
        elif code == -6:
            d1, d2 = codes[j + 1], codes[j + 2]
            d1 = src[i] // d2 if d1 == -1 else d1
            d2 = src[i] // d1 if d2 == -1 else d2
            if d1 * d2 != src[i]:
                raise MXNetError(f"npx.reshape: cannot split {src[i]} into {d1} x {d2}")
            out += [d1, d2]
            i += 1
            j += 2
        elif code == -1 or code >= 0:
            out.append(code)
            i += 1
        else:
            raise MXNetError(f"npx.reshape: unknown shape code {code}")
        j += 1
    if out.count(-1) > 1:
        raise MXNetError("npx.reshape: only one dimension can be inferred (-1)")
    if -1 in out:
        known = int(numpy.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(numpy.prod(src)) // max(known, 1)
    return out


def reshape(a: NDArray, newshape: Any, reverse: bool = False, order: str = "C") -> NDArray:
    """A copy of ``a`` in a new shape given with the numpy extension's codes (see
    :func:`_resolve`); ``reverse`` reads the codes and the input shape from the right."""
    codes = [int(newshape)] if isinstance(newshape, (int, numpy.integer)) else \
        [int(c) for c in newshape]
    src = tuple(a.shape)
    if reverse:
        target = list(reversed(_resolve(src[::-1], codes[::-1])))
    else:
        target = _resolve(src, codes)
    with numpy_shapes():
        return shape_ops.reshape(a, tuple(target))


def arange_like(data: NDArray, start: float = 0.0, step: float = 1.0, repeat: int = 1,
                ctx: Any = None, axis: int | None = None, **_: Any) -> NDArray:
    """``start, start + step, ...`` shaped like ``data`` (or like its ``axis``), each value
    repeated ``repeat`` times."""
    count = data.size if axis is None else data.shape[axis]
    values = start + step * (numpy.arange(count) // repeat)
    shape = data.shape if axis is None else (count,)
    return NDArray(data.xp.asarray(values.reshape(shape).astype(data.dtype)), data.context)


def nonzero(a: NDArray) -> NDArray:
    """The indices of the non-zero elements, one row per element (int64, ``(N, a.ndim)``)."""
    return NDArray(a.xp.argwhere(a.raw).astype(numpy.int64), a.context)


def constraint_check(x: NDArray, msg: str = "Constraint violated.") -> NDArray:
    """A true 0-d bool when every element of ``x`` is true; else MXNetError with ``msg``."""
    if not bool(x.xp.all(x.raw)):
        raise MXNetError(msg)
    return NDArray(x.xp.asarray(True), x.context)
