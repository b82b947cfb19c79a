"""``HybridBlock``: a Block written as ``hybrid_forward(F, x, ...)``, runnable on NDArrays
(``F`` = ``engine.nd``), on Symbols (``F`` = ``engine.symbol``) and, after ``hybridize()``,
as a traced static program (see :mod:`engine.gluon.hybrid`).

>>> import engine as mx
>>> class Scale(mx.gluon.HybridBlock):
...     def hybrid_forward(self, F, x):
...         return F.relu(x) * 2
>>> block = Scale(); block.hybridize()
>>> block(mx.nd.array([-1.0, 3.0])).asnumpy().tolist()
[0.0, 6.0]
"""

from __future__ import annotations

from typing import Any

from ... import nd  # the module users compare with (`F is mx.nd`)
from ...ndarray.ndarray import NDArray
from ..block import Block
from ..parameter import DeferredInitializationError
from ..parameter_dict import ParameterDict
from .cached import CachedGraph
from .trace import current_tracer


class HybridBlock(Block):
    """A Block written with ``hybrid_forward(F, x, *args, **params)``.

    Called on NDArrays, ``F`` is ``engine.nd`` and the Block's own parameters arrive as
    keyword NDArrays on the input's context; called on Symbols, ``F`` is ``engine.symbol``,
    the parameters arrive as ``Parameter.var()`` and the result is a Symbol (for
    ``Module``). After ``hybridize()``, calls replay a traced static program (see
    :mod:`engine.gluon.hybrid`). Parameters with unknown (0) dims are completed at the
    first call by ``infer_shape(x, *args)``, which layers override.
    """

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        super().__init__(prefix, params)
        self._active = False
        self._cached_graph: Any = None
        self._static_alloc = False

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Trace the forward into a static program at the next call (``active=False`` undoes
        it). ``static_alloc=True`` reuses the program's buffers from call to call;
        ``static_shape`` and MXNet's other flags are accepted."""
        self._active = active
        self._static_alloc = bool(kwargs.get("static_alloc", False))
        self._cached_graph = None
        super().hybridize(active, **kwargs)

    def cast(self, dtype: Any) -> None:
        self._cached_graph = None  # programs hold buffers of the old dtype
        super().cast(dtype)

    def register_child(self, block: Block, name: str | None = None) -> None:
        """As MXNet: a HybridBlock's children are HybridBlocks, and a new child makes the
        compiled program stale (it is traced again at the next call)."""
        if not isinstance(block, HybridBlock):
            raise ValueError(f"Children of HybridBlock must also be HybridBlock, but {block} has "
                             f"type {type(block)}. If you are using Sequential, please try "
                             "HybridSequential instead.")
        super().register_child(block, name)
        self._cached_graph = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else None
        symbolic = False
        if len(args) != 1 or kwargs or not isinstance(first, NDArray):  # else: one array
            symbolic = _check_inputs(args, kwargs, self._active)
        if self._active and current_tracer() is None and not symbolic:
            # hybridized: hooks run around the cached program, as around MXNet's CachedOp
            if self._forward_pre_hooks:
                for hook in list(self._forward_pre_hooks.values()):
                    hook(self, args)
            if self._cached_graph is None:
                self._cached_graph = CachedGraph(self, self._static_alloc)
            out = self._cached_graph(self.forward, args, kwargs)
            if self._forward_hooks:
                for hook in list(self._forward_hooks.values()):
                    hook(self, args, out)
            return out
        if not self._forward_pre_hooks and not self._forward_hooks:
            return self.forward(*args, **kwargs)  # Block.__call__ without hooks to run
        return super().__call__(*args, **kwargs)

    def infer_shape(self, *args: Any) -> None:
        """Fill in this Block's unknown parameter dims from the inputs.

        Layers override it; the default runs ``hybrid_forward`` once with an ``F`` whose
        FullyConnected/Convolution/BatchNorm/LayerNorm/Embedding/prelu complete the shapes
        of the parameters they receive (see :mod:`engine.gluon.shape_probe`).
        """
        from ..shape_probe import probe_shapes

        probe_shapes(self, *args)

    def _deferred_infer_shape(self, *args: Any) -> None:
        self.infer_shape(*args)
        for param in self._reg_params.values():
            param._finish_deferred_init()

    def forward(self, x: Any, *args: Any) -> Any:
        if _is_symbol(x):
            from ... import symbol
            from ...name import Prefix

            params = {k: v.var() for k, v in self._reg_params.items()}
            # operators are named under the block's prefix, as MXNet's export names them
            # (``resnet_dense0_fullyconnected0``, ``resnet_activation0``)
            with Prefix(self.prefix):
                return self.hybrid_forward(symbol, x, *args, **params)
        ctx = x.context if isinstance(x, NDArray) else None
        try:
            params = {k: v.data(ctx) for k, v in self._reg_params.items()}
        except DeferredInitializationError:
            self._deferred_infer_shape(x, *args)
            params = {k: v.data(ctx) for k, v in self._reg_params.items()}
        tracer = current_tracer()
        if tracer is None:
            return self.hybrid_forward(nd, x, *args, **params)
        for key, arr in params.items():
            tracer.param_slot(self._reg_params[key], arr)
        return self.hybrid_forward(tracer.F, x, *args, **params)

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N803
        raise NotImplementedError(f"{type(self).__name__} must implement hybrid_forward()")

    def export(self, path: str, epoch: int = 0, remove_amp_cast: bool = True) -> tuple[str, str]:
        """Write ``path-symbol.json`` and ``path-%04d.params`` in MXNet's formats (MXNet
        1.9's ``SymbolBlock.imports`` reads them); returns the two file names. The
        parameters must be initialized (run a forward first when shapes were deferred)."""
        from ..symbol_block import export_block

        return export_block(self, path, epoch, remove_amp_cast)


