"""Check an uploaded MXNet symbol (+ params) before anything is stored (issue 12), in the
inspector process (issue 25): the api never loads the engine, nor spends its own memory or
CPU on a user's graph. The inspector parses the graph, checks every operator and
attribute against its declared domain, infers every shape with shape functions (nothing
runs on data), bounds each node's size, the graph's total work and the time taken, and
reads the params file's names and shapes with the bounded MXNet-format reader (never
unpickling). A bad upload is a 4xx naming the field; one past a bound is a 413 saying
which bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.services.inspector import InspectionFailed, Inspector
from core.inspection import InspectUpload

MAX_INPUT_DIMS = 6
MAX_INPUT_DIM = 1_000_000


class ModelUploadError(ValueError):
    """The upload is refused: ``field`` names the form field, ``message`` the problem;
    ``too_large`` when it passed a bound of inspection."""

    def __init__(self, field: str, message: str, *, too_large: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.too_large = too_large


@dataclass(frozen=True)
class ModelSummary:
    input_name: str
    input_shape: list[int]
    output_shapes: list[list[int]]
    ops: dict[str, int]
    parameter_count: int


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


def inspect_upload(inspector: Inspector, *, symbol: bytes, params: bytes | None,
                   input_name: str, input_shape: list[int]) -> ModelSummary:
    """The upload's summary, or :class:`ModelUploadError`. Raises
    :class:`~api.services.inspector.InspectorUnavailable` when no inspector answered."""
    try:
        text = symbol.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelUploadError("symbol", f"not valid JSON: not UTF-8 text ({exc})") from None
    question = InspectUpload(symbol=text, input_name=input_name, input_shape=input_shape,
                             params_size=len(params) if params else None,
                             bounds=inspector.bounds)
    try:
        answer = inspector.inspect_upload(question, params)
    except InspectionFailed as exc:
        raise ModelUploadError("symbol", exc.reason, too_large=True) from None
    if answer.refused is not None:
        refused = answer.refused
        raise ModelUploadError(refused.field, refused.message, too_large=refused.too_large)
    summary = answer.summary
    assert summary is not None
    return ModelSummary(
        input_name=input_name,
        input_shape=input_shape,
        output_shapes=summary.output_shapes,
        ops=summary.ops,
        parameter_count=summary.parameter_count,
    )
