"""An uploaded MXNet symbol (+ params file), checked before anything is stored."""

from __future__ import annotations

from collections import Counter
from typing import Any

from core.inspection import Answer, InspectUpload, Refusal, UploadSummary
from engine.base import MXNetError
from engine.ndarray import mxnet_format
from engine.symbol import (
    Bounds,
    GraphTooLarge,
    SymbolFormatError,
    check_params,
    inspect_symbol,
    load_json,
)

# Every pickle since protocol 2 starts with PROTO (0x80); older ones with an opcode such as
# "(" or "c". MXNet's params files start with the list magic 0x112 (little-endian uint64).
PICKLE_PREFIXES = (b"\x80", b"(", b"c", b"]", b"}")
# Names of a symbol's arguments that are not its data input: learned parameters and the
# label of a Module-style loss head (``softmax_label``).
PARAMETER_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_moving_mean", "_moving_var",
                      "_label")


class Refused(ValueError):
    def __init__(self, field: str, message: str, too_large: bool = False) -> None:
        super().__init__(message)
        self.refusal = Refusal(field=field, message=message, too_large=too_large)


def engine_bounds(question: Any) -> Bounds:
    b = question.bounds
    return Bounds(max_node_elements=b.max_node_elements,
                  max_total_elements=b.max_total_elements, seconds=b.seconds)


def refusal_of(exc: SymbolFormatError, field: str) -> Refused:
    return Refused(field, str(exc) or type(exc).__name__, isinstance(exc, GraphTooLarge))


def inspect_upload(question: InspectUpload, params: bytes | None) -> Answer:
    try:
        symbol, info = _inspect(question)
        if params is not None:
            _check_params(params, info)
    except Refused as exc:
        return Answer(refused=exc.refusal)
    return Answer(summary=UploadSummary(
        output_shapes=[list(s) for s in info["output_shapes"]],
        ops=dict(Counter(n.op for n in symbol._nodes() if n.op is not None)),
        parameter_count=info["parameter_count"],
        computed_elements=info["computed_elements"],
    ))


def _inspect(question: InspectUpload) -> tuple[Any, dict[str, Any]]:
    try:
        symbol = load_json(question.symbol)
    except SymbolFormatError as exc:
        raise refusal_of(exc, "symbol") from None
    name = question.input_name
    inputs = symbol.list_inputs()
    if name not in inputs:
        free = [v for v in inputs if not v.endswith(PARAMETER_SUFFIXES)]
        raise Refused("input_name", f"the symbol has no input {name!r}; its free inputs look "
                      f"like {free[:5]}")
    try:
        return symbol, inspect_symbol(symbol, {name: tuple(question.input_shape)},
                                      engine_bounds(question))
    except SymbolFormatError as exc:
        raise refusal_of(exc, "symbol") from None


def _check_params(raw: bytes, info: dict[str, Any]) -> None:
    """The params file is MXNet's binary format, and its names and shapes are exactly the
    symbol's parameters (as ``SymbolBlock.imports`` loads them: nothing missing, no extra)."""
    if raw.startswith(b"PK"):
        raise Refused("params", "a zip/npz archive; expected MXNet's binary .params format "
                      "(as HybridBlock.export or mx.nd.save write it)")
    if raw.startswith(PICKLE_PREFIXES):
        raise Refused("params", "looks like a Python pickle, which is never loaded; expected "
                      "MXNet's binary .params format")
    try:
        arrays = mxnet_format.read_params(raw, max_bytes=len(raw))
    except (MXNetError, ValueError, KeyError, TypeError, IndexError, OverflowError) as exc:
        raise Refused("params", f"not a readable MXNet params file: {exc}") from None
    try:
        check_params(info, arrays)
    except SymbolFormatError as exc:
        raise Refused("params", str(exc).removeprefix("params: ")) from None
