"""Helpers that move time-major sequences around for the recurrent cells: split/stack by
layout, and the valid-length operations (mask, last step, reverse) MXNet's ``Sequence*``
operators perform. All are built from differentiable NDArray ops.

>>> from engine import nd
>>> x = nd.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).reshape((2, 3, 1))  # NTC
>>> steps, axis, batch = split_steps(3, x, "NTC", merge=False)
>>> len(steps), axis, batch
(3, 1, 2)
>>> last_valid(nd.stack(*steps), nd.array([2, 3])).asnumpy().ravel().tolist()
[2.0, 6.0]
"""

from __future__ import annotations

from typing import Any

import numpy

from ... import ndarray as nd
from ...ndarray.ndarray import NDArray


def symbolic(inputs: Any) -> bool:
    """Whether a sequence (one array or a list of steps) is made of Symbols."""
    from ..block import _is_symbol

    first = inputs[0] if isinstance(inputs, (list, tuple)) and inputs else inputs
    return _is_symbol(first)


def ops_for(inputs: Any) -> Any:
    """``engine.symbol`` for a symbolic sequence, ``engine.nd`` for arrays (MXNet's F)."""
    if symbolic(inputs):
        from ... import symbol

        return symbol
    return nd


def split_steps(length: int | None, inputs: Any, layout: str, merge: bool | None,
                in_layout: str | None = None) -> tuple[Any, int, int]:
    """Return ``inputs`` as a list of per-step arrays (``merge=False``), one array in
    ``layout`` (``merge=True``), or as given (``None``); plus the time axis and batch size
    (0 for Symbols, whose batch size the graph's shape inference finds)."""
    if inputs is None:
        raise AssertionError("unroll(inputs=None) is not supported: pass the input arrays")
    axis = layout.find("T")
    batch_axis = layout.find("N")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if symbolic(inputs):
        return _split_symbol_steps(length, inputs, axis, in_axis, merge)
    if isinstance(inputs, NDArray):
        batch_size = inputs.shape[batch_axis]
        if merge is False:
            if length is not None and length != inputs.shape[in_axis]:
                raise AssertionError(f"unroll length {length} does not match the input's "
                                     f"{inputs.shape[in_axis]} steps")
            inputs = list(nd.split(inputs, num_outputs=inputs.shape[in_axis], axis=in_axis,
                                   squeeze_axis=True)) if inputs.shape[in_axis] > 1 else \
                [inputs.squeeze(axis=in_axis)]
    else:
        inputs = list(inputs)
        if length is not None and len(inputs) != length:
            raise AssertionError(f"unroll length {length} does not match {len(inputs)} inputs")
        batch_size = inputs[0].shape[0]
        if merge is True:
            inputs = nd.stack(*inputs, axis=axis)
            in_axis = axis
    if isinstance(inputs, NDArray) and axis != in_axis:
        inputs = nd.swapaxes(inputs, axis, in_axis)
    return inputs, axis, batch_size


def _split_symbol_steps(length: int | None, inputs: Any, axis: int, in_axis: int,
                        merge: bool | None) -> tuple[Any, int, int]:
    from ... import symbol

    if isinstance(inputs, (list, tuple)):
        inputs = list(inputs)
        if length is not None and len(inputs) != length:
            raise AssertionError(f"unroll length {length} does not match {len(inputs)} inputs")
        if merge is True:
            return symbol.stack(*inputs, axis=axis), axis, 0
        return inputs, axis, 0
    if len(inputs.list_outputs()) != 1:
        raise AssertionError("unroll doesn't allow grouped symbol as input. Please convert "
                             "to list with list(inputs) first or let unroll handle splitting.")
    if merge is False:
        if length is None:
            raise AssertionError("unrolling a Symbol sequence needs its length")
        return list(symbol.split(inputs, axis=in_axis, num_outputs=length,
                                 squeeze_axis=True)), axis, 0
    if axis != in_axis:
        inputs = symbol.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis, 0


def _lengths(valid_length: Any) -> numpy.ndarray:
    raw = valid_length.asnumpy() if isinstance(valid_length, NDArray) else valid_length
    return numpy.asarray(raw).astype(numpy.int64).reshape(-1)


def mask_invalid(data: NDArray, valid_length: Any, time_axis: int) -> NDArray:
    """Zero the steps at or beyond each sample's valid length (``SequenceMask``, value 0);
    ``data`` has the batch on the axis next to ``time_axis`` (TN.. or NT..)."""
    lengths = _lengths(valid_length)
    steps = numpy.arange(data.shape[time_axis])
    keep = steps[:, None] < lengths[None, :]  # (T, N)
    if time_axis == 1:
        keep = keep.T
    keep = keep.reshape(keep.shape + (1,) * (data.ndim - 2))
    return data * nd.array(keep, ctx=data.context, dtype=data.dtype)


def last_valid(stacked: NDArray, valid_length: Any) -> NDArray:
    """The step ``valid_length - 1`` of each sample of a (T, N, ...) array (``SequenceLast``)."""
    lengths = _lengths(valid_length)
    index = numpy.broadcast_to((lengths - 1).reshape((-1,) + (1,) * (stacked.ndim - 2)),
                               stacked.shape[1:])
    return nd.pick(stacked, nd.array(index, ctx=stacked.context), axis=0)


def reverse_valid(stacked: NDArray, valid_length: Any) -> NDArray:
    """Reverse the first ``valid_length`` steps of each sample of a (T, N, ...) array and leave
    the padding in place (``SequenceReverse``)."""
    steps, batch = stacked.shape[0], stacked.shape[1]
    lengths = _lengths(valid_length)
    t = numpy.arange(steps)[:, None]
    source = numpy.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)  # (T, N)
    flat_index = (source * batch + numpy.arange(batch)[None, :]).reshape(-1)
    flat = stacked.reshape((steps * batch,) + stacked.shape[2:])
    picked = nd.take(flat, nd.array(flat_index, ctx=stacked.context), axis=0)
    return picked.reshape(stacked.shape)
