"""A traced forward compiled into a static program, replayed without the Python tape.

The program is a list of kernels over numbered value slots (block inputs, Parameters,
intermediate results). A replay under ``autograd.record()`` appears on the caller's tape as
ONE node (as MXNet's CachedOp does) whose inputs are the block inputs and the Parameter
arrays; its backward walks the kernels in reverse, writing weight gradients straight into
the Parameters' gradient buffers when autograd offers them.

Buffers (MXNet's ``static_alloc``): intermediate results and backward scratch live in a
:class:`BufferSet` reused from call to call. A set is lent to a recorded forward until its
backward has run (without ``retain_graph``) or its output is gone; a second forward before
that gets another set, so nothing a pending backward needs is overwritten. The block's
outputs are always fresh arrays: the caller may keep them.

On a GPU the buffers are not kept from call to call: cupy's memory pool already hands a
freed block of the same size back at once, and kept buffers would hold every activation of
the network, and its backward scratch, on the device between steps (ResNet-18 at batch 128:
0.9 GB). There the backward also lets go of each kernel's results and their gradients once
the kernel's own backward ran (the last that reads them), so they go back to the pool while
the backward goes on, as the imperative tape frees its nodes. (On the CPU the kept buffers
hold most of them anyway: releasing early lowered ResNet-18's peak by 0.5%.)
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy

from ... import autograd, grad_hooks
from ...autograd import WRITTEN
from ...ndarray import cpu_kernels, kernel_threads, weight_prep
from ...ndarray.ndarray import NDArray, _Node
from .kernels import (
    ActivationKernel,
    FullyConnectedKernel,
    GenericKernel,
    activation_of,
)
from .norm_kernels import (
    AddReluKernel,
    BatchNormKernel,
    fusable_add_relu,
    fusable_followers,
    is_plain_batch_norm,
)
from .trace import SlotRef, Step, Tracer, Untraceable

_FC_KWARGS = {"data", "weight", "bias", "no_bias", "num_hidden", "flatten"}


def _layout(arr: Any) -> tuple[int, ...]:
    """The order of an array's axes in memory, outermost first."""
    return tuple(sorted(range(arr.ndim), key=lambda axis: -abs(arr.strides[axis])))


def _same_layout(arr: Any, like: Any) -> bool:
    # the common case, both C-ordered, without sorting strides on every call
    if like.flags.c_contiguous:
        return bool(arr.flags.c_contiguous)
    return _layout(arr) == _layout(like)


class BufferSet:
    """Arrays a program reuses across calls, allocated on first use."""

    def __init__(self, xp: Any, keep: bool = True) -> None:
        self.xp = xp
        self.keep = keep  # False: every get() is a fresh array (one call's set on a GPU)
        self.generation = 0
        self._arrays: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...], shape: tuple[int, ...], dtype: Any,
            like: Any = None) -> Any:
        """A buffer of ``shape``/``dtype``; with ``like`` (same shape), laid out in memory as
        ``like`` is (a channels-last conv output stays channels-last, so the next operator
        reads it without a transposing copy)."""
        arr = self._arrays.get(key)
        if arr is None or arr.shape != shape or arr.dtype != dtype or (
                like is not None and not _same_layout(arr, like)):
            arr = (self.xp.empty_like(like, dtype=dtype) if like is not None
                   else self.xp.empty(shape, dtype))
            if self.keep:
                self._arrays[key] = arr
        return arr

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A read-only array of zeros (shared by every kernel that asks for this shape)."""
        key = ("zeros", shape, dtype)
        arr = self._arrays.get(key)
        if arr is None or arr.dtype != dtype:
            arr = self._arrays[key] = self.xp.zeros(shape, dtype)
        return arr


class Run:
    """The state of one replay: values by slot, gradients, and what needs a gradient."""

    __slots__ = ("program", "values", "ctx", "xp", "buffers", "keep", "needs", "grads",
                 "tapes", "leaves", "direct")

    def __init__(self, program: Program, values: list[Any], ctx: Any, xp: Any,
                 buffers: BufferSet, keep: bool, needs: list[bool],
                 leaves: list[NDArray]) -> None:
        self.program = program
        self.values = values
        self.ctx = ctx
        self.xp = xp
        self.buffers = buffers
        self.keep = keep
        self.needs = needs
        self.grads: dict[int, Any] = {}
        self.tapes: dict[int, Any] = {}
        self.leaves = leaves
        # autograd's in-place gradient targets while this run's backward runs
        self.direct: dict[int, Any] | None = None

    def output_buffer(self, slot: int, key: tuple[Any, ...], shape: tuple[int, ...],
                      dtype: Any, like: Any = None) -> Any:
        """Where a kernel writes ``slot``: a reused buffer, or a fresh array for an output
        (laid out as ``like`` when given, see BufferSet.get)."""
        if slot in self.program.output_slots:
            return (self.xp.empty_like(like, dtype=dtype) if like is not None
                    else self.xp.empty(shape, dtype))
        return self.buffers.get(key + ("out",), shape, dtype, like)

    def direct_buffer(self, slot: int) -> Any:
        """The Parameter's own gradient buffer, when the whole gradient may be written there."""
        if self.direct is None:
            return None
        leaf = self.program.single_use_leaf.get(slot)
        if leaf is None:
            return None
        return self.direct.get(id(self.leaves[leaf]))

    def add_grad(self, slot: int, g: Any) -> None:
        earlier = self.grads.get(slot)
        if (earlier is not None or slot not in self.program.leaf_index) and (
                kernel_threads.pending(g) or kernel_threads.pending(earlier)):
            # a deferred weight gradient that is summed, or read by another kernel's
            # backward (a weight computed in the graph): it must be final first
            kernel_threads.drain()
        self.grads[slot] = g if earlier is None else earlier + g