def graph_name(F: Any, name: str = "fwd") -> dict[str, str]:  # noqa: N803
    """``{"name": name}`` when building a graph (F is ``engine.symbol``), else nothing: MXNet's
    layers name their main operator ``fwd`` (``dense0_fwd``), which engine.nd ops do not take."""
    return {"name": name} if getattr(F, "__name__", "") == "engine.symbol" else {}


_symbol_type: list[type] = []  # engine.symbol.Symbol, imported on first use


def _is_symbol(value: Any) -> bool:
    if not _symbol_type:
        from ...symbol import Symbol

        _symbol_type.append(Symbol)
    return isinstance(value, _symbol_type[0])


def _collect_arrays(value: Any, arrays: list[NDArray]) -> bool:
    """Append the NDArrays in ``value`` (nested lists and tuples) to ``arrays``; True when it
    holds a Symbol. (A module function: a nested one that calls itself is a reference cycle,
    which would keep the arrays it saw alive until the garbage collector runs.)"""
    if isinstance(value, (list, tuple)):
        found = False
        for v in value:
            found = _collect_arrays(v, arrays) or found
        return found
    if isinstance(value, NDArray):
        arrays.append(value)
        return False
    return _is_symbol(value)


def _check_inputs(args: tuple[Any, ...], kwargs: dict[str, Any], hybridized: bool) -> bool:
    """MXNet's rules for a HybridBlock's inputs: at least one NDArray or Symbol, not both,
    and once hybridized the arrays on one context. Returns whether they are Symbols."""
    arrays: list[NDArray] = []
    symbols = False
    for value in (*args, *kwargs.values()):
        symbols = _collect_arrays(value, arrays) or symbols
    if not arrays and not symbols:
        raise ValueError("In HybridBlock, there must be one NDArray or one Symbol in the "
                         "input. Please check the type of the args.")
    if arrays and symbols:
        raise ValueError("In HybridBlock, we do not support mixed NDArrays and Symbols types "
                         "for the input. Please check the type of the args.")
    if hybridized and arrays:
        # cpu_pinned memory is CPU memory: MXNet lets it mix with cpu arrays
        contexts = {("cpu" if a._ctx.device_type == "cpu_pinned" else a._ctx.device_type,
                     a._ctx.device_id) for a in arrays}
        if len(contexts) > 1:
            raise ValueError("Find multiple contexts in the input, After hybridized, the "
                             "HybridBlock only supports one input context. You can print the "
                             "ele.ctx in the input arguments to inspect their contexts. Find all "
                             f"contexts = {sorted({str(a.context) for a in arrays})}")
    return symbols
