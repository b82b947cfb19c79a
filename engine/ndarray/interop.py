"""Interchange with numpy and DLPack, and small legacy helpers: ``from_numpy``,
``from_dlpack``/``to_dlpack_for_read``, ``amp_multicast`` and ``NDArray.slice_assign``.

>>> import numpy
>>> from engine import nd
>>> source = numpy.arange(4, dtype="float32")
>>> shared = nd.from_numpy(source); shared[0] = 9; source.tolist()
[9.0, 1.0, 2.0, 3.0]
"""

from __future__ import annotations

from typing import Any

from .ndarray import NDArray

__all__ = ["amp_multicast", "from_dlpack", "from_numpy", "install", "to_dlpack_for_read",
           "to_dlpack_for_write"]


def amp_multicast(*data: NDArray, num_outputs: int | None = None, cast_narrow: bool = False,
                  **_: Any) -> list[NDArray]:
    """Cast all inputs to their widest (or, with ``cast_narrow``, narrowest) float type."""
    import numpy

    widths = [numpy.dtype(d.dtype).itemsize for d in data]
    pick_width = min if cast_narrow else max
    target = data[widths.index(pick_width(widths))].dtype
    return [d.astype(target) for d in data]


def from_numpy(ndarray: Any, zero_copy: bool = True, array_cls: Any = None) -> NDArray:
    """An NDArray over a C-contiguous numpy array.

    With ``zero_copy`` the two share memory and, as in MXNet, the numpy array becomes
    read-only (write through the NDArray); otherwise the data is copied.
    """
    import numpy

    if not isinstance(ndarray, numpy.ndarray) or not ndarray.flags["C_CONTIGUOUS"]:
        raise ValueError("from_numpy needs a C-contiguous numpy.ndarray")
    if not zero_copy:
        return NDArray(ndarray.copy())
    if not ndarray.flags.writeable:
        try:  # frozen by an earlier from_numpy: a view made now must still be writable
            ndarray.flags.writeable = True
        except ValueError:
            pass  # a view of someone else's read-only memory stays read-only
    shared = ndarray.view()  # stays writable while the caller's array is frozen
    ndarray.flags.writeable = False
    return NDArray(shared)


class _DLPackCapsule:
    """Lets numpy's ``from_dlpack`` (which wants an exporter object) take a bare capsule."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: capsules made here hold host memory


def from_dlpack(dlpack: Any) -> NDArray:
    """An NDArray sharing memory with a DLPack capsule (from ``to_dlpack_for_read``) or with
    any object exporting ``__dlpack__`` (e.g. a torch tensor)."""
    import numpy

    source = dlpack if hasattr(dlpack, "__dlpack__") else _DLPackCapsule(dlpack)
    return NDArray(numpy.from_dlpack(source))


def _to_dlpack(self: NDArray) -> Any:
    """A DLPack capsule sharing this array's memory."""
    return self._data.__dlpack__()


def _slice_assign(self: NDArray, rhs: Any, begin: Any, end: Any, step: Any = ()) -> NDArray:
    """Write ``rhs`` into ``self[begin:end:step]`` in place; returns ``self``."""
    steps = tuple(step) + (None,) * (len(begin) - len(tuple(step)))
    key = tuple(slice(b, e, st) for b, e, st in zip(begin, end, steps, strict=True))
    self[key] = rhs
    return self


to_dlpack_for_read = to_dlpack_for_write = _to_dlpack


def install() -> None:
    """Attach the DLPack and slice-assignment methods to NDArray."""
    cls: Any = NDArray
    cls.to_dlpack_for_read = cls.to_dlpack_for_write = _to_dlpack
    cls.slice_assign = cls.slice_assign_scalar = _slice_assign
    cls.writable = True
