"""Which in-place writes MXNet refuses under ``autograd.record()``.

MXNet records every operator on the tape, in-place ones included, and refuses those it could
not differentiate: writing into an array that is already in the graph, and writing a value
that needs a gradient into part of an array (``x[1] = y``, ``x += y``). Assigning the whole
array (``x[:] = y``) is a plain copy, not recorded.

>>> from engine import autograd, nd
>>> x = nd.zeros((2,)); y = nd.ones((2,)); y.attach_grad()
>>> with autograd.record():
...     x[:] = y
>>> x.asnumpy().tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

from .ndarray import NDArray, needs_grad


def is_whole(key: Any) -> bool:
    """Whether ``x[key] = v`` assigns the whole array (``x[:]``, ``x[...]``, ``x[None]``)."""
    if key is None or key is Ellipsis:
        return True
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    return isinstance(key, slice) and key == slice(None)


def check_inplace_write(target: NDArray, value: Any, whole: bool = False) -> None:
    """Refuse, while recording, an in-place write MXNet refuses: into an array that is in
    the graph, or (unless ``whole``) of a value that needs a gradient."""
    from ..base import MXNetError

    if needs_grad(target):
        raise MXNetError(
            "Assigning to NDArrays that are already in a computational graph will cause "
            "undefined behavior when evaluating gradients. Please call backward first to "
            "clear the graph or do this out side of a record section."
        )
    if not whole and isinstance(value, NDArray) and needs_grad(value):
        raise MXNetError(
            "Inplace operations (+=, -=, x[:]=, etc) are not supported when recording with "
            "autograd."
        )