class Program:
    """One traced forward (fixed input shapes, dtypes and training mode), compiled."""

    def __init__(self, tracer: Tracer, output: Any, static_alloc: bool, xp: Any) -> None:
        if tracer.failure is not None:
            raise Untraceable(tracer.failure)
        self.structure, outputs = _flatten_outputs(output)
        out_slots = [tracer.slot_of(o) for o in outputs]
        if not outputs or any(s is None for s in out_slots):
            raise Untraceable("an output was computed outside F")
        self.n_inputs = len(tracer.inputs)
        self.params = list(tracer.params)
        self.leaf_slots = list(range(self.n_inputs)) + self._param_slot_numbers(tracer)
        self.leaf_index = {slot: i for i, slot in enumerate(self.leaf_slots)}
        self.n_slots = tracer.n_slots
        self.out_slots: list[int] = out_slots  # type: ignore[assignment]
        self.output_slots = frozenset(self.out_slots)
        self.uses: dict[int, int] = {}
        for step in tracer.steps:
            for slot in step.inputs:
                self.uses[slot] = self.uses.get(slot, 0) + 1
        # leaves read by one step only: their whole gradient may go to autograd's buffer
        self.single_use_leaf = {slot: i for i, slot in enumerate(self.leaf_slots)
                                if self.uses.get(slot, 0) == 1}
        # every slot the steps a kernel runs write (a fused kernel's inner results too)
        self._produced: dict[int, tuple[int, ...]] = {}
        self.kernels = self._compile(tracer.steps)
        self._backward_kernels = self._tape_order()
        self._ready_after = self._leaves_complete_after()
        self._done_after = self._results_done_after()
        self._steps = tracer.steps
        self._view_of_buffer = self._maybe_views()
        self.static_alloc = static_alloc
        self.xp = xp
        # a GPU's policy (see the module's docstring): a fresh buffer set per call, each
        # result let go of during the backward
        self.per_call_buffers = xp is not numpy
        # recorded forwards' sets, each with the array whose tape node may still need it
        self._lent: list[tuple[BufferSet, weakref.ref[NDArray]]] = []
        self._inference = BufferSet(xp)
        self._needs_cache: dict[tuple[bool, ...], list[bool]] = {}
        self._no_needs = (False,) * len(self.leaf_slots)
        # the weight preparations the last call made, by the leaf slot of their weight
        self._prepared: list[tuple[int, weight_prep.Made]] = []

    @staticmethod
    def _param_slot_numbers(tracer: Tracer) -> list[int]:
        # parameters were registered in tracer.params order, each with one new slot
        slots = sorted(s for s in tracer._slot.values() if s >= len(tracer.inputs))
        step_outputs = {o for step in tracer.steps for o in step.outputs}
        return [s for s in slots if s not in step_outputs]

    # ----------------------------------------------------------------- compiling
    def _compile(self, steps: list[Step]) -> list[Any]:
        kernels: list[Any] = []
        starts: list[int] = []  # the first step each kernel runs
        skip = -1
        for i, step in enumerate(steps):
            if i <= skip:  # fused into the previous kernel
                continue
            starts.append(i)
            if is_plain_batch_norm(step):
                relu, pool = fusable_followers(steps, i, self.uses, self.output_slots)
                kernels.append(BatchNormKernel(i, step, relu, pool))
                skip = i + (relu is not None) + (pool is not None)
                continue
            relu = fusable_add_relu(steps, i, self.uses, self.output_slots)
            if relu is not None:
                kernels.append(AddReluKernel(i, step, relu))
                skip = i + 1
                continue
            if self._is_plain_fc(step):
                nxt = steps[i + 1] if i + 1 < len(steps) else None
                out = step.outputs[0]
                act = activation_of(nxt) if nxt is not None else None
                if (nxt is not None and act is not None and self.uses.get(out) == 1
                        and out not in self.output_slots
                        and isinstance(nxt.args[0], SlotRef) and nxt.args[0].slot == out):
                    kernels.append(FullyConnectedKernel(i, step, act, nxt.outputs[0]))
                    skip = i + 1
                else:
                    kernels.append(FullyConnectedKernel(i, step, None, out))
                continue
            act = activation_of(step)
            if act is not None and isinstance(step.args[0], SlotRef):
                kernels.append(ActivationKernel(i, step, act))
                continue
            kernels.append(GenericKernel(step))
        stops = [*starts[1:], len(steps)] if starts else []
        for kernel, start, stop in zip(kernels, starts, stops, strict=True):
            self._produced[id(kernel)] = tuple(o for step in steps[start:stop]
                                               for o in step.outputs)
        return kernels

    def _tape_order(self) -> list[Any]:
        """Kernels in the order autograd's tape would run their backward rules.

        Any reverse topological order is correct; this one (the tape's own depth-first
        post-order from the outputs, reversed) also sums the gradients of an array used
        several times in the same order as the tape does, so results stay bit-identical.
        """
        producer: dict[int, Any] = {}
        for kernel in self.kernels:
            outs = kernel.step.outputs if isinstance(kernel, GenericKernel) else (kernel.out,)
            for slot in outs:
                producer[slot] = kernel
        roots = [producer[s] for s in self.out_slots if s in producer]
        order = autograd.depth_first_postorder(
            roots, lambda kernel: [producer[s] for s in kernel.reads() if s in producer])
        order.reverse()
        return order

    def _leaves_complete_after(self) -> dict[int, list[int]]:
        """Backward position -> leaves (by index) whose gradient is complete after the
        kernel there: the last kernel in backward order that reads them."""
        last: dict[int, int] = {}
        for position, kernel in enumerate(self._backward_kernels):
            for slot in kernel.reads():
                if slot in self.leaf_index:
                    last[self.leaf_index[slot]] = position
        after: dict[int, list[int]] = {}
        for leaf, position in last.items():
            after.setdefault(position, []).append(leaf)
        return after

    def _results_done_after(self) -> list[tuple[int, ...]]:
        """Backward position -> the slots whose values and gradients nothing reads after the
        kernel there: the ones it produced. The backward order is reverse topological, so
        every reader of a result ran its backward before the result's producer; the block's
        outputs stay (the caller holds them anyway)."""
        return [tuple(s for s in self._produced[id(kernel)] if s not in self.output_slots)
                for kernel in self._backward_kernels]

    def _announce_ready(self, run: Run, position: int) -> None:
        """Hand the Parameters finished at ``position`` to autograd now (written into their
        gradient buffers, as the tape would after this node) so a gradient reducer can
        start on them while the remaining kernels run."""
        for leaf in self._ready_after[position]:
            slot = self.leaf_slots[leaf]
            grad = run.grads.get(slot)
            target = run.direct.get(id(run.leaves[leaf])) if run.direct else None
            if grad is None or target is None:
                continue  # no gradient, or not this node's alone: the tape finishes it
            if grad is not WRITTEN:
                target[...] = grad
                run.grads[slot] = WRITTEN
            grad_hooks.announce(run.leaves[leaf])

    @staticmethod
    def _is_plain_fc(step: Step) -> bool:
        if step.name != "FullyConnected" or step.multi_output:
            return False
        if set(step.kwargs) - _FC_KWARGS or len(step.args) > 3:
            return False
        data = step.args[0] if step.args else step.kwargs.get("data")
        weight = step.args[1] if len(step.args) > 1 else step.kwargs.get("weight")
        bias = step.args[2] if len(step.args) > 2 else step.kwargs.get("bias")
        return (isinstance(data, SlotRef) and isinstance(weight, SlotRef)
                and (bias is None or isinstance(bias, SlotRef)))

    def _maybe_views(self) -> set[int]:
        """Outputs that may be views of a reused buffer (a generic step such as a reshape
        applied to a kernel's buffer): they are copied before being returned."""
        buffered: set[int] = set()
        for kernel in self.kernels:
            if isinstance(kernel, GenericKernel):
                if any(s in buffered for s in kernel.reads()):
                    buffered.update(kernel.step.outputs)
            elif kernel.out not in self.output_slots:
                buffered.add(kernel.out)
        return buffered & self.output_slots

    def _needs(self, leaf_needs: tuple[bool, ...]) -> list[bool]:
        needs = self._needs_cache.get(leaf_needs)
        if needs is None:
            needs = [False] * self.n_slots
            for slot, flag in zip(self.leaf_slots, leaf_needs, strict=True):
                needs[slot] = flag
            for step in self._steps:
                if any(needs[s] for s in step.inputs):
                    for o in step.outputs:
                        needs[o] = True
            self._needs_cache[leaf_needs] = needs
        return needs

    # ------------------------------------------------------------------- buffers
    def _free_set(self) -> BufferSet:
        """A buffer set no pending backward needs: its tape node is gone, or its backward
        already ran without ``retain_graph`` (so it cannot run again); else a new set."""
        for i, (buffers, holder) in enumerate(self._lent):
            arr = holder()
            if arr is None or arr._node is None or arr._node.backward is None:
                del self._lent[i]
                return buffers
        return BufferSet(self.xp)

    def _lend(self, buffers: BufferSet, holder: NDArray) -> None:
        if self.static_alloc and buffers.keep:
            self._lent.append((buffers, weakref.ref(holder)))

    # ------------------------------------------------------------------- running
    def __call__(self, inputs: list[NDArray], ctx: Any) -> Any:
        leaves = list(inputs)
        leaves += [_param_data(p, ctx) for p in self.params]
        values: list[Any] = [None] * self.n_slots
        for slot, arr in zip(self.leaf_slots, leaves, strict=True):
            values[slot] = arr.raw
        keep = False
        if autograd._state.recording:
            # needs_grad() of each leaf, inlined (called per leaf on every replay)
            leaf_needs = tuple([a._node is not None or a._grad_req != "null" for a in leaves])
            keep = True in leaf_needs
        else:
            leaf_needs = self._no_needs
        needs = self._needs(leaf_needs)
        if self.per_call_buffers:
            buffers = BufferSet(self.xp, keep=False)
        elif keep:
            buffers = self._free_set() if self.static_alloc else BufferSet(self.xp)
            buffers.generation += 1
        else:
            buffers = self._inference if self.static_alloc else BufferSet(self.xp)
        run = Run(self, values, ctx, self.xp, buffers, keep, needs, leaves)
        # the weight preparations the last call's layers made (filter transforms), queued
        # for the other threads before the first layer runs, into this set's buffers; all
        # done on leaving the block
        queue = [(made, values[slot], buffers.get(("prepared", slot, made.kind), made.shape,
                                                  made.dtype))
                 for slot, made in self._prepared if made.fits(values[slot])]
        with kernel_threads.deferring(), weight_prep.ahead(queue) as forward:
            for kernel in self.kernels:
                kernel.forward(run)
        if forward.made or self._prepared:  # (a program with no convolutions: nothing)
            slot_of = {id(values[slot]): slot for slot in self.leaf_slots}
            self._prepared = [(slot_of[id(weight)], made) for weight, made in forward.made
                              if id(weight) in slot_of]
        results = []
        differentiable = []
        for slot in self.out_slots:
            if slot in self.leaf_index:  # the block returned one of its inputs
                results.append(leaves[self.leaf_index[slot]])
                continue
            out = values[slot]
            results.append(NDArray(out.copy() if slot in self._view_of_buffer else out, ctx))
            if keep and needs[slot]:
                differentiable.append((slot, results[-1]))
        if len(differentiable) == 1:
            slot, result = differentiable[0]
            result._node = _Node(tuple(leaves), self._backward_rule(run, slot))
            self._lend(buffers, result)
        elif differentiable:
            # One backward for all outputs: each output's node hands its gradient to a
            # shared anchor node; autograd sums them there (an _OutputGrads merge), and
            # the anchor's rule runs the program backward once, as the tape would.
            anchor = NDArray(differentiable[0][1].raw, ctx)  # data unused
            anchor._node = _Node(tuple(leaves), self._backward_rule(run, None))
            for slot, result in differentiable:
                result._node = _Node((anchor,), _to_anchor(slot))
            self._lend(buffers, anchor)
        if self.structure is None:
            return results[0]
        return _unflatten(self.structure, results)

    def _backward_rule(self, run: Run, slot: int | None) -> Any:
        """The program's backward as a tape rule: for output ``slot``'s gradient, or (None)
        for the merged gradients of several outputs."""
        generation = run.buffers.generation

        def backward(g: Any) -> tuple[Any, ...]:
            if run.buffers.generation != generation:
                raise RuntimeError(
                    "a hybridized block was called again before the backward of an earlier "
                    "call that had already been differentiated once; its buffers were reused"
                )
            run.grads = dict(g.by_slot) if slot is None else {slot: g}
            run.direct = autograd._state.direct
            announcing = run.direct is not None and grad_hooks.active()
            # (not with retain_graph: the backward may run again)
            releasing = self.per_call_buffers and not autograd._state.retain_graph
            values, grads = run.values, run.grads
            # weight gradients (read by nothing in this loop) may be queued for the other
            # threads while this one goes on down the data gradients; all are done on
            # leaving the block
            with kernel_threads.deferring():
                for position, kernel in enumerate(self._backward_kernels):
                    kernel.backward(run)
                    if announcing and position in self._ready_after:
                        kernel_threads.drain()  # what is announced must be final
                        self._announce_ready(run, position)
                    if releasing:
                        for done in self._done_after[position]:
                            values[done] = None
                            grads.pop(done, None)
            grads = run.grads
            direct = run.direct or {}
            out = []
            for index, leaf in enumerate(self.leaf_slots):
                grad = grads.get(leaf)
                if grad is not None and grad is not WRITTEN:
                    # It may live in a reused buffer: a copy leaves this node. A 'write'
                    # Parameter whose whole gradient comes from here gets it written into
                    # its own gradient buffer instead (one copy of every weight gradient a
                    # step, not two: this one and the tape's into .grad).
                    target = direct.get(id(run.leaves[index]))
                    if target is not None and target.shape == grad.shape:
                        cpu_kernels.assign(target, grad)
                        grad = WRITTEN
                    else:
                        grad = grad.copy()
                out.append(grad)
            if not autograd._state.retain_graph:
                # this graph cannot run backward again: let the forward's values go now
                run.values, run.grads, run.tapes = [], {}, {}
            return tuple(out)

        return backward


