"""Fused kernels for a CNN's non-convolution steps in a static program: BatchNorm with
the ReLU (and 2x2 max-pool) that follow it, and a residual add with its ReLU.

In training mode on channels-last float32 data (what a convolution hands on) the BatchNorm
kernel runs :class:`engine.ndarray.norm_ops.TrainingNorm`, the same compiled passes as the
imperative ``BatchNorm``, with the ReLU folded into the normalizing pass and its mask into
the backward passes (recomputed from the input, so no mask or pre-activation is stored).
A following 2x2 max-pool joins the same passes: the normalized data is never written, only
the pooled max and a uint8 argmax. The imperative ops compute the same floats (see
:mod:`engine.ndarray.cpu_kernels`), so a hybridized block stays bit-identical to the
imperative one.

Anything else (inference mode, global statistics, another dtype or layout, cupy) runs the
steps as the program would without these kernels: the operators through the tape and the
activation kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy

from ... import autograd
from ...ndarray import cpu_kernels
from ...ndarray.norm_ops import TrainingNorm, _ChannelView
from .kernels import ActivationKernel, GenericKernel, _bind, activation_of
from .trace import SlotRef, Step

if TYPE_CHECKING:
    from .program import Run

_BN_KWARGS = {"data", "gamma", "beta", "moving_mean", "moving_var", "eps", "momentum",
              "fix_gamma", "use_global_stats", "axis", "cudnn_off", "output_mean_var"}
_BN_INPUTS = ("data", "gamma", "beta", "moving_mean", "moving_var")


def is_plain_batch_norm(step: Step) -> bool:
    """A single-output ``BatchNorm`` whose five arrays are all traced values."""
    if step.name != "BatchNorm" or step.multi_output or step.kwargs.get("output_mean_var"):
        return False
    if set(step.kwargs) - _BN_KWARGS or len(step.args) > len(_BN_INPUTS):
        return False
    return all(slot is not None for slot in _bind(step, _BN_INPUTS).values())


def _consumer(steps: list[Step], i: int, uses: dict[int, int],
              output_slots: frozenset[int]) -> Step | None:
    """The step after ``steps[i]`` when it takes ``steps[i]``'s output as its first argument
    and is that output's only reader (so the two may run as one kernel), else None."""
    if i + 1 >= len(steps):
        return None
    out, nxt = steps[i].outputs[0], steps[i + 1]
    if uses.get(out) != 1 or out in output_slots:
        return None
    first = nxt.args[0] if nxt.args else None
    return nxt if isinstance(first, SlotRef) and first.slot == out else None


def _is_max_pool_2x2(step: Step) -> bool:
    """Gluon's ``MaxPool2D()`` (2x2 windows, stride 2, no padding) on NCHW data."""
    kw = step.kwargs
    return (step.name == "Pooling" and len(step.args) == 1 and not step.multi_output
            and kw.get("pool_type") == "max" and not kw.get("global_pool", False)
            and tuple(kw.get("kernel", ())) == (2, 2) and tuple(kw.get("stride", ())) == (2, 2)
            and tuple(kw.get("pad", (0, 0))) == (0, 0)
            and kw.get("pooling_convention", "valid") in ("valid", "full")
            and kw.get("layout") in (None, "NCHW")
            and set(kw) <= {"pool_type", "global_pool", "kernel", "stride", "pad",
                            "pooling_convention", "layout", "cudnn_off", "count_include_pad"})


def fusable_followers(steps: list[Step], i: int, uses: dict[int, int],
                      output_slots: frozenset[int]) -> tuple[Step | None, Step | None]:
    """The relu, and the 2x2 max-pool after it, that may run inside the BatchNorm kernel
    of ``steps[i]`` (either None where the next step does not fit)."""
    relu = _consumer(steps, i, uses, output_slots)
    if relu is None or activation_of(relu) != "relu":
        return None, None
    pool = _consumer(steps, i + 1, uses, output_slots)
    return relu, pool if pool is not None and _is_max_pool_2x2(pool) else None


