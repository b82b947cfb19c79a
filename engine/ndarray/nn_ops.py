"""Neural-network primitives with fused backward rules (MXNet's operator names).

Fusing ``FullyConnected`` (x·Wᵀ + b) and the softmax family into single recorded ops is
what keeps the engine within a few percent of hand-written numpy: one Python-level node
per layer instead of one per elementwise step.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy

from .. import autograd
from .. import random as _random
from ..backend import array_module
from . import gemm
from .kernel_threads import run_tasks
from .ndarray import NDArray, apply_op, as_raw, needs_grad
from .ops import _sigmoid, unary


def fully_connected(
    data: NDArray,
    weight: NDArray,
    bias: NDArray | None = None,
    num_hidden: int | None = None,
    no_bias: bool = False,
    flatten: bool = True,
) -> NDArray:
    """``data · weightᵀ + bias``; ``weight`` has shape (num_hidden, in_units)."""
    x = data._data
    w = weight._data
    in_shape = x.shape
    if flatten and x.ndim != 2:
        x = x.reshape(x.shape[0], -1)
    if x.shape[-1] != w.shape[1]:
        raise ValueError(
            f"FullyConnected: input has {x.shape[-1]} features but weight expects "
            f"{w.shape[1]} (weight shape {w.shape}, input shape {in_shape})"
        )
    if num_hidden is not None and w.shape[0] != num_hidden:
        raise ValueError(f"FullyConnected: weight has {w.shape[0]} rows, num_hidden={num_hidden}")
    out = gemm.matmul(x, w.T)  # on the engine's threads, the same floats for any count
    use_bias = bias is not None and not no_bias
    if use_bias:
        out += bias._data  # type: ignore[union-attr]
    inputs = (data, weight, bias) if use_bias else (data, weight)

    def backward(g: Any) -> tuple[Any, ...]:
        g2 = g.reshape(-1, g.shape[-1])
        x2 = x.reshape(-1, x.shape[-1])
        # The input batch rarely needs a gradient; skipping it saves the largest matmul.
        gx = gemm.matmul(g2, w).reshape(in_shape) if needs_grad(data) else None
        gw = _matmul_into(g2.T, x2, autograd.direct_grad_buffer(weight))
        if use_bias:
            gb_buf = autograd.direct_grad_buffer(bias)
            if gb_buf is None:
                return gx, gw, g2.sum(axis=0)
            g2.sum(axis=0, out=gb_buf)
            return gx, gw, autograd.WRITTEN
        return gx, gw

    result = apply_op(out, inputs, backward)  # type: ignore[arg-type]
    if result._node is not None:  # differentiable again by higher_order's rule
        result._node.op = ("fully_connected", flatten)
    return result


def _matmul_into(a: Any, b: Any, out: Any) -> Any:
    """``a @ b``, written straight into ``out`` when autograd offers a gradient buffer."""
    if out is None:
        return gemm.matmul(a, b)
    gemm.matmul(a, b, out)
    return autograd.WRITTEN


# MXNet 1.9's names for Activation's act_type and LeakyReLU's (the symbol ops check them)
ACTIVATION_TYPES = ("relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish")
LEAKY_RELU_TYPES = ("leaky", "prelu", "elu", "selu", "gelu")


def activation(data: NDArray, act_type: str = "relu") -> NDArray:
    """MXNet ``Activation``: relu, sigmoid, tanh, softrelu, softsign, log_sigmoid, mish."""
    names = {"relu", "sigmoid", "tanh", "softrelu", "softsign"}
    if act_type in names:
        return unary(act_type, data)
    if act_type == "log_sigmoid":
        return -unary("softrelu", -data)
    if act_type == "mish":
        return data * unary("tanh", unary("softrelu", data))
    raise ValueError(
        f"unknown act_type {act_type!r}; expected one of "
        f"{sorted(names | {'log_sigmoid', 'mish'})}"
    )


def leaky_relu(
    data: NDArray, act_type: str = "leaky", slope: float = 0.25, gamma: NDArray | None = None
) -> NDArray:
    """MXNet ``LeakyReLU``: leaky, prelu (learned ``gamma``), elu, selu, gelu."""
    x = data._data
    xp = data.xp
    if act_type == "leaky":
        out = xp.where(x > 0, x, x * slope).astype(x.dtype, copy=False)
        return apply_op(out, (data,), lambda g: (xp.where(x > 0, g, g * slope),))
    if act_type == "prelu":
        if gamma is None:
            raise ValueError("LeakyReLU(act_type='prelu') needs a gamma array")
        a = gamma._data.reshape((1, -1) + (1,) * (x.ndim - 2)) if x.ndim > 1 else gamma._data
        out = xp.where(x > 0, x, x * a)

        def prelu_backward(g: Any) -> tuple[Any, Any]:
            ga = xp.where(x > 0, 0, g * x)
            # a per-channel gamma sums over the other axes; a shared one (size 1) over all
            shared = gamma.size == 1 or x.ndim < 2
            axes = None if shared else tuple(i for i in range(x.ndim) if i != 1)
            return xp.where(x > 0, g, g * a), ga.sum(axis=axes).reshape(gamma.shape)

        return apply_op(out, (data, gamma), prelu_backward)
    if act_type == "elu":
        e = xp.expm1(xp.minimum(x, 0))
        out = xp.where(x > 0, x, slope * e).astype(x.dtype, copy=False)
        return apply_op(out, (data,), lambda g: (xp.where(x > 0, g, g * slope * (e + 1)),))
    if act_type == "selu":
        alpha, lam = 1.6732632423543772, 1.0507009873554805
        e = xp.expm1(xp.minimum(x, 0))
        out = (lam * xp.where(x > 0, x, alpha * e)).astype(x.dtype, copy=False)
        return apply_op(
            out, (data,), lambda g: (lam * xp.where(x > 0, g, g * alpha * (e + 1)),)
        )
    if act_type == "gelu":
        # exact (erf) form, as MXNet 1.9's LeakyReLU(act_type='gelu') computes it
        cdf = 0.5 * (1 + erf(x / numpy.sqrt(2)))
        out = (x * cdf).astype(x.dtype, copy=False)
        pdf = xp.exp(-0.5 * x * x) / numpy.sqrt(2 * numpy.pi)
        return apply_op(out, (data,), lambda g: (g * (cdf + x * pdf),))
    raise ValueError(f"unknown LeakyReLU act_type {act_type!r}")


def erf(x: Any) -> Any:
    """Elementwise error function for either backend (numpy has none).

    Abramowitz & Stegun 7.1.26: absolute error below 1.5e-7, i.e. exact at float32.
    """
    xp = array_module(x)
    sign = xp.sign(x)
    a = abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                        + t * 1.061405429))))
    return sign * (1.0 - poly * xp.exp(-a * a))


def _softmax_raw(x: Any, axis: int, temperature: float | None) -> Any:
    xp = array_module(x)
    z = x / temperature if temperature else x
    z = z - z.max(axis=axis, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def softmax(data: NDArray, axis: int = -1, temperature: float | None = None) -> NDArray:
    y = _softmax_raw(data._data, axis, temperature)
    scale = 1.0 / temperature if temperature else 1.0

    def backward(g: Any) -> tuple[Any]:
        return (scale * y * (g - (g * y).sum(axis=axis, keepdims=True)),)

    return apply_op(y, (data,), backward)


def log_softmax(data: NDArray, axis: int = -1, temperature: float | None = None) -> NDArray:
    x = data._data
    xp = data.xp
    z = x / temperature if temperature else x
    z = z - z.max(axis=axis, keepdims=True)
    out = z - xp.log(xp.exp(z).sum(axis=axis, keepdims=True))
    scale = 1.0 / temperature if temperature else 1.0

    def backward(g: Any) -> tuple[Any]:
        return (scale * (g - xp.exp(out) * g.sum(axis=axis, keepdims=True)),)

    return apply_op(out, (data,), backward)


def softmax_cross_entropy_sparse(logits: NDArray, label: Any, axis: int = -1) -> NDArray:
    """Per-sample ``-log softmax(logits)[label]`` fused: gradient is ``softmax - onehot``.

    ``label`` holds class indices with the shape of ``logits`` minus ``axis``.
    """
    x = logits._data
    xp = logits.xp
    ax = axis % x.ndim
    if ax != x.ndim - 1:  # work with the class axis last
        x = xp.moveaxis(x, ax, -1)
    batch_shape, classes = x.shape[:-1], x.shape[-1]
    x2 = x.reshape(-1, classes)
    rows = xp.arange(x2.shape[0])
    cols = as_raw(label).reshape(-1).astype(numpy.int64, copy=False)
    if cols.shape[0] != rows.shape[0]:
        raise ValueError(
            f"softmax cross-entropy: {cols.shape[0]} labels for {rows.shape[0]} predictions "
            f"(logits shape {logits.shape}, class axis {axis})"
        )
    blocks = _row_blocks(x2) if xp is numpy and x2.dtype.kind == "f" else [(0, x2.shape[0])]
    if len(blocks) > 1:  # one task per block of rows, on the engine's threads
        e = numpy.empty_like(x2)
        s = numpy.empty(x2.shape[0], dtype=x2.dtype)
        out = numpy.empty(x2.shape[0], dtype=x2.dtype)
        run_tasks([partial(_softmax_ce_rows, x2, cols, e, s, out, r0, r1)
                   for r0, r1 in blocks])
        out = out.astype(x.dtype, copy=False).reshape(batch_shape)
    else:
        z = x2 - _row_max(x2, xp)[:, None]
        e = xp.exp(z)
        s = e.sum(axis=1)
        out = (xp.log(s) - z[rows, cols]).astype(x.dtype, copy=False).reshape(batch_shape)

    def backward(g: Any) -> tuple[Any]:
        g = g.reshape(-1, 1)
        if len(blocks) > 1:
            p = numpy.empty_like(e)
            run_tasks([partial(_softmax_ce_grad_rows, e, s, cols, g, p, r0, r1)
                       for r0, r1 in blocks])
        else:
            p = e / s[:, None]
            p[rows, cols] -= 1
            p *= g
        grad = p.reshape(x.shape)
        return (xp.moveaxis(grad, -1, ax) if ax != grad.ndim - 1 else grad,)

    return apply_op(out, (logits,), backward)


# Rows of logits per task of the softmax cross-entropy: blocks of at least this many
# values, fixed by the shape. Each row's floats are the same in any block (a row's max,
# exps and pairwise sum are its own), so the blocks change only which thread computes them.
# Forward and backward at 2 threads (1 thread), against one block: 512x1000 logits 1.47x
# (0.97x), 4096x1000 1.83x (1.13x); smaller blocks cost more than they gave (256x1000 in
# blocks of 2^16 values: 1.04x at 2 threads, 0.87x at 1).
_LOSS_BLOCK_VALUES = 1 << 18


def _row_blocks(x2: Any) -> list[tuple[int, int]]:
    rows, classes = x2.shape
    per = max(1, _LOSS_BLOCK_VALUES // max(classes, 1))
    return [(r0, min(rows, r0 + per)) for r0 in range(0, rows, per)] or [(0, 0)]


def _softmax_ce_rows(x2: Any, cols: Any, e: Any, s: Any, out: Any, r0: int, r1: int) -> None:
    """Rows r0:r1 of the loss (one task): the single-block rule's floats, into slices."""
    z = x2[r0:r1] - _row_max(x2[r0:r1], numpy)[:, None]
    numpy.exp(z, out=e[r0:r1])
    numpy.sum(e[r0:r1], axis=1, out=s[r0:r1])
    out[r0:r1] = numpy.log(s[r0:r1]) - z[numpy.arange(r1 - r0), cols[r0:r1]]


