"""The parts of MXNet's ``Symbol`` Python protocol that are not graph building: the
NDArray-only operations a symbol refuses (``bool(sym)``, ``sym += 1``, ``sym.asnumpy()``),
``debug_str``, and MXNet's private composition helpers.

>>> import engine as mx
>>> try:
...     bool(mx.sym.var('x'))
... except mx.base.NotImplementedForSymbol as err:
...     print(str(err)[:42])
Function __bool__ (namely operator "bool")
"""

from __future__ import annotations

from typing import Any

from ..base import MXNetError, NotImplementedForSymbol


def _refuse(name: str, alias: str | None) -> Any:
    def method(self: Any, *args: Any) -> Any:
        raise NotImplementedForSymbol(name, alias, *args)

    method.__name__ = name
    method.__doc__ = "NDArray only: raises ``NotImplementedForSymbol``, as in MXNet."
    return method


class SymbolProtocol:
    """Mixed into :class:`~engine.symbol.Symbol`."""

    __bool__ = _refuse("__bool__", "bool")
    __iadd__ = _refuse("__iadd__", "+=")
    __isub__ = _refuse("__isub__", "-=")
    __imul__ = _refuse("__imul__", "*=")
    __idiv__ = _refuse("__idiv__", "/=")
    __itruediv__ = _refuse("__itruediv__", "/=")
    wait_to_read = _refuse("wait_to_read", None)
    asnumpy = _refuse("asnumpy", None)
    asscalar = _refuse("asscalar", None)
    copy = _refuse("copy", None)
    as_in_context = _refuse("as_in_context", None)
    detach = _refuse("detach", None)
    backward = _refuse("backward", None)

    def debug_str(self) -> str:
        """A text listing of the graph: its outputs, variables and each operator with its
        inputs and attributes (MXNet's layout)."""
        lines = ["Symbol Outputs:"]
        lines += [f"\toutput[{k}]={node.name}({index})"
                  for k, (node, index) in enumerate(self._outputs)]  # type: ignore[attr-defined]
        for node in self._nodes():  # type: ignore[attr-defined]
            if node.op is None:
                lines.append(f"Variable:{node.name}")
                continue
            lines += ["--------------------", f"Op:{node.op}, Name={node.name}", "Inputs:"]
            for k, (child, index) in enumerate(node.inputs):
                version = " version=0" if child.op is None else ""
                lines.append(f"\targ[{k}]={child.name}({index}){version}")
            params = {k: v for k, v in node.attrs.items() if not k.startswith("__")}
            if params:
                lines.append("Attrs:")
                lines += [f"\t{k}={v}" for k, v in params.items()]
        return "\n".join(lines) + "\n"

    def _gen_atomic_symbol(self) -> Any:
        """The head operator alone, with its attributes and no inputs (MXNet's helper)."""
        from .symbol import Symbol, _Node

        node = self._outputs[0][0]  # type: ignore[attr-defined]
        if node.op is None:
            raise MXNetError("_gen_atomic_symbol: a variable has no operator")
        atomic = _Node(node.op, "", node.attrs)
        return Symbol([(atomic, i) for i in range(node.visible_outputs())])

    def _compose(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        """Replace this symbol's variables by the given symbols, in place (MXNet's
        ``_compose``; ``sym(*args, **kwargs)`` is the copying form)."""
        if args and kwargs:
            raise TypeError("compose only accept input Symbols either as positional or "
                            "keyword arguments, not both")
        composed = self(*args, **kwargs)  # type: ignore[operator]
        self._outputs = composed._outputs  # type: ignore[attr-defined]
        self._order = None
        self._deferred, self._resolved, self._resolved_key = None, {}, None
        if name is not None and len(self._outputs) == 1:
            self._outputs[0][0].name = name

    def _infer_shape_impl(self, partial: bool, *args: Any, **kwargs: Any) -> Any:
        method = self.infer_shape_partial if partial else self.infer_shape  # type: ignore
        return method(*args, **kwargs)

    def _infer_type_impl(self, partial: bool, *args: Any, **kwargs: Any) -> Any:
        method = self.infer_type_partial if partial else self.infer_type  # type: ignore
        return method(*args, **kwargs)

    def get_backend_symbol(self, backend: str) -> Any:
        """MXNet's subgraph backends (MKLDNN, TensorRT, ...) are not part of the engine."""
        raise MXNetError(f"subgraph backend {backend!r} is not registered")

    def optimize_for(self, backend: str, *args: Any, **kwargs: Any) -> Any:
        """MXNet's subgraph backends (MKLDNN, TensorRT, ...) are not part of the engine."""
        raise MXNetError(f"subgraph backend {backend!r} is not registered")
