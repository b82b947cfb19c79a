"""MXNet's model interchange for Gluon: ``HybridBlock.export`` and ``SymbolBlock``.

``export(path, epoch)`` writes ``path-symbol.json`` (the graph, as ``mx.sym.save`` writes
it) and ``path-%04d.params`` (MXNet's binary format, names ``arg:<name>``/``aux:<name>``),
so MXNet 1.9's ``SymbolBlock.imports`` loads the network. ``SymbolBlock.imports`` reads
such a pair, written by MXNet or by Rudder, into a Block that runs forward and backward and
trains like any other (its parameters are the graph's arguments and auxiliary states).

>>> import os, tempfile, engine as mx
>>> net = mx.gluon.nn.HybridSequential()
>>> net.add(mx.gluon.nn.Dense(3, activation='relu'), mx.gluon.nn.Dense(2))
>>> net.initialize(); y = net(mx.nd.ones((1, 4)))
>>> path = os.path.join(tempfile.mkdtemp(), 'net')
>>> [os.path.basename(f) for f in export_block(net, path)]
['net-symbol.json', 'net-0000.params']
>>> back = SymbolBlock.imports(path + '-symbol.json', ['data'], path + '-0000.params')
>>> bool((back(mx.nd.ones((1, 4))) == y).asnumpy().all())
True
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..ndarray.mxnet_format import write_params
from ..ndarray.ndarray import NDArray
from .hybrid.hybrid_block import HybridBlock, _is_symbol
from .hybrid.trace import current_tracer, traced_node
from .parameter import DeferredInitializationError


def _input_count(block: HybridBlock) -> int:
    """How many data inputs ``hybrid_forward`` takes (its positional arguments after ``F``
    that are not the block's own parameters)."""
    try:
        signature = inspect.signature(block.hybrid_forward)
    except (TypeError, ValueError):
        return 1
    count = 0
    for name, param in list(signature.parameters.items())[1:]:  # after F
        if param.kind == param.VAR_POSITIONAL:
            return max(count, 1)
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD) and \
                name not in block._reg_params and param.default is param.empty:
            count += 1
    return max(count, 1)


def block_symbol(block: HybridBlock, num_inputs: int | None = None) -> Any:
    """The Symbol of ``block``'s forward on variables ``data`` (or ``data0``, ``data1``,
    ... for several inputs), as MXNet names a hybridized block's inputs."""
    from .. import symbol

    if isinstance(block, SymbolBlock):  # its graph, with its own input names (as MXNet)
        return block._symbol
    count = num_inputs or _input_count(block)
    names = ["data"] if count == 1 else [f"data{i}" for i in range(count)]
    out = block(*[symbol.var(n) for n in names])
    if isinstance(out, (list, tuple)):
        out = symbol.Group(list(out))
    return out


def exported(block: HybridBlock, remove_amp_cast: bool = True) -> tuple[str, bytes]:
    """What :func:`export_block` writes, in memory: ``(symbol JSON text, params bytes)`` (for
    callers that store them elsewhere than in files, such as object storage)."""
    params = block.collect_params()
    for param in params.values():
        try:
            param.data()
        except DeferredInitializationError:
            raise RuntimeError(
                f"Parameter '{param.name}' has not been initialized yet because its shape is "
                "unknown: run a forward pass with real inputs before export"
            ) from None
    sym = block_symbol(block)
    arg_names = set(sym.list_arguments())
    aux_names = set(sym.list_auxiliary_states())
    arrays = {}
    for name, param in params.items():
        if name in arg_names:
            arrays[f"arg:{name}"] = param._reduce().asnumpy()
        elif name in aux_names:
            arrays[f"aux:{name}"] = param._reduce().asnumpy()
        # a parameter the graph does not use is left out, as MXNet leaves it out
    return sym.tojson(remove_amp_cast), write_params(arrays)


def export_block(block: HybridBlock, path: str, epoch: int = 0,
                 remove_amp_cast: bool = True) -> tuple[str, str]:
    """Write ``path-symbol.json`` and ``path-%04d.params`` as MXNet's ``export`` does."""
    text, blob = exported(block, remove_amp_cast)
    sym_file = f"{path}-symbol.json"
    params_file = f"{path}-{epoch:04d}.params"
    for target, content in ((sym_file, text.encode()), (params_file, blob)):
        written = f"{target}.tmp-{os.getpid()}"  # never a half-written file under the name
        try:
            with open(written, "wb") as handle:
                handle.write(content)
            os.replace(written, target)
        finally:
            if os.path.exists(written):
                os.remove(written)
    return sym_file, params_file