def _softmax_ce_grad_rows(e: Any, s: Any, cols: Any, g: Any, p: Any, r0: int,
                          r1: int) -> None:
    """Rows r0:r1 of the loss's gradient ``(e / s - onehot)·g`` (one task)."""
    block = p[r0:r1]
    numpy.divide(e[r0:r1], s[r0:r1, None], out=block)
    block[numpy.arange(r1 - r0), cols[r0:r1]] -= 1
    block *= g[r0:r1]


def _row_max(x2: Any, xp: Any) -> Any:
    """``x2.max(axis=1)``. numpy reduces a few classes per row slowly (one short inner loop
    per row: ~7 us for 128x10); over the transposed copy it is one vectorized pass per class,
    3x faster all told. A maximum is exact, so the result is the same."""
    if xp is numpy and x2.shape[1] <= 64:
        return xp.ascontiguousarray(x2.T).max(axis=0)
    return x2.max(axis=1)


def sigmoid_bce_with_logits(logits: NDArray, label: Any) -> NDArray:
    """Elementwise ``max(x,0) - x·y + log(1 + exp(-|x|))`` with gradient ``σ(x) - y``."""
    x = logits._data
    xp = logits.xp
    y = as_raw(label, logits)  # a cpu label for gpu logits moves there
    out = (xp.maximum(x, 0) - x * y + xp.log1p(xp.exp(-abs(x)))).astype(x.dtype, copy=False)
    return apply_op(out, (logits,), lambda g: (g * (_sigmoid(x) - y),))


