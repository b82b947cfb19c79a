"""Numerical gradient checking shared by the engine's op and layer tests.

``check_grad(fn, inputs)`` differentiates ``fn`` with autograd and compares every input's
gradient with float64 central differences. ``fn`` maps NDArrays to one NDArray (or a tuple
of them); the scalar being differentiated is ``sum(out * w)`` for a fixed random ``w`` per
output, so every output element contributes with a distinct weight (a plain ``sum`` would
hide errors whose gradient sums to zero, e.g. in softmax or batch norm).

    import numpy as np
import pytest
    from engine import nd
    from tests.engine.gradcheck import check_grad

    check_grad(lambda x: nd.tanh(x), [np.random.randn(3, 4)])

Inputs may be numpy arrays or NDArrays; they are converted to float64 NDArrays on ``ctx``
(cpu by default, a gpu context runs the same check on cupy). ``wrt`` selects which inputs
are differentiated (default: all); the others are passed through unchanged (labels,
integer indices). On a gpu context, check_grad also runs ``fn`` once in float32 on the GPU
and on numpy and asserts that outputs and gradients agree within 1e-5 relative, so ``fn``
makes any arrays of its own on its inputs' context (``ctx=x.context``), not a captured one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from engine import autograd, backend
from engine.context import Context, cpu, gpu
from engine.ndarray.ndarray import NDArray

# Every device test runs on numpy, and on cupy where a GPU is present (marker `gpu`).
CONTEXTS = [
    pytest.param(cpu(), id="numpy"),
    pytest.param(gpu(0), id="cupy", marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(backend.gpu_count() == 0, reason="needs cupy and a CUDA GPU"),
    ]),
]


def _as_outputs(out: Any) -> list[NDArray]:
    if isinstance(out, NDArray):
        return [out]
    return list(out)


def _to_input(x: Any, ctx: Context, differentiable: bool) -> NDArray:
    raw = x.asnumpy() if isinstance(x, NDArray) else np.asarray(x)
    if differentiable:
        raw = raw.astype(np.float64)
    return NDArray(ctx.xp.asarray(raw.copy()), ctx)


def _objective(fn: Callable[..., Any], arrays: list[NDArray], weights: list[Any]) -> float:
    outs = _as_outputs(fn(*arrays))
    total = 0.0
    for out, w in zip(outs, weights, strict=True):
        total += float((out.raw.astype(np.float64) * w).sum())
    return total


def numeric_grad(
    fn: Callable[..., Any], arrays: list[NDArray], weights: list[Any], index: int, eps: float
) -> np.ndarray:
    """Central-difference gradient of the weighted objective w.r.t. ``arrays[index]``."""
    target = arrays[index]
    flat = target.raw.reshape(-1)  # a view: writes perturb the input in place
    grad = np.zeros(flat.shape, dtype=np.float64)
    for i in range(flat.size):
        orig = float(flat[i])
        flat[i] = orig + eps
        plus = _objective(fn, arrays, weights)
        flat[i] = orig - eps
        minus = _objective(fn, arrays, weights)
        flat[i] = orig
        grad[i] = (plus - minus) / (2 * eps)
    return grad.reshape(target.shape)


def check_grad(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    eps: float = 1e-6,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    wrt: Sequence[int] | None = None,
    ctx: Context | None = None,
    train_mode: bool = True,
    seed: int = 0,
) -> list[np.ndarray]:
    """Assert autograd's gradients of ``fn`` match float64 finite differences.

    Returns the analytic gradients (numpy) for further assertions.
    """
    ctx = ctx if ctx is not None else cpu()
    wrt_set = set(range(len(inputs))) if wrt is None else set(wrt)
    arrays = [_to_input(x, ctx, i in wrt_set) for i, x in enumerate(inputs)]
    for i in sorted(wrt_set):
        arrays[i].attach_grad()
    with autograd.record(train_mode=train_mode):
        outs = _as_outputs(fn(*arrays))
    rng = np.random.default_rng(seed)
    weights_np = [rng.uniform(0.5, 1.5, size=o.shape) for o in outs]
    weights = [ctx.xp.asarray(w) for w in weights_np]
    head_grads = [NDArray(w.astype(o.raw.dtype), ctx) for w, o in zip(weights, outs, strict=True)]
    autograd.backward(outs, head_grads)
    analytic = []
    for i in sorted(wrt_set):
        got = arrays[i].grad.asnumpy()
        # numeric pass with the same training flag, outside recording
        with autograd.pause(train_mode=train_mode):
            expected = numeric_grad(fn, arrays, weights, i, eps)
        np.testing.assert_allclose(
            got, expected, rtol=rtol, atol=atol,
            err_msg=f"gradient of input {i} (shape {arrays[i].shape}) disagrees with finite "
            "differences",
        )
        analytic.append(got)
    if ctx.device_type == "gpu":
        _check_float32_matches_cpu(fn, inputs, wrt_set, ctx, train_mode, weights_np)
    return analytic


# float32 sums run in another order on the GPU (cuBLAS, tree reductions), so elements near
# zero carry an absolute error of the array's scale: the tolerance is relative to the
# largest element of the CPU result.
FLOAT32_RTOL = 1e-5


def _float32_run(
    fn: Callable[..., Any], inputs: Sequence[Any], wrt_set: set[int], ctx: Context,
    train_mode: bool, weights_np: list[np.ndarray],
) -> list[np.ndarray]:
    arrays = []
    for i, x in enumerate(inputs):
        raw = x.asnumpy() if isinstance(x, NDArray) else np.asarray(x)
        if i in wrt_set:
            raw = raw.astype(np.float32)
        arrays.append(NDArray(ctx.xp.asarray(raw.copy()), ctx))
    for i in sorted(wrt_set):
        arrays[i].attach_grad()
    with autograd.record(train_mode=train_mode):
        outs = _as_outputs(fn(*arrays))
    heads = [NDArray(ctx.xp.asarray(w.astype(o.raw.dtype)), ctx)
             for w, o in zip(weights_np, outs, strict=True)]
    autograd.backward(outs, heads)
    return [o.asnumpy() for o in outs] + [arrays[i].grad.asnumpy() for i in sorted(wrt_set)]


def _check_float32_matches_cpu(
    fn: Callable[..., Any], inputs: Sequence[Any], wrt_set: set[int], ctx: Context,
    train_mode: bool, weights_np: list[np.ndarray],
) -> None:
    """The same float32 forward and backward on the GPU and on numpy agree to 1e-5."""
    on_gpu = _float32_run(fn, inputs, wrt_set, ctx, train_mode, weights_np)
    on_cpu = _float32_run(fn, inputs, wrt_set, cpu(), train_mode, weights_np)
    n_out = len(on_gpu) - len(wrt_set)
    for k, (got, want) in enumerate(zip(on_gpu, on_cpu, strict=True)):
        what = f"output {k}" if k < n_out else f"gradient {k - n_out}"
        scale = float(np.abs(want).max()) if want.size else 0.0
        np.testing.assert_allclose(
            got, want, rtol=FLOAT32_RTOL, atol=FLOAT32_RTOL * scale,
            err_msg=f"float32 {what} on {ctx} differs from numpy's",
        )
