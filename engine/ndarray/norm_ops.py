"""Normalization and lookup ops: ``BatchNorm``, ``LayerNorm``, ``Embedding`` (MXNet names).

Each is one recorded node with a closed-form backward (no chain of elementwise nodes).
BatchNorm in training mode normalizes with the batch statistics (biased variance) and
updates the running statistics *in place* during the forward pass, as MXNet 1.9 does:
``running = running * momentum + batch * (1 - momentum)``.

>>> from engine import nd, autograd
>>> x = nd.array([[1.0, 2.0], [3.0, 6.0]])
>>> g, b = nd.ones((2,)), nd.zeros((2,))
>>> rm, rv = nd.zeros((2,)), nd.ones((2,))
>>> with autograd.train_mode():
...     y = nd.BatchNorm(x, g, b, rm, rv, eps=0.0)
>>> y.asnumpy().tolist(), rm.asnumpy().tolist()
([[-1.0, -1.0], [1.0, 1.0]], [0.20000000298023224, 0.4000000059604645])
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import autograd
from . import batch_norm_kernels, cpu_kernels, gpu_norm
from .ndarray import NDArray, apply_op, as_raw


def _channel_shape(ndim: int, axis: int) -> tuple[int, ...]:
    shape = [1] * ndim
    shape[axis] = -1
    return tuple(shape)


class _ChannelView:
    """``x`` as a 2-D (rows, channels) matrix when its channel axis is innermost in memory
    (what the convolutions return), so per-channel sums are one GEMV and every elementwise
    pass runs over contiguous memory; otherwise ``x`` as is, reduced over its other axes."""

    def __init__(self, xp: Any, x: Any, axis: int) -> None:
        self.xp, self.shape, self.axis = xp, x.shape, axis
        # plain transposes, not numpy.moveaxis: a hybridized ResNet builds ~40 views a step
        self._last = (*(i for i in range(x.ndim) if i != axis), axis)  # channels innermost
        self._back = tuple(self._last.index(i) for i in range(x.ndim))
        moved = x.transpose(self._last)
        self.flat = moved.flags.c_contiguous
        self.work = moved.reshape(-1, x.shape[axis]) if self.flat else x
        self.count = x.size // max(x.shape[axis], 1)
        self.cshape = (-1,) if self.flat else _channel_shape(x.ndim, axis)
        self.reduce_axes = (0,) if self.flat else tuple(i for i in range(x.ndim) if i != axis)
        self._ones: Any = None

    def of(self, a: Any) -> Any:
        """Another array of the data's shape, in this view's working form."""
        if not self.flat:
            return a
        return a.transpose(self._last).reshape(self.work.shape)

    def sum(self, a: Any) -> Any:
        if not self.flat:
            return a.sum(axis=self.reduce_axes)
        if self._ones is None:
            self._ones = self.xp.ones(self.count, dtype=self.work.dtype)
        return self._ones @ a

    def vec(self, v: Any) -> Any:
        return v.reshape(self.cshape)

    def row_unit(self) -> int:
        """Rows of the (rows, C) matrix a BatchNorm block must hold whole: two image rows of
        4-D data with an even height (so a fused 2x2 max-pool's passes, which work on pairs
        of image rows, split it where the unfused ones do), else 1."""
        spatial = [s for i, s in enumerate(self.shape) if i != self.axis][1:]
        return 2 * spatial[1] if len(spatial) == 2 and spatial[0] % 2 == 0 else 1

    def restore(self, a: Any) -> Any:
        if not self.flat:
            return a
        return a.reshape(tuple(self.shape[i] for i in self._last)).transpose(self._back)


def batch_norm(data: NDArray, gamma: NDArray, beta: NDArray, moving_mean: NDArray,
               moving_var: NDArray, eps: float = 1e-3, momentum: float = 0.9,
               fix_gamma: bool = True, use_global_stats: bool = False,
               output_mean_var: bool = False, axis: int = 1, cudnn_off: bool = False,
               min_calib_range: Any = None, max_calib_range: Any = None,
               **_: Any) -> NDArray:
    """Batch normalization over every axis but ``axis`` (MXNet's ``BatchNorm`` operator).

    Training mode (``autograd.is_training()``) uses batch statistics unless
    ``use_global_stats``; ``fix_gamma`` treats gamma as 1 (and gives it no gradient).
    One fused node: the forward keeps only the normalized data and 1/std for the backward,
    and reuses its temporaries in place.
    """
    x = data._data
    xp = data.xp
    ax = axis % x.ndim
    c = x.shape[ax]
    for name, arr in (("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean),
                      ("moving_var", moving_var)):
        if arr.size != c:
            raise ValueError(
                f"BatchNorm: {name} has {arr.size} values but data has {c} channels on axis "
                f"{axis} (data shape {x.shape})"
            )
    view = _ChannelView(xp, x, ax)
    work = view.work
    g_raw = xp.ones((c,), x.dtype) if fix_gamma else gamma._data.astype(x.dtype, copy=False)
    bet = beta._data.astype(x.dtype, copy=False)
    batch_stats = autograd.is_training() and not use_global_stats
    if batch_stats and view.flat and work.shape[0] > 0 and cpu_kernels.available(work):
        return _compiled_batch_norm(data, gamma, beta, moving_mean, moving_var, view, eps,
                                    momentum, fix_gamma, output_mean_var)
    running = (moving_mean._data, moving_var._data)
    if batch_stats and not output_mean_var and gpu_norm.applies(x, g_raw, bet, *running) \
            and all(r.flags.c_contiguous for r in running):
        return _gpu_batch_norm(data, gamma, beta, moving_mean, moving_var, ax, g_raw, bet,
                               eps, momentum, fix_gamma)
    if batch_stats:
        mean = view.sum(work) / view.count
        xhat = work - view.vec(mean)
        var = view.sum(xhat * xhat) / view.count
        rm, rv = moving_mean._data, moving_var._data
        rm[...] = rm * momentum + mean.astype(rm.dtype) * (1 - momentum)
        rv[...] = rv * momentum + var.astype(rv.dtype) * (1 - momentum)
        inv_std = 1.0 / xp.sqrt(var + eps)
        xhat *= view.vec(inv_std)  # centered data becomes the normalized data in place
        out = xhat * view.vec(g_raw) if not fix_gamma else xhat.copy()
        out += view.vec(bet)
    else:
        mean = moving_mean._data.astype(x.dtype)
        var = moving_var._data.astype(x.dtype)
        inv_std = 1.0 / xp.sqrt(var + eps)
        scale = g_raw * inv_std
        out = work * view.vec(scale)
        out += view.vec(bet - mean * scale)
        xhat = None
    out = out.astype(x.dtype, copy=False)

    def backward(g: Any) -> tuple[Any, ...]:
        gw = view.of(g)
        gbeta = view.sum(gw)
        normalized = xhat if xhat is not None else (work - view.vec(mean)) * view.vec(inv_std)
        ggamma = view.sum(gw * normalized)
        if batch_stats:
            # d/dx of gamma·(x - mean)/std with mean and var depending on x
            gx = normalized * view.vec(ggamma / view.count)
            xp.subtract(gw, gx, out=gx)
            gx -= view.vec(gbeta / view.count)
            gx *= view.vec(g_raw * inv_std)
        else:
            gx = gw * view.vec(g_raw * inv_std)
        ggamma = xp.zeros_like(ggamma) if fix_gamma else ggamma
        return (view.restore(gx), ggamma.reshape(gamma.shape), gbeta.reshape(beta.shape),
                None, None)

    result = apply_op(view.restore(out), (data, gamma, beta, moving_mean, moving_var), backward)
    if output_mean_var:
        return result, NDArray(mean, data._ctx), NDArray(var, data._ctx)  # type: ignore[return-value]
    return result


def _gpu_batch_norm(data: NDArray, gamma: NDArray, beta: NDArray, moving_mean: NDArray,
                    moving_var: NDArray, axis: int, scale: Any, shift: Any, eps: float,
                    momentum: float, fix_gamma: bool) -> NDArray:
    """Training BatchNorm of float32 data on a GPU (:mod:`.gpu_norm`)."""
    norm = gpu_norm.TrainingNormGpu(data._data, axis)
    out = norm.forward(scale, shift, moving_mean._data, moving_var._data, eps, momentum)

    def backward(g: Any) -> tuple[Any, ...]:
        gx, ggamma, gbeta = norm.backward(g, scale)
        if fix_gamma:
            ggamma[...] = 0
        return gx, ggamma.reshape(gamma.shape), gbeta.reshape(beta.shape), None, None

    return apply_op(out, (data, gamma, beta, moving_mean, moving_var), backward)


class TrainingNorm:
    """BatchNorm with batch statistics on a float32 (rows, C) matrix through the compiled
    kernels of :mod:`engine.ndarray.cpu_kernels`, optionally with a ReLU fused after it.

    The imperative op and the hybridized program's BatchNorm(+ReLU) kernel both run this
    class, so they compute the same floats. Nothing but per-channel vectors is kept for the
    backward: it recomputes x̂ (and the ReLU mask) from ``x``, which costs one more read of
    ``x`` but saves writing and reading a normalized copy.
    """

    def __init__(self, x: Any, gamma: Any, beta: Any, fix_gamma: bool, eps: float,
                 row_unit: int = 1) -> None:
        c = x.shape[1]
        self.x, self.fix_gamma, self.count = x, fix_gamma, x.shape[0]
        # the fixed split of every pass (see engine.ndarray.batch_norm_kernels)
        self.block = batch_norm_kernels.block_rows(x.shape[0], c, row_unit)
        mean, var = numpy.empty(c), numpy.empty(c)
        batch_norm_kernels.channel_stats(x, self.block, mean, var)
        inv_std = 1.0 / numpy.sqrt(var + eps)
        g64 = numpy.ones(c) if fix_gamma else gamma.astype(numpy.float64)
        self.mean64, self.var64, self.gamma64 = mean, var, g64
        self.mean = mean.astype(numpy.float32)
        self.inv_std = inv_std.astype(numpy.float32)
        self.scale = (g64 * inv_std).astype(numpy.float32)
        self.beta = beta.astype(numpy.float32)

    def forward(self, out: Any, relu: bool, moving_mean: Any, moving_var: Any,
                momentum: float) -> None:
        """Write the normalized (and ReLU'd) data into ``out`` and update the running
        statistics in place: ``running = running·momentum + batch·(1 - momentum)``."""
        batch_norm_kernels.normalize(self.x, self.mean, self.scale, self.beta, relu,
                                     self.block, out)
        self._update(moving_mean, moving_var, momentum)

    def backward(self, g: Any, relu: bool, gx: Any) -> tuple[Any, Any]:
        """The input gradient into ``gx`` for the output gradient ``g`` (taken through the
        ReLU when ``relu``); returns the gradients of gamma (zeros under fix_gamma) and beta."""
        c = self.x.shape[1]
        # contiguous: the kernels compiled for strided arrays run many times slower
        g = numpy.ascontiguousarray(g, dtype=numpy.float32)
        sum_g, sum_gx = numpy.empty(c), numpy.empty(c)
        batch_norm_kernels.normalize_grad_sums(g, self.x, self.mean, self.inv_std, self.scale,
                                               self.beta, relu, self.block, sum_g, sum_gx)
        # d/dx of gamma·(x - mean)/std with mean and var depending on x
        per_xhat = (sum_gx / self.count).astype(numpy.float32)
        per_one = (sum_g / self.count).astype(numpy.float32)
        batch_norm_kernels.normalize_grad(g, self.x, self.mean, self.inv_std, self.scale,
                                          self.beta, relu, per_xhat, per_one, self.scale,
                                          self.block, gx)
        return self._param_grads(sum_g, sum_gx)

    def forward_max_pool(self, out: Any, arg: Any, relu: bool, moving_mean: Any,
                         moving_var: Any, momentum: float) -> None:
        """``forward`` followed by a 2x2/stride-2 max-pool, in one pass: ``out`` and
        ``arg`` (uint8 window positions) are (N, H/2, W/2, C) for ``x`` of N·H·W rows."""
        batch_norm_kernels.normalize_max_pool(self._grid(out), self.mean, self.scale,
                                              self.beta, relu, out, arg)
        self._update(moving_mean, moving_var, momentum)

    def backward_max_pool(self, g: Any, arg: Any, relu: bool, gx: Any) -> tuple[Any, Any]:
        """``backward`` for the gradient ``g`` of ``forward_max_pool``'s pooled output; ``gx``
        is (rows, C) as in ``backward``."""
        c = self.x.shape[1]
        g = numpy.ascontiguousarray(g, dtype=numpy.float32)
        x4, gx4 = self._grid(g), gx.reshape(self._grid(g).shape)
        sum_g, sum_gx = numpy.empty(c), numpy.empty(c)
        # blocks of pooled rows holding the unfused blocks' image rows (2·W per pooled row)
        pooled_block = self.block // (2 * x4.shape[2])
        if pooled_block * 2 * x4.shape[2] != self.block:
            raise ValueError("BatchNorm fused with max-pool needs row_unit = 2·width")
        batch_norm_kernels.normalize_max_pool_grad_sums(
            g, arg, x4, self.mean, self.inv_std, self.scale, self.beta, relu, pooled_block,
            sum_g, sum_gx)
        per_xhat = (sum_gx / self.count).astype(numpy.float32)
        per_one = (sum_g / self.count).astype(numpy.float32)
        batch_norm_kernels.normalize_max_pool_grad(g, arg, x4, self.mean, self.inv_std,
                                                   self.scale, self.beta, relu, per_xhat,
                                                   per_one, self.scale, gx4)
        return self._param_grads(sum_g, sum_gx)

    def _grid(self, pooled: Any) -> Any:
        """``x`` as (N, H, W, C) for a pooled (N, H/2, W/2, C) array."""
        n, h, w, c = pooled.shape
        return self.x.reshape(n, 2 * h, 2 * w, c)

    def _update(self, moving_mean: Any, moving_var: Any, momentum: float) -> None:
        for running, batch in ((moving_mean, self.mean64), (moving_var, self.var64)):
            running[...] = running * momentum + batch.astype(running.dtype) * (1 - momentum)

    def _param_grads(self, sum_g: Any, sum_gx: Any) -> tuple[Any, Any]:
        c = self.x.shape[1]
        ggamma = numpy.zeros(c, numpy.float32) if self.fix_gamma else sum_gx.astype(numpy.float32)
        return ggamma, sum_g.astype(numpy.float32)


def _compiled_batch_norm(data: NDArray, gamma: NDArray, beta: NDArray, moving_mean: NDArray,
                         moving_var: NDArray, view: _ChannelView, eps: float, momentum: float,
                         fix_gamma: bool, output_mean_var: bool) -> Any:
    """Training-mode BatchNorm of channels-last float32 data via :class:`TrainingNorm`."""
    norm = TrainingNorm(view.work, gamma._data, beta._data, fix_gamma, eps, view.row_unit())
    out = numpy.empty_like(view.work)
    norm.forward(out, False, moving_mean._data, moving_var._data, momentum)

    def backward(g: Any) -> tuple[Any, ...]:
        gx = numpy.empty_like(view.work)
        ggamma, gbeta = norm.backward(view.of(g), False, gx)
        return (view.restore(gx), ggamma.reshape(gamma.shape), gbeta.reshape(beta.shape),
                None, None)

    result = apply_op(view.restore(out), (data, gamma, beta, moving_mean, moving_var), backward)
    if output_mean_var:
        return (result, NDArray(norm.mean, data._ctx),
                NDArray(norm.var64.astype(numpy.float32), data._ctx))
    return result


def layer_norm(data: NDArray, gamma: NDArray, beta: NDArray, axis: int = -1,
               eps: float = 1e-5, output_mean_var: bool = False, **_: Any) -> NDArray:
    """Normalize each sample over ``axis`` and apply per-channel ``gamma``/``beta``."""
    x = data._data
    xp = data.xp
    ax = axis % x.ndim
    c = x.shape[ax]
    if gamma.size != c or beta.size != c:
        raise ValueError(
            f"LayerNorm: gamma/beta have {gamma.size}/{beta.size} values but data has {c} on "
            f"axis {axis} (data shape {x.shape})"
        )
    cshape = _channel_shape(x.ndim, ax)
    gam = gamma._data.astype(x.dtype, copy=False).reshape(cshape)
    mean = x.mean(axis=ax, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=ax, keepdims=True)
    inv_std = 1.0 / xp.sqrt(var + eps)
    xhat = centered * inv_std
    out = (xhat * gam + beta._data.astype(x.dtype, copy=False).reshape(cshape)).astype(
        x.dtype, copy=False)
    other = tuple(i for i in range(x.ndim) if i != ax)

    def backward(g: Any) -> tuple[Any, ...]:
        dxhat = g * gam
        gx = inv_std * (
            dxhat - dxhat.mean(axis=ax, keepdims=True)
            - xhat * (dxhat * xhat).mean(axis=ax, keepdims=True)
        )
        ggamma = (g * xhat).sum(axis=other).reshape(gamma.shape)
        gbeta = g.sum(axis=other).reshape(beta.shape)
        return gx, ggamma, gbeta

    result = apply_op(out, (data, gamma, beta), backward)
    if output_mean_var:
        return result, NDArray(mean, data._ctx), NDArray(xp.sqrt(var + eps), data._ctx)  # type: ignore[return-value]
    return result


def embedding(data: Any, weight: NDArray, input_dim: int | None = None,
              output_dim: int | None = None, dtype: Any = None, sparse_grad: bool = False,
              **_: Any) -> NDArray:
    """Rows of ``weight`` (input_dim, output_dim) picked by the integer-valued ``data``.

    Indices are clipped to ``[0, input_dim-1]`` as MXNet does; ``data`` gets no gradient.
    """
    w = weight._data
    xp = weight.xp
    if w.ndim != 2:
        raise ValueError(f"Embedding weight must be 2-D (input_dim, output_dim), got {w.shape}")
    if input_dim is not None and w.shape[0] != input_dim:
        raise ValueError(f"Embedding: weight has {w.shape[0]} rows, input_dim={input_dim}")
    if output_dim is not None and w.shape[1] != output_dim:
        raise ValueError(f"Embedding: weight has {w.shape[1]} columns, output_dim={output_dim}")
    raw = as_raw(data, weight)
    idx = xp.clip(xp.asarray(raw).astype(numpy.int64), 0, w.shape[0] - 1)
    out = w[idx]

    def backward(g: Any) -> tuple[Any]:
        gw = xp.zeros_like(w)
        flat_idx = idx.reshape(-1)
        flat_g = g.reshape(-1, w.shape[1])
        if hasattr(xp.add, "at"):
            xp.add.at(gw, flat_idx, flat_g)
        else:  # pragma: no cover - older cupy: a one-hot GEMM does the scatter-add
            onehot = (flat_idx[:, None] == xp.arange(w.shape[0])).astype(w.dtype)
            gw += onehot.T @ flat_g
        return (gw,)

    return apply_op(out, (weight,), backward)


BatchNorm = batch_norm
LayerNorm = layer_norm
Embedding = embedding
