"""The steps of a static program: fused kernels on preallocated buffers, and a generic
step that replays any other ``engine.nd`` operator through the autograd tape.

Every kernel computes with the same numpy/cupy calls, in the same order, as the
imperative operator it replaces, only writing into reused buffers (``out=``), so a
hybridized block is bit-identical to the imperative one on CPU.

A kernel offers ``forward(run)`` and ``backward(run)``; ``run`` (see
:class:`engine.gluon.hybrid.program.Run`) holds the values by slot, the buffer set, the
gradients reached so far, and which slots need a gradient.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy

from ... import autograd
from ...ndarray import cpu_kernels, gemm
from ...ndarray.ndarray import NDArray
from ...ndarray.ops import _sigmoid
from .trace import SlotRef, Step

if TYPE_CHECKING:
    from .program import Run

# Activations whose gradient needs only their output, so the fused kernel may overwrite
# the pre-activation in place. Each backward is written exactly as the imperative rule in
# engine.ndarray.ops (same expression, same rounding).
FUSABLE_ACTIVATIONS = ("relu", "sigmoid", "tanh")


def activation_of(step: Step) -> str | None:
    """The act_type of an Activation/relu/sigmoid/tanh step this module can fuse, or None."""
    if step.name in FUSABLE_ACTIVATIONS and len(step.args) == 1 and not step.kwargs:
        return step.name
    if step.name == "Activation":
        act = step.kwargs.get("act_type", step.args[1] if len(step.args) > 1 else "relu")
        extra = set(step.kwargs) - {"act_type"}
        if act in FUSABLE_ACTIVATIONS and not extra and len(step.args) <= 2:
            return str(act)
    return None


def _zero_like(x: Any, run: Run) -> Any:
    """What relu takes the maximum with: on numpy an array of zeros rather than the scalar
    0, the same elementwise maximum (bit for bit, NaN and -0.0 included), but numpy only
    vectorizes the array-array loop (~5x faster on a (128, 256) float32 batch); cupy's
    kernel is as fast with the scalar, which takes no device memory."""
    return run.buffers.zeros(x.shape, x.dtype) if run.xp is numpy else 0


def _activation_forward(act: str, buf: Any, run: Run) -> None:
    xp = run.xp
    if act == "relu":
        xp.maximum(buf, _zero_like(buf, run), out=buf)
    elif act == "tanh":
        xp.tanh(buf, out=buf)
    else:
        buf[...] = _sigmoid(buf)


def _activation_backward(act: str, g: Any, out: Any, run: Run, key: tuple[Any, ...]) -> Any:
    xp = run.xp
    if act == "relu":
        # the 0/1 mask in the gradient's dtype: g·1.0 and g·0.0 are what g·True and g·False
        # give, but a float·float multiply needs no casting loop (~3x faster than float·bool)
        grad = run.buffers.get(key + ("gpre",), out.shape, out.dtype, out)
        mask = run.buffers.get(key + ("mask",), out.shape, out.dtype, out)
        xp.greater(out, 0, out=mask)
        xp.multiply(g, mask, out=grad)
        return grad
    if act == "tanh":
        return (g * (1 - out * out)).astype(out.dtype, copy=False)
    return (g * out * (1 - out)).astype(out.dtype, copy=False)


class FullyConnectedKernel:
    """``FullyConnected`` (x·Wᵀ + b), optionally followed by a fused relu/sigmoid/tanh."""

    def __init__(self, index: int, step: Step, act: str | None, out_slot: int) -> None:
        bound = _bind(step, ("data", "weight", "bias"))
        self.key = ("fc", index)
        self.gx_key = self.key + ("gx",)
        self.x, self.w, self.b = bound["data"], bound["weight"], bound["bias"]
        self.no_bias = bool(step.kwargs.get("no_bias", False)) or self.b is None
        self.flatten = bool(step.kwargs.get("flatten", True))
        self.act = act
        self.out = out_slot

    def reads(self) -> tuple[int, ...]:
        return tuple(s for s in (self.x, self.w, None if self.no_bias else self.b)
                     if s is not None)

    def forward(self, run: Run) -> None:
        x = run.values[self.x]
        w = run.values[self.w]
        if self.flatten and x.ndim != 2:
            x = x.reshape(x.shape[0], -1)
        shape = x.shape[:-1] + (w.shape[0],)
        # the dtype `x @ w.T` would have (float32 input, float64 weights -> float64)
        dtype = x.dtype if x.dtype == w.dtype else run.xp.result_type(x, w)
        out = run.output_buffer(self.out, self.key, shape, dtype)
        gemm.matmul(x, w.T, out)  # as the imperative op: the engine's threads, fixed blocks
        bias = None if self.no_bias else run.values[self.b]
        if self.act in (None, "relu") and out.ndim == 2 and cpu_kernels.available(out) and (
                bias is None or cpu_kernels.available(bias)):
            if bias is not None or self.act is not None:  # the same floats, in one pass
                cpu_kernels.bias_relu(out, out[0] if bias is None else bias,
                                      bias is not None, self.act == "relu")
        else:
            if bias is not None:
                out += bias
            if self.act is not None:
                _activation_forward(self.act, out, run)
        run.values[self.out] = out

    def backward(self, run: Run) -> None:
        g = run.grads.get(self.out)
        if g is None:
            return
        out = run.values[self.out]
        bias_grad = None  # set when the relu's backward also summed the bias gradient
        if self.act == "relu" and g.ndim == 2 and cpu_kernels.available(g, out):
            g, bias_grad = self._relu_backward(run, g, out)
        elif self.act is not None:
            g = _activation_backward(self.act, g, out, run, self.key)
        x = run.values[self.x]
        w = run.values[self.w]
        in_shape = x.shape
        if g.ndim == 2 and x.ndim == 2:
            g2, x2 = g, x
        else:
            g2 = g.reshape(-1, g.shape[-1])
            x2 = x.reshape(-1, x.shape[-1]) if not (self.flatten and x.ndim != 2) else \
                x.reshape(x.shape[0], -1)
        if run.needs[self.x]:
            gx = run.buffers.get(self.gx_key, (g2.shape[0], w.shape[1]), g2.dtype)
            gemm.matmul(g2, w, gx)
            run.add_grad(self.x, gx.reshape(in_shape))
        if run.needs[self.w]:
            direct = run.direct_buffer(self.w)
            if direct is not None:
                gemm.matmul(g2.T, x2, direct)
                run.add_grad(self.w, autograd.WRITTEN)
            else:
                run.add_grad(self.w, gemm.matmul(g2.T, x2))
        if bias_grad is not None:
            run.add_grad(self.b, bias_grad)  # type: ignore[arg-type]
        elif not self.no_bias and run.needs[self.b]:
            direct = run.direct_buffer(self.b)
            if direct is not None:
                g2.sum(axis=0, out=direct)
                run.add_grad(self.b, autograd.WRITTEN)
            else:
                run.add_grad(self.b, g2.sum(axis=0))

    def _relu_backward(self, run: Run, g: Any, out: Any) -> tuple[Any, Any]:
        """The relu mask applied to ``g`` and, where the bias needs a gradient, its column
        sums, in one compiled pass: (gradient before the relu, bias gradient or None)."""
        grad = run.buffers.get(self.key + ("gpre",), out.shape, out.dtype, out)
        want = not self.no_bias and run.needs[self.b]  # type: ignore[index]
        target = run.direct_buffer(self.b) if want else None  # type: ignore[arg-type]
        written = target is not None and cpu_kernels.available(target) and \
            target.flags.c_contiguous
        if want and not written:
            target = run.xp.empty(out.shape[1], out.dtype)
        cpu_kernels.relu_mask_grad(g, out, grad, target if want else grad[0], want)
        if not want:
            return grad, None
        return grad, autograd.WRITTEN if written else target


class ActivationKernel:
    """A stand-alone relu/sigmoid/tanh into a reused buffer."""

    def __init__(self, index: int, step: Step, act: str) -> None:
        self.key = ("act", index)
        self.x = _slot(step.args[0])
        self.act = act
        self.out = step.outputs[0]

    def reads(self) -> tuple[int, ...]:
        return (self.x,)

    def forward(self, run: Run) -> None:
        x = run.values[self.x]
        out = run.output_buffer(self.out, self.key, x.shape, x.dtype, like=x)
        if self.act == "relu" and x.flags.c_contiguous and out.flags.c_contiguous:
            # straight from x: the copy below would be one more pass over the data
            run.xp.maximum(x, _zero_like(x, run), out=out)
        else:
            out[...] = x
            _activation_forward(self.act, out, run)
        run.values[self.out] = out

    def backward(self, run: Run) -> None:
        g = run.grads.get(self.out)
        if g is not None and run.needs[self.x]:
            grad = _activation_backward(self.act, g, run.values[self.out], run, self.key)
            run.add_grad(self.x, grad)


class GenericKernel:
    """Any other operator: called again through ``engine.nd``, with the autograd tape
    recording only this operator's own (usually single) node for the backward."""

    def __init__(self, step: Step) -> None:
        self.step = step
        self.reads_ = step.inputs

    def reads(self) -> tuple[int, ...]:
        return self.reads_

    def forward(self, run: Run) -> None:
        step = self.step
        # one wrapper per argument (not per slot): an array passed twice gets its two
        # gradients added one after the other, in argument order, as the tape does
        wrappers: list[tuple[int, NDArray]] = []
        args = tuple(_wrap_argument(a, run, wrappers) for a in step.args)
        kwargs = {k: _wrap_argument(v, run, wrappers) for k, v in step.kwargs.items()}
        track = run.keep and any(run.needs[s] for s, _ in wrappers)
        with autograd._scope(track, None):
            result = step.fn(*args, **kwargs)
        outs = list(result) if step.multi_output else [result]
        for slot, arr in zip(step.outputs, outs, strict=True):
            run.values[slot] = arr.raw
        if track:
            run.tapes[id(self)] = (wrappers, outs)

    def backward(self, run: Run) -> None:
        taped = run.tapes.get(id(self))
        if taped is None:
            return
        wrappers, outs = taped
        heads, head_grads = [], []
        for slot, arr in zip(self.step.outputs, outs, strict=True):
            g = run.grads.get(slot)
            if arr._node is not None:
                heads.append(arr)
                head_grads.append(g if g is not None else arr.xp.zeros_like(arr.raw))
        if not heads or all(run.grads.get(s) is None for s in self.step.outputs):
            return
        # The step's private tape lives as long as the program's own graph: freed node by
        # node as the backward goes (as the tape frees an imperative graph, so big saved
        # temporaries such as im2col matrices are reused at once) unless it is retained.
        retain = autograd._state.retain_graph
        if not retain:
            del run.tapes[id(self)]
        # A Parameter read by this step alone may get its gradient written straight into
        # its own buffer by the operator (a convolution's weight gradient: one copy fewer
        # of it each step); its wrapper here stands for it.
        direct = {}
        for slot, arr in wrappers:
            target = run.direct_buffer(slot)
            if target is not None:
                direct[id(arr)] = target
        saved, autograd._state.direct = autograd._state.direct, direct or None
        try:
            leaves = autograd._run_backward(heads, head_grads, retain_graph=retain)
        finally:
            autograd._state.direct = saved
        for slot, arr in wrappers:
            got = leaves.get(id(arr))
            if got is not None and run.needs[slot]:
                run.add_grad(slot, got[1])