def one_hot(
    indices: NDArray, depth: int, on_value: float = 1.0, off_value: float = 0.0, dtype: Any = None
) -> NDArray:
    xp = indices.xp
    idx = indices._data.astype(numpy.int64)
    out = xp.full(idx.shape + (depth,), off_value, dtype=numpy.dtype(dtype or numpy.float32))
    valid = (idx >= 0) & (idx < depth)
    xp.put_along_axis(out, xp.expand_dims(xp.where(valid, idx, 0), -1),
                      xp.expand_dims(xp.where(valid, on_value, off_value), -1), axis=-1)
    return NDArray(out, indices._ctx)


def dropout(data: NDArray, p: float = 0.5, axes: tuple[int, ...] = (),
            mode: str = "training") -> NDArray:
    """Inverted dropout: active in training mode (or ``mode='always'``), identity otherwise."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {p}")
    if p == 0 or (mode == "training" and not autograd.is_training()):
        return data
    xp = data.xp
    shape = list(data.shape)
    for a in axes:
        shape[a] = 1
    rng = _random.generator(xp)
    keep = (rng.random(tuple(shape), dtype=numpy.float32) >= p).astype(data._data.dtype)
    mask = keep / (1 - p)
    result = apply_op(data._data * mask, (data,), lambda g: (g * mask,))
    if result._node is not None:  # the gradient scales by a constant mask (second order 0)
        result._node.op = ("scale", mask)
    return result