class _OutputGrads:
    """Gradients of several outputs on their way to the anchor node; ``+`` merges them."""

    __slots__ = ("by_slot",)

    def __init__(self, by_slot: dict[int, Any]) -> None:
        self.by_slot = by_slot

    def __add__(self, other: _OutputGrads) -> _OutputGrads:
        merged = dict(self.by_slot)
        for slot, g in other.by_slot.items():
            merged[slot] = merged[slot] + g if slot in merged else g
        return _OutputGrads(merged)


def _to_anchor(slot: int) -> Any:
    return lambda g: (_OutputGrads({slot: g}),)


def _param_data(param: Any, ctx: Any) -> NDArray:
    """``param.data(ctx)``, without its context search when the parameter lives on ``ctx``
    alone (every call of a single-device program)."""
    data, contexts = param._ctx_data, param._ctx_list
    if data is not None and len(data) == 1 and contexts[0] == ctx:
        return data[0]  # type: ignore[no-any-return]
    return param.data(ctx)  # type: ignore[no-any-return]


def _flatten_outputs(output: Any) -> tuple[Any, list[NDArray]]:
    """(structure, arrays) of an NDArray or a nested list/tuple of them."""
    if isinstance(output, NDArray):
        return None, [output]
    if isinstance(output, (list, tuple)):
        parts = [_flatten_outputs(o) for o in output]
        if all(p[1] for p in parts):
            return (type(output), [(p[0], len(p[1])) for p in parts]), \
                [a for p in parts for a in p[1]]
    raise Untraceable("hybrid_forward returned something other than NDArrays")


def _unflatten(structure: Any, arrays: list[NDArray]) -> Any:
    if structure is None:
        return arrays[0]
    kind, parts = structure
    out, start = [], 0
    for sub, count in parts:
        out.append(_unflatten(sub, arrays[start:start + count]))
        start += count
    return kind(out)
