"""Check an uploaded MXNet symbol (+ params) with the engine, before anything is stored.

This module is the api's one other engine import besides learning_rate.py (see
tests/test_import_rules.py), for the reason the issue gives: a bad upload is refused with
a 4xx naming the problem *before anything is stored*. Doing it in a worker would store
first and report ``invalid`` later. What runs here is the engine's parser and shape
inference over a JSON graph (no operator is executed, no code is loaded) and its bounded
reader of MXNet's binary params format (it never unpickles); both treat the bytes as
untrusted. A symbol is small (``limits.max_symbol_bytes``); a params file is read once,
within ``limits.max_upload_bytes``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_INPUT_DIMS = 6
MAX_INPUT_DIM = 1_000_000
# Every pickle since protocol 2 starts with PROTO (0x80); older ones with an opcode such as
# "(" or "c". MXNet's params files start with the list magic 0x112 (little-endian uint64).
PICKLE_PREFIXES = (b"\x80", b"(", b"c", b"]", b"}")
# Arguments of a symbol that are data, not learned parameters: the declared input and the
# label of a Module-style loss head (``softmax_label``).
LABEL_SUFFIX = "_label"
PARAMETER_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_moving_mean", "_moving_var",
                      LABEL_SUFFIX)


class ModelUploadError(ValueError):
    """The upload is refused: ``field`` names the form field, ``message`` the problem."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ModelSummary:
    input_name: str
    input_shape: list[int]
    output_shapes: list[list[int]]
    ops: dict[str, int]
    parameter_count: int
    parameter_shapes: dict[str, list[int]]


def parse_input_shape(text: str) -> list[int]:
    """``"1,3,32,32"`` (or ``"(1, 3, 32, 32)"``) -> ``[1, 3, 32, 32]``."""
    stripped = text.strip().strip("()[]")
    try:
        shape = [int(part) for part in stripped.split(",") if part.strip()]
    except ValueError:
        raise ModelUploadError("input_shape", f"{text[:64]!r} is not a list of integers "
                               "such as 1,3,32,32") from None
    if not 1 <= len(shape) <= MAX_INPUT_DIMS:
        raise ModelUploadError("input_shape", f"needs 1 to {MAX_INPUT_DIMS} dimensions "
                               "(batch first), e.g. 1,3,32,32")
    if any(not 1 <= d <= MAX_INPUT_DIM for d in shape):
        raise ModelUploadError("input_shape", f"every dimension must be 1..{MAX_INPUT_DIM}")
    return shape


def _shape_map(value: Any) -> dict[str, list[int]]:
    pairs = value.items() if isinstance(value, Mapping) else value
    return {str(name): [int(d) for d in shape] for name, shape in pairs}


def inspect_symbol(raw: bytes, input_name: str, input_shape: list[int]) -> ModelSummary:
    """Parse the symbol, check every op is known and shapes infer for the input."""
    try:
        text = raw.decode("utf-8")
        graph = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelUploadError("symbol", f"not valid JSON: {exc}") from None
    except RecursionError:
        raise ModelUploadError("symbol", "not valid JSON: nested too deeply") from None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise ModelUploadError("symbol", "not an MXNet symbol: expected a JSON object with "
                               "'nodes', 'arg_nodes' and 'heads' (mx.sym.save's format)")
    nodes = [n for n in graph["nodes"] if isinstance(n, dict)]
    variables = [str(n.get("name")) for n in nodes if n.get("op") == "null"]
    if input_name not in variables:
        inputs = [v for v in variables if not v.endswith(PARAMETER_SUFFIXES)]
        raise ModelUploadError("input_name", f"the symbol has no input {input_name!r}; "
                               f"its free inputs look like {inputs[:5]}")
    # Imported on first use, as learning_rate.py does: the api process loads the engine
    # only once someone uploads a model.
    from engine.base import MXNetError
    from engine.symbol import inspect_symbol_json

    try:
        info = inspect_symbol_json(text, {input_name: tuple(input_shape)})
    except (MXNetError, ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
        raise ModelUploadError("symbol", str(exc) or type(exc).__name__) from None
    arg_shapes = _shape_map(info["arg_shapes"])
    parameters = {name: shape for name, shape in arg_shapes.items()
                  if name != input_name and not name.endswith(LABEL_SUFFIX)}
    parameters.update(_shape_map(info["aux_shapes"]))
    return ModelSummary(
        input_name=input_name,
        input_shape=input_shape,
        output_shapes=[[int(d) for d in shape] for shape in info["output_shapes"]],
        ops=dict(Counter(str(n.get("op")) for n in nodes if n.get("op") != "null")),
        parameter_count=int(info["parameter_count"]),
        parameter_shapes=parameters,
    )


def check_params(raw: bytes, summary: ModelSummary, *, max_bytes: int) -> None:
    """The params file is MXNet's binary format, and its names and shapes are exactly the
    symbol's parameters (as ``SymbolBlock.imports`` loads them: nothing missing, no extra)."""
    if raw.startswith(b"PK"):
        raise ModelUploadError("params", "a zip/npz archive; expected MXNet's binary .params "
                               "format (as HybridBlock.export or mx.nd.save write it)")
    if raw.startswith(PICKLE_PREFIXES):
        raise ModelUploadError("params", "looks like a Python pickle, which is never loaded; "
                               "expected MXNet's binary .params format")
    from engine.base import MXNetError
    from engine.ndarray import mxnet_format

    try:
        arrays = mxnet_format.read_params(raw, max_bytes=max_bytes)
    except (MXNetError, ValueError, KeyError, TypeError, IndexError, OverflowError,
            MemoryError) as exc:
        raise ModelUploadError("params", f"not a readable MXNet params file: {exc}") from None
    found = {(name.split(":", 1)[1] if ":" in name else name): list(array.shape)
             for name, array in arrays.items()}
    expected = summary.parameter_shapes
    _report_difference("missing from the params file", sorted(set(expected) - set(found)))
    _report_difference("in the params file but not in the symbol",
                       sorted(set(found) - set(expected)))
    wrong = [f"{n} is {tuple(found[n])}, the symbol needs {tuple(expected[n])}"
             for n in sorted(expected) if found[n] != expected[n]]
    _report_difference("shape mismatch", wrong)


def _report_difference(what: str, names: Sequence[str]) -> None:
    if names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise ModelUploadError("params", f"{what}: {shown}")
