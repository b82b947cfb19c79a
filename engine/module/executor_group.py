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


def groups_per_context(group2ctxs: Any, count: int) -> list[dict[str, Context]]:
    """MXNet's ``group2ctxs`` as one ``{ctx_group: context}`` table per context: a list
    gives one table per context; a dict's values are one context for all, or one per
    context."""
    if group2ctxs is None:
        return [{} for _ in range(count)]
    if isinstance(group2ctxs, (list, tuple)):
        if len(group2ctxs) != count:
            raise ValueError(f"group2ctxs has {len(group2ctxs)} entries for {count} contexts")
        return [dict(table or {}) for table in group2ctxs]
    tables: list[dict[str, Context]] = [{} for _ in range(count)]
    for group, where in dict(group2ctxs).items():
        places = [where] * count if isinstance(where, Context) else list(where)
        if len(places) == 1:
            places = places * count
        if len(places) != count:
            raise ValueError(f"group2ctxs[{group!r}] gives {len(places)} contexts for "
                             f"{count} contexts")
        for table, ctx in zip(tables, places, strict=True):
            table[group] = ctx
    return tables


class ExecutorGroup:
    """Parameters, auxiliary states and the latest outputs of each context."""

    def __init__(self, symbol: Any, contexts: Sequence[Context], work_load_list: Sequence[float],
                 data_names: Sequence[str], label_names: Sequence[str],
                 param_shapes: dict[str, Shape], aux_shapes: dict[str, Shape],
                 grad_reqs: dict[str, str], inputs_need_grad: bool,
                 group2ctxs: Sequence[dict[str, Context]] | None = None,
                 batch_axes: dict[str, int] | None = None) -> None:
        self.symbol = symbol
        self.contexts = list(contexts)
        self.work_load_list = list(work_load_list)
        self.data_names = list(data_names)
        self.label_names = list(label_names)
        self.output_names = symbol.list_outputs()
        self.inputs_need_grad = inputs_need_grad
        # the axis each input and output is split on over the contexts: the N of its layout
        # (a DataDesc's layout, an output's __layout__ attribute), as MXNet splits
        self.batch_axes = dict(batch_axes or {})
        self.output_axes = [_batch_axis(symbol[i].attr("__layout__"))
                            for i in range(len(self.output_names))]
        # where each variable lives on each context: a ctx_group mapped by group2ctxs
        # places it (and its gradient) on that group's context, as MXNet does
        groups = {n.name: n.attrs["__ctx_group__"] for n in symbol._nodes()
                  if n.op is None and "__ctx_group__" in n.attrs}
        self.placement = [{name: table[group] for name, group in groups.items()
                           if group in table}
                          for table in (group2ctxs or [{} for _ in self.contexts])]
        self.params: list[dict[str, NDArray]] = []
        self.aux: list[dict[str, NDArray]] = []
        for ctx, place in zip(self.contexts, self.placement, strict=True):
            params = {}
            for name, shape in param_shapes.items():
                arr = zeros(shape, ctx=place.get(name, ctx))
                if grad_reqs[name] != "null":
                    arr.attach_grad(grad_reqs[name])
                params[name] = arr
            self.params.append(params)
            self.aux.append({name: zeros(shape, ctx=place.get(name, ctx))
                             for name, shape in aux_shapes.items()})
        self.outputs: list[list[NDArray]] = []
        self.inputs: list[dict[str, NDArray]] = []
        self._arguments: dict[str, NDArray] = {}  # the first context's, as last run
        self._placeholders: dict[tuple[Any, ...], dict[str, NDArray]] = {}
        self._monitors: list[Any] | None = None
        self._compiled = [CompiledGraph(symbol) for _ in self.contexts]

    def set_monitor_callback(self, callback: Any, monitor_all: bool = False) -> None:
        """``callback(name, array)`` for every operator output (``mx.mon.Monitor``), one
        watcher per context as MXNet has one per executor."""
        from ..symbol.monitoring import Monitored

        self._monitors = [Monitored(callback, monitor_all) for _ in self.contexts]

    @property
    def arg_dict(self) -> dict[str, NDArray]:
        """The first context's arguments (the latest inputs, labels and the parameters),
        in the symbol's argument order."""
        values = {**self._arguments, **self.params[0]}
        return {n: values[n] for n in self.symbol.list_arguments() if n in values}

    @property
    def param_names(self) -> list[str]:
        """The learned arguments, in the symbol's order (MXNet's executor group's list)."""
        return [n for n in self.symbol.list_arguments() if n in self.params[0]]

    @property
    def execs(self) -> list[_ContextArrays]:
        """Per context, its arrays as MXNet's executors show them (``grad_dict``, ...)."""
        return [_ContextArrays(self, k) for k in range(len(self.contexts))]

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

    def _part(self, arr: NDArray, part: slice, name: str) -> NDArray:
        if part == slice(None):
            return arr
        return arr[(slice(None),) * self.batch_axes.get(name, 0) + (part,)]

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
        slices = self._slices(data[0].shape[self.batch_axes.get(self.data_names[0], 0)])
        self.outputs, self.inputs = [], []
        for k, (ctx, part) in enumerate(zip(self.contexts, slices, strict=True)):
            values: dict[str, NDArray] = {}
            place = self.placement[k]
            for name, arr in zip(self.data_names, data, strict=True):
                arr = self._part(arr, part, name).as_in_context(place.get(name, ctx))
                if self.inputs_need_grad:
                    arr = arr.copy()
                    arr.attach_grad()
                values[name] = arr
            if labels and self.label_names:
                label_values = {name: self._part(arr, part, name).as_in_context(
                    place.get(name, ctx)) for name, arr in zip(self.label_names, labels,
                                                                strict=False)}
            else:
                label_values = self._placeholder_labels(values, ctx)
            self.inputs.append(dict(values))
            values.update(label_values)
            if k == 0:
                self._arguments = dict(values)
            values.update(self.params[k])
            values.update(self.aux[k])
            monitor = None if self._monitors is None else self._monitors[k]
            outputs = None if monitor is not None else \
                self._compiled[k].forward(values, is_train)
            if outputs is not None:
                self.outputs.append(outputs)
            elif is_train:
                with autograd.record(train_mode=True):
                    self.outputs.append(self.symbol._evaluate(values, monitor))
            else:
                with autograd.predict_mode():
                    self.outputs.append(self.symbol._evaluate(values, monitor))

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
        if not heads:  # nothing in the graph wants a gradient (no parameters, fixed ones)
            return
        if out_grads is None:
            autograd.backward(heads)
        else:
            self._backward_from(out_grads)
        for monitor in self._monitors or []:
            monitor.after_backward()

    def _backward_from(self, out_grads: Any) -> None:
        grads = [out_grads] if isinstance(out_grads, NDArray) else list(out_grads)
        axis = self.output_axes[0]
        slices = self._slices(sum(outs[0].shape[axis] for outs in self.outputs))
        per_head = []
        for k, outs in enumerate(self.outputs):
            for grad, out, out_axis in zip(grads, outs, self.output_axes, strict=False):
                part = grad if slices[k] == slice(None) else \
                    grad[(slice(None),) * out_axis + (slices[k],)]
                per_head.append(part.as_in_context(out.context))
        pairs = [(o, g) for o, g in zip([o for outs in self.outputs for o in outs], per_head,
                                        strict=True) if o._node is not None]
        autograd.backward([o for o, _ in pairs], [g for _, g in pairs])

    def get_outputs(self, merge_multi_context: bool = True) -> Any:
        if len(self.contexts) == 1:
            return list(self.outputs[0]) if merge_multi_context else \
                [[o] for o in self.outputs[0]]
        per_output = [[outs[i] for outs in self.outputs] for i in range(len(self.output_names))]
        if not merge_multi_context:
            return per_output
        first = self.contexts[0]
        return [concat([o.as_in_context(first) for o in parts], axis=axis)
                for parts, axis in zip(per_output, self.output_axes, strict=True)]

    def update_metric(self, eval_metric: Any, labels: Any) -> None:
        """Update per context with that context's labels and outputs (as MXNet does)."""
        labels = [a if isinstance(a, NDArray) else array(a) for a in (labels or [])]
        first_axis = self.batch_axes.get(self.label_names[0], 0) if self.label_names else 0
        slices = self._slices(labels[0].shape[first_axis]) if labels else \
            [slice(None)] * len(self.outputs)
        for k, outs in enumerate(self.outputs):
            label_list = [self._part(a, slices[k], name)
                          for name, a in zip(self.label_names, labels, strict=False)]
            label_dict = OrderedDict(zip(self.label_names, label_list, strict=False))
            pred_dict = OrderedDict(zip(self.output_names, outs, strict=True))
            eval_metric.update_dict(label_dict, pred_dict)

    def input_grads(self) -> list[NDArray]:
        """Each data input's gradient: on its context, or joined on the first part's."""
        grads = []
        for name in self.data_names:
            parts = [inputs[name].grad for inputs in self.inputs]
            first = parts[0].context
            grads.append(parts[0] if len(parts) == 1 else
                         concat([p.as_in_context(first) for p in parts],
                                axis=self.batch_axes.get(name, 0)))
        return grads


class _ContextArrays:
    """One context's arguments, gradients, auxiliary states and outputs."""

    def __init__(self, group: ExecutorGroup, k: int) -> None:
        params = group.params[k]
        inputs = group.inputs[k] if k < len(group.inputs) else {}
        self.arg_dict = {**inputs, **params}
        self.grad_dict = {n: a.grad for n, a in self.arg_dict.items() if a.grad is not None}
        self.aux_dict = dict(group.aux[k])
        self.outputs = list(group.outputs[k]) if k < len(group.outputs) else []


def _batch_axis(layout: str | None) -> int:
    """The batch axis of a layout such as 'NCHW' or 'TNC' (0 without one)."""
    return layout.find("N") if layout and "N" in layout else 0


def copy_into(name: str, target: NDArray, value: Any) -> None:
    """Write ``value`` into ``target``'s buffer (checked shape, target's dtype)."""
    source = value if isinstance(value, NDArray) else array(value)
    if source.shape != target.shape:
        raise ValueError(f"parameter {name!r} has shape {source.shape} but the module "
                         f"expects {target.shape}")
    target.raw[...] = source.as_in_context(target.context).raw.astype(
        target.raw.dtype, copy=False)