class SymbolBlock(HybridBlock):
    """A Block made of a symbol graph: ``SymbolBlock(outputs, inputs, params=None)``.

    The graph's arguments other than ``inputs`` become parameters (trainable), its
    auxiliary states parameters with ``grad_req='null'``, all named exactly as in the
    graph. Called on NDArrays it evaluates the graph with the engine's differentiable ops,
    so ``autograd.record()``/``backward()`` and a ``Trainer`` work as for any Block; called
    on Symbols it composes the graph (so a network containing it can be exported).
    """

    def __init__(self, outputs: Any, inputs: Any, params: Any = None) -> None:
        from .. import symbol
        from .parameter_dict import ParameterDict

        super().__init__(prefix="", params=ParameterDict("", params))
        outputs = symbol.Group(list(outputs)) if isinstance(outputs, (list, tuple)) \
            else outputs
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        names = []
        for item in inputs:
            if not isinstance(item, symbol.Symbol) or len(item) != 1 or \
                    item._outputs[0][0].op is not None:
                raise ValueError("SymbolBlock inputs must be variables (mx.sym.var)")
            names.append(item.name)
        graph_inputs = set(outputs.list_inputs())
        missing = [n for n in names if n not in graph_inputs]
        if missing:
            raise ValueError(f"SymbolBlock: inputs {missing} are not inputs of the graph, "
                             f"whose inputs are {sorted(graph_inputs)}")
        self._symbol = outputs
        self._input_names = names
        self._checked: set[tuple[tuple[int, ...], ...]] = set()
        for name in outputs.list_arguments():
            if name not in names:
                self.params.get(name, allow_deferred_init=True)
        for name in outputs.list_auxiliary_states():
            if name not in names:
                self.params.get(name, grad_req="null", allow_deferred_init=True)
        # MXNet's rule: attribute-path names (save_parameters) drop the names' common prefix
        strip = len(os.path.commonprefix(list(self.params.keys())))
        for key, value in self.params.items():
            self._reg_params[key[strip:]] = value

    @staticmethod
    def imports(symbol_file: str, input_names: str | Sequence[str],
                param_file: str | None = None, ctx: Any = None, allow_missing: bool = False,
                ignore_extra: bool = False) -> SymbolBlock:
        """A SymbolBlock from ``path-symbol.json`` (and its ``path-%04d.params``), as
        MXNet's ``SymbolBlock.imports``: the names in ``input_names`` are the data inputs,
        every other argument is a parameter loaded from ``param_file``."""
        from .. import symbol

        graph = symbol.load(symbol_file)
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        block = SymbolBlock(graph, [symbol.var(n) for n in names])
        if param_file is not None:
            block.collect_params().load(param_file, ctx, allow_missing, ignore_extra,
                                        cast_dtype=True, dtype_source="saved")
        return block

    def forward(self, x: Any, *args: Any) -> Any:
        inputs = (x, *args)
        if len(inputs) != len(self._input_names):
            raise ValueError(f"SymbolBlock takes {len(self._input_names)} input(s) "
                             f"{self._input_names}, got {len(inputs)}")
        if _is_symbol(x):
            return self._symbol(**dict(zip(self._input_names, inputs, strict=True)))
        arrays = dict(zip(self._input_names, inputs, strict=True))
        ctx = x.context if isinstance(x, NDArray) else None
        try:
            values = {name: p.data(ctx) for name, p in self.params.items()}
        except DeferredInitializationError:
            self._infer_param_shapes(arrays)
            values = {name: p.data(ctx) for name, p in self.params.items()}
        values.update(arrays)
        self._check_shapes(values)
        tracer = current_tracer()
        if tracer is None:
            outputs = self._symbol._evaluate(values)
        else:  # hybridized (itself or a parent): each graph node becomes one program step
            for name, param in self.params.items():
                tracer.param_slot(param, values[name])
            outputs = self._symbol._evaluate(values, run_node=partial(traced_node, tracer))
        return outputs[0] if len(outputs) == 1 else outputs

    def _check_shapes(self, values: dict[str, NDArray]) -> None:
        """Infer the graph's shapes once per input signature, so a parameter file that
        does not fit the graph fails naming the operator and node, not deep in a kernel."""
        signature = tuple(values[n].shape for n in self._input_names)
        if signature in self._checked:
            return
        try:
            self._symbol._infer_shapes(**{n: v.shape for n, v in values.items()})
        except ValueError as exc:
            raise ValueError(f"SymbolBlock: the inputs and parameters do not fit the graph: "
                             f"{exc}") from None
        self._checked.add(signature)

    def _infer_param_shapes(self, arrays: dict[str, NDArray]) -> None:
        arg_shapes, _, aux_shapes = self._symbol.infer_shape(
            **{n: a.shape for n, a in arrays.items()})
        if arg_shapes is None:
            raise ValueError(f"SymbolBlock: inputs of shapes "
                             f"{ {n: a.shape for n, a in arrays.items()} } do not determine "
                             "every parameter's shape")
        names = self._symbol.list_arguments() + self._symbol.list_auxiliary_states()
        for name, shape in zip(names, arg_shapes + aux_shapes, strict=True):
            if name in self.params.keys():
                param = self.params[name]
                param.shape = shape
                param._finish_deferred_init()

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N803
        raise NotImplementedError("SymbolBlock runs its graph in forward()")