class BatchNormKernel:
    """``BatchNorm`` in a program, with the following ``relu`` (and a 2x2 max-pool after
    it) fused when given."""

    def __init__(self, index: int, step: Step, act: Step | None,
                 pool: Step | None = None) -> None:
        bound = _bind(step, _BN_INPUTS)
        self.key = ("bn", index)
        self.x, self.gamma, self.beta = bound["data"], bound["gamma"], bound["beta"]
        self.mean, self.var = bound["moving_mean"], bound["moving_var"]
        kw = step.kwargs
        self.axis = int(kw.get("axis", 1))
        self.eps = float(kw.get("eps", 1e-3))
        self.momentum = float(kw.get("momentum", 0.9))
        self.fix_gamma = bool(kw.get("fix_gamma", True))
        self.use_global_stats = bool(kw.get("use_global_stats", False))
        self.relu = act is not None
        self.norm_out = act.outputs[0] if act is not None else step.outputs[0]
        self.out = pool.outputs[0] if pool is not None else self.norm_out
        # the unfused steps, for whatever the compiled passes do not cover
        self.generic = GenericKernel(step)
        self.act = ActivationKernel(index + 1, act, "relu") if act else None
        self.pool = GenericKernel(pool) if pool else None

    def reads(self) -> tuple[int, ...]:
        return self.generic.reads()

    def _compiled(self, x: Any) -> _ChannelView | None:
        if self.use_global_stats or not autograd.is_training():
            return None
        view = _ChannelView(numpy, x, self.axis % x.ndim) if cpu_kernels.available(x) else None
        return view if view is not None and view.flat and view.count > 0 else None

    def _poolable(self, x: Any) -> bool:
        return (self.pool is not None and x.ndim == 4 and self.axis % 4 == 1
                and x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0)

    def forward(self, run: Run) -> None:
        x = run.values[self.x]
        view = self._compiled(x)
        if view is None:
            run.tapes[id(self)] = None
            self.generic.forward(run)
            if self.act is not None:
                self.act.forward(run)
        else:
            gamma, beta = run.values[self.gamma], run.values[self.beta]
            norm = TrainingNorm(view.work, gamma, beta, self.fix_gamma, self.eps,
                                view.row_unit())
            running = (run.values[self.mean], run.values[self.var], self.momentum)
            if self._poolable(x):
                n, c, h, w = x.shape
                grid = (n, h // 2, w // 2, c)
                out = run.output_buffer(self.out, self.key, grid, x.dtype)
                arg = run.buffers.get(self.key + ("arg",), grid, numpy.dtype(numpy.uint8))
                norm.forward_max_pool(out, arg, self.relu, *running)
                run.values[self.out] = out.transpose(0, 3, 1, 2)
                run.tapes[id(self)] = (view, norm, arg)
                return
            out = run.output_buffer(self.norm_out, self.key, view.work.shape, x.dtype)
            norm.forward(out, self.relu, *running)
            run.values[self.norm_out] = view.restore(out)
            run.tapes[id(self)] = (view, norm, None)
        if self.pool is not None:
            self.pool.forward(run)

    def backward(self, run: Run) -> None:
        taped = run.tapes.get(id(self), None)
        if self.pool is not None and (taped is None or taped[2] is None):
            self.pool.backward(run)
        if taped is None:
            if self.act is not None:
                self.act.backward(run)
            self.generic.backward(run)
            return
        view, norm, arg = taped
        g = run.grads.get(self.out if arg is not None else self.norm_out)
        if g is None:
            return
        gx = run.buffers.get(self.key + ("gx",), view.work.shape, numpy.dtype(numpy.float32))
        if arg is not None:
            ggamma, gbeta = norm.backward_max_pool(g.transpose(0, 2, 3, 1), arg, self.relu, gx)
        else:
            ggamma, gbeta = norm.backward(view.of(g), self.relu, gx)
        if run.needs[self.x]:
            run.add_grad(self.x, view.restore(gx))
        for slot, grad in ((self.gamma, ggamma), (self.beta, gbeta)):
            if run.needs[slot]:
                shape = run.values[slot].shape
                run.add_grad(slot, grad.reshape(shape).astype(run.values[slot].dtype,
                                                              copy=False))


_ADD_STEPS = ("NDArray.__add__", "elemwise_add", "_plus", "broadcast_add", "add")


def fusable_add_relu(steps: list[Step], i: int, uses: dict[int, int],
                     output_slots: frozenset[int]) -> Step | None:
    """The relu after ``steps[i]`` when that step is ``a + b`` of two traced arrays (a
    residual connection) and the relu is its only reader, else None."""
    step = steps[i]
    if (step.name not in _ADD_STEPS or len(step.args) != 2 or step.kwargs
            or not all(isinstance(a, SlotRef) for a in step.args)):
        return None
    relu = _consumer(steps, i, uses, output_slots)
    return relu if relu is not None and activation_of(relu) == "relu" else None


def _memory_order(arr: Any) -> Any:
    """The 1-D view of a dense array in memory order, or None when it has gaps."""
    order = sorted(range(arr.ndim), key=lambda axis: -arr.strides[axis])
    moved = arr.transpose(order)
    return moved.reshape(-1) if moved.flags.c_contiguous else None


class AddReluKernel:
    """A residual ``relu(a + b)`` in one compiled pass (and its backward in one more), for
    float32 operands laid out alike; anything else runs the two steps unfused."""

    def __init__(self, index: int, add: Step, relu: Step) -> None:
        self.key = ("add_relu", index)
        self.a, self.b = (_slot_of(v) for v in add.args)
        self.out = relu.outputs[0]
        self.generic = GenericKernel(add)
        self.act = ActivationKernel(index + 1, relu, "relu")

    def reads(self) -> tuple[int, ...]:
        return self.generic.reads()

    def forward(self, run: Run) -> None:
        a, b = run.values[self.a], run.values[self.b]
        flat_a = _memory_order(a) if cpu_kernels.available(a, b) else None
        if (flat_a is None or a.shape != b.shape or a.strides != b.strides):
            run.tapes[id(self)] = False
            self.generic.forward(run)
            self.act.forward(run)
            return
        out = run.output_buffer(self.out, self.key, a.shape, a.dtype, like=a)
        cpu_kernels.add_relu(flat_a, _memory_order(b), _memory_order(out))
        run.values[self.out] = out
        run.tapes[id(self)] = True

    def backward(self, run: Run) -> None:
        if not run.tapes.get(id(self), False):
            self.act.backward(run)
            self.generic.backward(run)
            return
        g = run.grads.get(self.out)
        if g is None or not (run.needs[self.a] or run.needs[self.b]):
            return
        out = run.values[self.out]
        flat_g = _memory_order(g) if g.strides == out.strides else None
        if flat_g is None or g.dtype != out.dtype:
            g = g.astype(out.dtype, copy=True) if g.dtype != out.dtype else g
            aligned = run.buffers.get(self.key + ("g",), out.shape, out.dtype, out)
            aligned[...] = g
            flat_g = _memory_order(aligned)
        gx = run.buffers.get(self.key + ("gx",), out.shape, out.dtype, out)
        cpu_kernels.relu_grad_of_output(flat_g, _memory_order(out), _memory_order(gx))
        for slot in (self.a, self.b):  # the add passes the gradient on to both operands
            if run.needs[slot]:
                run.add_grad(slot, gx)


def _slot_of(value: Any) -> int:
    assert isinstance(value, SlotRef)
    return value.slot