def _wrap_argument(value: Any, run: Run, wrappers: list[tuple[int, NDArray]]) -> Any:
    """A step's argument for this run: each traced value as a fresh NDArray (recorded in
    ``wrappers``), inside lists and tuples too. (A module function: a nested closure that
    calls itself is a reference cycle, which kept every wrapped input, an activation, alive
    after the step until the garbage collector ran.)"""
    if isinstance(value, SlotRef):
        arr = NDArray(run.values[value.slot], run.ctx)
        if run.keep and run.needs[value.slot]:
            arr._grad_req = "write"  # a leaf of this step's private tape
        wrappers.append((value.slot, arr))
        return arr
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap_argument(v, run, wrappers) for v in value)
    return value


def _slot(value: Any) -> int:
    if not isinstance(value, SlotRef):
        raise TypeError("expected a traced array")
    return value.slot


def _bind(step: Step, names: tuple[str, ...]) -> dict[str, int | None]:
    """Map an operator's positional/keyword array arguments to slots by input name."""
    out: dict[str, int | None] = dict.fromkeys(names)
    for name, value in zip(names, step.args, strict=False):
        out[name] = value.slot if isinstance(value, SlotRef) else None
    for name in names:
        value = step.kwargs.get(name)
        if isinstance(value, SlotRef):
            out[name] = value.slot
    return out
