"""What crosses a process boundary is defined once, in core (issue 9's drift cases)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from core import events, queue, storage

ROOT = Path(__file__).resolve().parents[2]


def test_task_name_and_queues_are_cores() -> None:
    from workers import celery_app

    assert celery_app.TRAIN_TASK is queue.TRAIN_TASK
    assert celery_app.QUEUES is queue.QUEUES


def test_the_checkpoint_file_names_are_one_list() -> None:
    from api.routes import checkpoints

    assert typing.get_args(storage.CheckpointFileName) == storage.CHECKPOINT_FILES
    assert checkpoints.CheckpointFile is storage.CheckpointFileName
    assert storage.checkpoint_file_key("j", 7, "meta.json") == (
        "jobs/j/checkpoints/0000000007/meta.json"
    )


@pytest.mark.parametrize(
    "event",
    [
        events.MetricEvent(step=1, epoch=0, epochs_done=0, time=1.0, values={"lr": 0.1}),
        events.LREvent(change_id="c", learning_rate=0.1, mode="scale", applied_step=2,
                       applied_at=3.0),
        events.LREvent(change_id="c", status="rejected", learning_rate=0.1, mode="scale",
                       reason="no"),
        events.StatusEvent(status="paused", step=4, command_id="p"),
        events.CheckpointEvent(step=4, epoch=0, sha256="ab", size=1),
        events.LogEvent(level="info", message="hi"),
    ],
    ids=lambda e: f"{e.type}",
)
def test_every_event_round_trips_through_its_payload(event: events.JobEvent) -> None:
    assert events.parse_event(event.type, event.data()) == event


def test_every_event_and_command_type_is_in_its_union() -> None:
    event_types = {typing.get_args(m.model_fields["type"].annotation)[0]
                   for m in typing.get_args(typing.get_args(events.JobEvent)[0])}
    command_types = {typing.get_args(m.model_fields["type"].annotation)[0]
                     for m in typing.get_args(typing.get_args(events.Command)[0])}
    assert event_types == events.EVENT_TYPES
    assert command_types == events.COMMAND_TYPES


def test_a_malformed_command_is_refused() -> None:
    with pytest.raises(ValidationError):
        events.parse_command("set_lr", "c", {"learning_rate": "fast"})
    with pytest.raises(ValidationError):
        events.parse_command("reboot", "c", {})


def test_the_worker_imports_the_engine_normally() -> None:
    """No importlib shim typed as Any between the worker and the engine."""
    for path in sorted((ROOT / "workers").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "import_module":
                pytest.fail(f"{path.relative_to(ROOT)} imports modules by name")
