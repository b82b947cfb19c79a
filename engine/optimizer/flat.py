"""Contiguous storage for a Trainer: every parameter of one dtype on one context, end to end.

Each parameter's data and gradient NDArray keep their identity but their ``.raw`` becomes
a view into one flat weight buffer and one flat gradient buffer (backward and ``w[:] = v``
write in place, so the views stay valid). The optimizer's states are flat buffers too, and
the per-index states the Updater holds are views into them, so one step is a handful of
vectorized operations over all parameters, while ``update(index, ...)`` on a single
parameter still sees (and changes) the same numbers.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy

from ..ndarray import NDArray
from .optimizer import Optimizer, raw_state
from .segments import Segments
from .updater import Updater, copy_state_into


def _slice_state(state: Any, start: int, stop: int, shape: tuple[int, ...]) -> Any:
    if state is None:
        return None
    if isinstance(state, NDArray):
        return NDArray(state.raw[start:stop].reshape(shape), state.context)
    return tuple(_slice_state(s, start, stop, shape) for s in state)


def _on_device(xp: Any, ctx: Any) -> Any:
    """cupy allocates on the current device: select the context's GPU (no-op on cpu)."""
    if xp is numpy:
        return contextlib.nullcontext()
    return xp.cuda.Device(ctx.device_id)


def _all_flat(state: Any, total: int) -> bool:
    if state is None:
        return True
    if isinstance(state, NDArray):
        return state.ndim == 1 and state.size == total
    if isinstance(state, (tuple, list)):
        return all(_all_flat(s, total) for s in state)
    return False


class FlatGroup:
    """Parameters ``indices`` of one dtype on context ``ctx`` in one contiguous buffer."""

    def __init__(self, ctx: Any, entries: list[tuple[int, NDArray, NDArray]]) -> None:
        self.ctx = ctx
        self.indices = [index for index, _, _ in entries]
        shapes = [data.shape for _, data, _ in entries]
        sizes = [int(numpy.prod(s, dtype=numpy.int64)) for s in shapes]
        self.segments = Segments(sizes, self.indices)
        self.shapes = dict(zip(self.indices, shapes, strict=True))
        self.bounds = dict(zip(self.indices, self.segments.bounds, strict=True))
        first = entries[0][1]
        xp = first.xp
        total = int(sum(sizes))
        with _on_device(xp, ctx):
            self.weight = xp.empty(total, dtype=first.raw.dtype)
            self.grad = xp.empty(total, dtype=first.raw.dtype)
        self.arrays: list[tuple[NDArray, NDArray, Any, Any]] = []
        for (_, data, grad), (start, stop), shape in zip(
                entries, self.segments.bounds, shapes, strict=True):
            self.weight[start:stop] = data.raw.reshape(-1)
            self.grad[start:stop] = grad.raw.reshape(-1)
            w_view = self.weight[start:stop].reshape(shape)
            g_view = self.grad[start:stop].reshape(shape)
            data.raw, grad.raw = w_view, g_view
            self.arrays.append((data, grad, w_view, g_view))
        self.state: Any = None
        self.state_views: dict[int, Any] = {}

    def intact(self, params: list[Any], c: int) -> bool:
        """True while every parameter still uses these buffers (cast/reset_ctx breaks it)."""
        for index, (data, grad, w_view, g_view) in zip(self.indices, self.arrays, strict=True):
            param = params[index]
            if not param._ctx_data or not param._ctx_grad or param._ctx_data[c] is not data or \
                    param._ctx_grad[c] is not grad or data.raw is not w_view or \
                    grad.raw is not g_view:
                return False
        return True

    def ensure_state(self, optimizer: Optimizer, updater: Updater) -> bool:
        """Create (or re-attach) the flat optimizer state; False if the rule can't be fused."""
        states = updater.states
        if self.state is not None and all(
                states.get(i) is self.state_views[i] for i in self.indices):
            return True
        optimizer._set_current_context(self.ctx.device_id)
        template = optimizer.create_state_multi_precision(
            self.indices[0], NDArray(self.weight, self.ctx))
        if not _all_flat(template, self.weight.size):
            return False
        views = {}
        for i in self.indices:
            start, stop = self.bounds[i]
            view = _slice_state(template, start, stop, self.shapes[i])
            if states.get(i) is not None:
                copy_state_into(view, states[i])  # keep loaded or earlier per-index state
            views[i] = view
        for i, view in views.items():
            states[i] = view
            updater.states_synced[i] = True
        self.state, self.state_views = raw_state(template), views
        return True

    def step(self, optimizer: Optimizer) -> None:
        optimizer._set_current_context(self.ctx.device_id)
        optimizer.fused_update(self.indices, self.weight, self.grad, self.state, self.segments)
