"""What the api asks its inspector process, and the answers (issue 25).

The api never imports the engine; questions that need it go to a long-lived child process
(``python -m workers.inspector``) that has the engine loaded and runs under memory and CPU
limits. One question per line of JSON on its stdin, one answer per line on its stdout; an
uploaded params file follows its question as ``params_size`` raw bytes. This module is the
protocol's only codec, used by both ends.

- :class:`InspectUpload`: an uploaded MXNet symbol (+ params), checked before it is stored.
- :class:`CheckModel`: does a job's model (any form) build for its training data's shape?
  The same shape inference the worker's network goes through, without data.
- :class:`PreviewSchedule`: the learning-rate schedule after a live change, by the
  engine's own formulas.
- :class:`ExportCheckpoint`: a checkpoint's ``params.npz`` (sent after the question) as
  MXNet's ``-symbol.json`` + ``-0000.params``; the params file follows the answer as
  ``params_size`` raw bytes.
"""

from __future__ import annotations

from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from core.jobspec import ModelSpec

# An answer is a few KiB; a question at most a symbol (limits.max_symbol_bytes, escaped).
MAX_LINE_BYTES = 64 * 1024 * 1024


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bounds(_Message):
    """What one inspection may cost: elements of any one node's output or parameter, the
    elements all nodes compute in one forward pass together, and wall-clock seconds."""

    max_node_elements: int
    max_total_elements: int
    seconds: float


class InspectUpload(_Message):
    kind: Literal["inspect_upload"] = "inspect_upload"
    symbol: str
    input_name: str
    input_shape: list[int]
    params_size: int | None = None
    bounds: Bounds


class UploadedGraph(_Message):
    """A stored upload's symbol, for :class:`CheckModel` (the api reads it from storage);
    ``input_shape`` is the one it was uploaded (and its params checked) for, and
    ``params`` whether the job starts from those params (their shapes must then fit)."""

    symbol: str
    input_name: str
    input_shape: list[int]
    params: bool


class CheckModel(_Message):
    kind: Literal["check_model"] = "check_model"
    model: ModelSpec
    uploaded: UploadedGraph | None = None
    input_shape: list[int]  # one batch, batch first
    bounds: Bounds


class PreviewSchedule(_Message):
    kind: Literal["preview_schedule"] = "preview_schedule"
    scheduler: str | None  # the spec's lr_scheduler type; None: no schedule (a constant)
    params: dict[str, Any] = Field(default_factory=dict)
    step: int
    learning_rate: float
    mode: str


class ExportCheckpoint(_Message):
    """The network of ``model`` with a checkpoint's parameters (``params_size`` bytes of
    ``params.npz`` follow), in MXNet's format; ``uploaded`` for an uploaded model."""

    kind: Literal["export_checkpoint"] = "export_checkpoint"
    model: ModelSpec
    uploaded: UploadedGraph | None = None
    params_size: int


Question = Annotated[InspectUpload | CheckModel | PreviewSchedule | ExportCheckpoint,
                     Field(discriminator="kind")]
QUESTION = TypeAdapter(Question)


class Refusal(_Message):
    """The input cannot be accepted: ``field`` names what is at fault; ``too_large`` when a
    bound was passed (an upload answers 413 then, else 422)."""

    field: str
    message: str
    too_large: bool = False


class UploadSummary(_Message):
    output_shapes: list[list[int]]
    ops: dict[str, int]
    parameter_count: int
    computed_elements: int


class ModelFit(_Message):
    output_shapes: list[list[int]]
    parameter_count: int
    computed_elements: int  # every node's outputs for one batch: what backward keeps


class SchedulePreview(_Message):
    preview: dict[str, Any] | None = None
    warning: str | None = None


class ExportedNetwork(_Message):
    """MXNet's ``-symbol.json`` text; the ``-0000.params`` file follows the answer."""

    symbol: str
    params_size: int


class Answer(_Message):
    summary: UploadSummary | None = None
    exported: ExportedNetwork | None = None
    fit: ModelFit | None = None
    schedule: SchedulePreview | None = None
    refused: Refusal | None = None


def write_message(stream: IO[bytes], message: BaseModel, blob: bytes | None = None) -> None:
    stream.write(message.model_dump_json().encode() + b"\n")
    if blob:
        stream.write(blob)
    stream.flush()


def read_question(stream: IO[bytes]) -> tuple[Question, bytes | None] | None:
    """The next question and its params bytes; None at the end of the stream."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    question = QUESTION.validate_json(line)
    blob = None
    if isinstance(question, InspectUpload | ExportCheckpoint) and question.params_size:
        blob = stream.read(question.params_size)
        if len(blob) != question.params_size:
            return None
    return question, blob


def parse_answer(line: bytes) -> Answer:
    return Answer.model_validate_json(line)
