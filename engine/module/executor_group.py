"""Data parallelism for ``Module``: one copy of the parameters per context, the batch
split between them (MXNet's ``DataParallelExecutorGroup``, without executors: each slice
runs the symbol's compiled program, :mod:`engine.symbol.compiled_graph`, under autograd;
node by node with NDArray ops while a monitor is installed).

With one context nothing is split or copied: the batch goes straight to the graph.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .. import autograd
from ..context import Context, cpu
from ..ndarray import NDArray, array, zeros
from ..ndarray.shape_ops import concat
from ..symbol.compiled_graph import CompiledGraph

Shape = tuple[int, ...]


def split_sizes(batch_size: int, work_load_list: Sequence[float]) -> list[int]:
    """Samples per context, proportional to the workloads (MXNet's rounding: the last
    context takes the remainder)."""
    total = float(sum(work_load_list))
    sizes = [int(round(w * batch_size / total)) for w in work_load_list[:-1]]
    sizes.append(batch_size - sum(sizes))
    if any(s <= 0 for s in sizes):
        raise ValueError(f"a batch of {batch_size} samples is too small to split over "
                         f"{len(work_load_list)} contexts (workloads {list(work_load_list)})")
    return sizes


class ExecutorGroup:
    """Parameters, auxiliary states and the latest outputs of each context."""

    def __init__(self, symbol: Any, contexts: Sequence[Context], work_load_list: Sequence[float],
                 data_names: Sequence[str], label_names: Sequence[str],
                 param_shapes: dict[str, Shape], aux_shapes: dict[str, Shape],
                 grad_reqs: dict[str, str], inputs_need_grad: bool) -> None:
        self.symbol = symbol
        self.contexts = list(contexts)
        self.work_load_list = list(work_load_list)
        self.data_names = list(data_names)
        self.label_names = list(label_names)
        self.output_names = symbol.list_outputs()
        self.inputs_need_grad = inputs_need_grad
        self.params: list[dict[str, NDArray]] = []
        self.aux: list[dict[str, NDArray]] = []
        for ctx in self.contexts:
            params = {}
            for name, shape in param_shapes.items():
                arr = zeros(shape, ctx=ctx)
                if grad_reqs[name] != "null":
                    arr.attach_grad(grad_reqs[name])
                params[name] = arr
            self.params.append(params)
            self.aux.append({name: zeros(shape, ctx=ctx) for name, shape in aux_shapes.items()})
        self.outputs: list[list[NDArray]] = []
        self.inputs: list[dict[str, NDArray]] = []
        self._sizes: list[int] = []
        self._placeholders: dict[tuple[Any, ...], dict[str, NDArray]] = {}
        self._monitor: Any = None
        self._compiled = [CompiledGraph(symbol) for _ in self.contexts]

    def set_monitor_callback(self, callback: Any, monitor_all: bool = False) -> None:
        """``callback(name, array)`` for every operator output (``mx.mon.Monitor``)."""
        from ..symbol.executor import _Callback

        self._monitor = _Callback(callback, monitor_all)

    @property
    def arg_dict(self) -> dict[str, NDArray]:
        """The first context's arguments: the latest inputs and the parameters."""
        inputs = self.inputs[0] if self.inputs else {}
        return {**inputs, **self.params[0]}

    # ------------------------------------------------------------------ params
    def share_params(self, other: ExecutorGroup) -> None:
        """Use ``other``'s parameter and auxiliary arrays (same names, same shapes)."""
        for mine, theirs in ((self.params, other.params), (self.aux, other.aux)):
            for table, source in zip(mine, theirs, strict=True):
                for name, arr in table.items():
                    if name not in source:
                        continue
                    if source[name].shape != arr.shape:
                        raise ValueError(f"shared parameter {name!r} has shape "
                                         f"{source[name].shape}, this graph needs {arr.shape}")
                    table[name] = source[name]

    def set_params(self, arg_params: dict[str, NDArray], aux_params: dict[str, NDArray]) -> None:
        for params, aux in zip(self.params, self.aux, strict=True):
            for table, source in ((params, arg_params), (aux, aux_params)):
                for name, value in source.items():
                    if name in table:
                        copy_into(name, table[name], value)

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        """Host copies; with several contexts the average of the copies (as MXNet)."""
        return self._average(self.params), self._average(self.aux)

    def _average(self, tables: list[dict[str, NDArray]]) -> dict[str, NDArray]:
        out = {}
        for name in tables[0]:
            total = tables[0][name].copyto(cpu())
            for table in tables[1:]:
                total.raw += table[name].copyto(cpu()).raw
            if len(tables) > 1:
                total.raw /= len(tables)
            out[name] = total
        return out

    # ------------------------------------------------------------- computation
    def _slices(self, batch_size: int) -> list[slice]:
        if len(self.contexts) == 1:
            return [slice(None)]
        sizes = split_sizes(batch_size, self.work_load_list)
        bounds = [0]
        for s in sizes:
            bounds.append(bounds[-1] + s)
        return [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]

    def forward(self, data_batch: Any, is_train: bool) -> None:
        data = [a if isinstance(a, NDArray) else array(a) for a in data_batch.data]
        if len(data) != len(self.data_names):
            raise ValueError(f"the batch has {len(data)} data arrays but the module expects "
                             f"{self.data_names}")
        labels = [a if isinstance(a, NDArray) else array(a)
                  for a in (getattr(data_batch, "label", None) or [])]
        if is_train and self.label_names and not labels:
            raise ValueError(f"a training forward needs labels for {self.label_names}; the "
                             "batch has none")
        slices = self._slices(data[0].shape[0])
        self.outputs, self.inputs = [], []
        for k, (ctx, part) in enumerate(zip(self.contexts, slices, strict=True)):
            values: dict[str, NDArray] = {}
            for name, arr in zip(self.data_names, data, strict=True):
                arr = (arr if part == slice(None) else arr[part]).as_in_context(ctx)
                if self.inputs_need_grad:
                    arr = arr.copy()
                    arr.attach_grad()
                values[name] = arr
            if labels and self.label_names:
                label_values = {
                    name: (arr if part == slice(None) else arr[part]).as_in_context(ctx)
                    for name, arr in zip(self.label_names, labels, strict=False)}
            else:
                label_values = self._placeholder_labels(values, ctx)
            self.inputs.append(dict(values))
            values.update(label_values)
            values.update(self.params[k])
            values.update(self.aux[k])
            outputs = None if self._monitor is not None else \
                self._compiled[k].forward(values, is_train)
            if outputs is not None:
                self.outputs.append(outputs)
            elif is_train:
                with autograd.record(train_mode=True):
                    self.outputs.append(self.symbol._evaluate(values, self._monitor))
            else:
                with autograd.predict_mode():
                    self.outputs.append(self.symbol._evaluate(values, self._monitor))

    def _placeholder_labels(self, values: dict[str, NDArray], ctx: Context) -> dict[str, NDArray]:
        """Zero labels for inference batches without labels (loss heads ignore them)."""
        if not self.label_names:
            return {}
        shapes = {n: v.shape for n, v in values.items()}
        key = (ctx, tuple(sorted(shapes.items())))
        if key not in self._placeholders:
            arg, _, _ = self.symbol._infer_shapes(**shapes)
            arg_shape = dict(zip(self.symbol.list_arguments(), arg, strict=True))
            self._placeholders[key] = {n: zeros(arg_shape[n] or (1,), ctx=ctx)
                                       for n in self.label_names}
        return self._placeholders[key]

    def backward(self, out_grads: Any = None) -> None:
        heads = [o for outs in self.outputs for o in outs if o._node is not None]
        if not heads:
            raise RuntimeError("backward: the last forward was not a training forward")
        if out_grads is None:
            autograd.backward(heads)
            return
        grads = [out_grads] if isinstance(out_grads, NDArray) else list(out_grads)
        slices = self._slices(self.outputs[0][0].shape[0] if len(self.contexts) == 1 else
                              sum(outs[0].shape[0] for outs in self.outputs))
        per_head = []
        for k, ctx in enumerate(self.contexts):
            for grad in grads:
                part = grad if slices[k] == slice(None) else grad[slices[k]]
                per_head.append(part.as_in_context(ctx))
        autograd.backward([o for outs in self.outputs for o in outs], per_head)

    def get_outputs(self, merge_multi_context: bool = True) -> Any:
        if len(self.contexts) == 1:
            return list(self.outputs[0]) if merge_multi_context else \
                [[o] for o in self.outputs[0]]
        per_output = [[outs[i] for outs in self.outputs] for i in range(len(self.output_names))]
        if not merge_multi_context:
            return per_output
        first = self.contexts[0]
        return [concat([o.as_in_context(first) for o in parts], axis=0) for parts in per_output]

    def update_metric(self, eval_metric: Any, labels: Any) -> None:
        """Update per context with that context's labels and outputs (as MXNet does)."""
        labels = [a if isinstance(a, NDArray) else array(a) for a in (labels or [])]
        slices = self._slices(labels[0].shape[0]) if labels else [slice(None)] * len(
            self.outputs)
        for k, outs in enumerate(self.outputs):
            label_list = [a if slices[k] == slice(None) else a[slices[k]] for a in labels]
            label_dict = OrderedDict(zip(self.label_names, label_list, strict=False))
            pred_dict = OrderedDict(zip(self.output_names, outs, strict=True))
            eval_metric.update_dict(label_dict, pred_dict)

    def input_grads(self) -> list[NDArray]:
        grads = []
        first = self.contexts[0]
        for name in self.data_names:
            parts = [inputs[name].grad.as_in_context(first) for inputs in self.inputs]
            grads.append(parts[0] if len(parts) == 1 else concat(parts, axis=0))
        return grads


def copy_into(name: str, target: NDArray, value: Any) -> None:
    """Write ``value`` into ``target``'s buffer (checked shape, target's dtype)."""
    source = value if isinstance(value, NDArray) else array(value)
    if source.shape != target.shape:
        raise ValueError(f"parameter {name!r} has shape {source.shape} but the module "
                         f"expects {target.shape}")
    target.raw[...] = source.as_in_context(target.context).raw.astype(
        target.raw.dtype, copy=False)
