"""Array creation: ``array``, ``zeros``, ``ones``, ``full``, ``arange``, ``empty`` and friends."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy

from ..context import Context, device_of
from .ndarray import NDArray, _move, write_out

DEFAULT_DTYPE = numpy.float32


def _shape(shape: Any) -> tuple[int, ...]:
    if shape is None:
        return ()
    if isinstance(shape, (int, numpy.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _alloc(fn: str, shape: Any, ctx: Context | str | None, dtype: Any, *args: Any) -> NDArray:
    device = device_of(ctx)
    xp = device.xp
    dt = numpy.dtype(dtype or DEFAULT_DTYPE)
    if xp is numpy:
        data = getattr(xp, fn)(_shape(shape), *args, dtype=dt)
    else:
        with xp.cuda.Device(device.device_id):
            data = getattr(xp, fn)(_shape(shape), *args, dtype=dt)
    return NDArray(data, device)


def array(
    source_array: Any, ctx: Context | str | None = None, dtype: Any = None
) -> NDArray:
    """An NDArray from a list, numpy array or NDArray.

    As in MXNet's ``nd.array``, the dtype is the source NDArray's, else float32 unless
    ``dtype`` is given.
    """
    device = device_of(ctx)
    if isinstance(source_array, NDArray):
        data = source_array._data
        dt = numpy.dtype(dtype) if dtype is not None else data.dtype
        return NDArray(_move(data, device).astype(dt, copy=False), device)
    dt = numpy.dtype(dtype) if dtype is not None else DEFAULT_DTYPE
    host = numpy.asarray(source_array)
    if host.dtype == object:
        raise ValueError("cannot make an NDArray from ragged or non-numeric data")
    return NDArray(_move(host.astype(dt), device), device)


def zeros(shape: Any, ctx: Context | str | None = None, dtype: Any = None,
          out: NDArray | None = None, **_: Any) -> NDArray:
    """An array of zeros (written into ``out`` when given)."""
    if out is not None:
        return write_out(_alloc("zeros", shape, out.context, dtype or out.dtype), out)
    return _alloc("zeros", shape, ctx, dtype)


def ones(shape: Any, ctx: Context | str | None = None, dtype: Any = None,
         out: NDArray | None = None, **_: Any) -> NDArray:
    """An array of ones (written into ``out`` when given)."""
    if out is not None:
        return write_out(_alloc("ones", shape, out.context, dtype or out.dtype), out)
    return _alloc("ones", shape, ctx, dtype)


def empty(shape: Any, ctx: Context | str | None = None, dtype: Any = None) -> NDArray:
    return _alloc("zeros", shape, ctx, dtype)  # zeroed: uninitialised memory helps nobody


def full(
    shape: Any, val: float, ctx: Context | str | None = None, dtype: Any = None,
    out: NDArray | None = None, **_: Any
) -> NDArray:
    """An array filled with ``val`` (written into ``out`` when given)."""
    result = _alloc("zeros", shape, out.context if out is not None else ctx,
                    dtype or (out.dtype if out is not None else None))
    result._data[...] = val
    return write_out(result, out)


def arange(
    start: float,
    stop: float | None = None,
    step: float = 1.0,
    repeat: int = 1,
    ctx: Context | str | None = None,
    dtype: Any = None,
) -> NDArray:
    device = device_of(ctx)
    host = numpy.arange(start, stop, step, dtype=numpy.dtype(dtype or DEFAULT_DTYPE))
    if repeat > 1:
        host = numpy.repeat(host, repeat)
    return NDArray(_move(host, device), device)


def linspace(
    start: float, stop: float, num: int, endpoint: bool = True,
    ctx: Context | str | None = None, dtype: Any = None,
) -> NDArray:
    device = device_of(ctx)
    host = numpy.linspace(start, stop, num, endpoint=endpoint).astype(dtype or DEFAULT_DTYPE)
    return NDArray(_move(host, device), device)


def eye(N: int, M: int = 0, k: int = 0, ctx: Context | str | None = None,  # noqa: N803
        dtype: Any = None) -> NDArray:
    device = device_of(ctx)
    host = numpy.eye(N, M or None, k, dtype=numpy.dtype(dtype or DEFAULT_DTYPE))
    return NDArray(_move(host, device), device)


def zeros_like(x: NDArray, **_: Any) -> NDArray:
    return NDArray(x.xp.zeros_like(x._data), x.context)


def ones_like(x: NDArray, **_: Any) -> NDArray:
    return NDArray(x.xp.ones_like(x._data), x.context)


def full_like(x: NDArray, fill_value: float, **_: Any) -> NDArray:
    return NDArray(x.xp.full_like(x._data, fill_value), x.context)


def waitall() -> None:
    """Wait for all pending device work (numpy computes eagerly, so only cupy waits)."""
    from .. import backend

    if backend.cupy is not None:
        backend.cupy.cuda.Device().synchronize()


def save(fname: Any, data: NDArray | Sequence[NDArray] | dict[str, NDArray]) -> None:
    """Save arrays in MXNet's binary format, as ``mx.nd.save`` does (a dict keeps its
    names; a list is saved in order), to a path or a writable binary file. MXNet 1.9 reads
    the file with ``mx.nd.load``; nothing is pickled."""
    from .mxnet_format import write_params

    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, dict):
        blob = write_params({str(k): v.asnumpy() for k, v in data.items()})
    else:
        blob = write_params([v.asnumpy() for v in data])
    if isinstance(fname, (str, os.PathLike)):
        with open(fname, "wb") as handle:
            handle.write(blob)
    else:
        fname.write(blob)


def load(fname: Any, ctx: Context | str | None = None) -> list[NDArray] | dict[str, NDArray]:
    """Load a file of :func:`save` (or ``mx.nd.save``), or an npz written by an earlier
    Rudder; never unpickles."""
    from ..serialization import load_array_file

    loaded = load_array_file(fname)
    if isinstance(loaded, list):
        return [array(v, ctx=ctx, dtype=v.dtype) for v in loaded]
    return {n: array(v, ctx=ctx, dtype=v.dtype) for n, v in loaded.items()}


def load_frombuffer(buf: bytes | bytearray | memoryview) -> list[NDArray] | dict[str, NDArray]:
    """Load arrays from the bytes of a file :func:`save` writes (``mx.nd.load_frombuffer``)."""
    return load(bytes(buf))
