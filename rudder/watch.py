"""``rudder watch`` and ``rudder logs``: follow a job's events to its current state.

The event stream starts at the job's first event, so old ``paused`` events come by again:
watch stops only at a state the job is in *now* (a terminal status, or a pause that the
API confirms once the stream has caught up). Exit codes: 0 succeeded, 1 failed,
3 cancelled, 4 paused (``rudder resume JOB`` continues it).

>>> board = Board(epochs=4)
>>> board.fold({"step": 40, "epoch": 0, "values": {"val_accuracy": 0.9}})
>>> board.describe_val()
'val after epoch 1/4: val_accuracy=0.9'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from rudder.client import Client, ServerEvent

TERMINAL = ("succeeded", "failed", "cancelled")
EXIT_CODES = {"succeeded": 0, "failed": 1, "cancelled": 3, "paused": 4}
# How many idle keepalives (about one a second) between checks of the job's real state:
# a safety net in case the stream was trimmed and a status event is no longer in it.
RECHECK_EVERY_KEEPALIVES = 10


@dataclass
class Board:
    """The latest values of a job, folded from its metric events (epoch is 0-based)."""

    epochs: int
    step: int = 0
    epoch: int = 0
    steps_per_epoch: int | None = None
    train: dict[str, float] = field(default_factory=dict)
    val: dict[str, float] = field(default_factory=dict)
    val_epoch: int | None = None

    def fold(self, data: dict[str, Any]) -> None:
        self.step, self.epoch = int(data.get("step", 0)), int(data.get("epoch", 0))
        values = data.get("values") or {}
        val = {k: float(v) for k, v in values.items() if k.startswith("val_")}
        self.train.update({k: float(v) for k, v in values.items() if not k.startswith("val_")})
        if val:
            # An epoch-end event: its val values belong to the epoch it names.
            self.val, self.val_epoch = val, self.epoch
            if self.steps_per_epoch is None and self.step:
                self.steps_per_epoch = max(self.step // (self.epoch + 1), 1)

    @property
    def done(self) -> float:
        """Epochs done, fractional where the epoch length is known."""
        if self.steps_per_epoch:
            return min(self.step / self.steps_per_epoch, float(self.epochs))
        return float(min(self.epoch, self.epochs))

    def describe_train(self) -> str:
        shown = " ".join(f"{k}={v:.4g}" for k, v in sorted(self.train.items()))
        return f"epoch {min(self.epoch + 1, self.epochs)}/{self.epochs} step {self.step} {shown}"

    def describe_val(self) -> str:
        if self.val_epoch is None:
            return ""
        shown = " ".join(f"{k}={v:.4g}" for k, v in sorted(self.val.items()))
        return f"val after epoch {self.val_epoch + 1}/{self.epochs}: {shown}"


def describe_event(event: ServerEvent) -> str | None:
    """One line for a non-metric event (None: nothing to show)."""
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "lr":
        if data.get("status") == "rejected":
            return f"lr change {data.get('change_id')} rejected: {data.get('reason')}"
        return (f"lr -> {data.get('learning_rate'):.6g} ({data.get('mode')}) from step "
                f"{data.get('applied_step')} [change {data.get('change_id')}]")
    if event.type == "checkpoint":
        return f"checkpoint at step {data.get('step')} ({data.get('size')} bytes)"
    if event.type == "log":
        return f"{data.get('level', 'info')}: {data.get('message', event.data)}"
    if event.type == "status":
        reason = f" ({data['reason']})" if data.get("reason") else ""
        return f"status: {data.get('status')}{reason}"
    return None


def watch_line(event: ServerEvent) -> str | None:
    """What ``watch`` prints for a non-metric event: the worker's info lines are left to
    ``rudder logs`` (a checkpoint's own event already says it), its warnings are not."""
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "keepalive" or (event.type == "log" and data.get("level") == "info"):
        return None
    return describe_event(event)


class Follower:
    """Decides, event by event, whether the job reached a state to stop at."""

    def __init__(self, client: Client, job_id: str) -> None:
        self.client, self.job_id = client, job_id
        self.pause_seen = False
        self.idle = 0

    def verdict(self, event: ServerEvent) -> str | None:
        """The status to stop with, or None to go on."""
        if event.type == "status" and isinstance(event.data, dict):
            status = event.data.get("status")
            if status in TERMINAL:
                return str(status)
            self.pause_seen = status == "paused"
            return None
        if event.type != "keepalive":
            return None
        self.idle += 1
        # Caught up: a pause seen in the replay is real only if the job is paused now.
        if self.pause_seen or self.idle % RECHECK_EVERY_KEEPALIVES == 0:
            self.pause_seen = False
            status = self.client.get_job(self.job_id).get("status")
            if status in TERMINAL or status == "paused":
                return str(status)
        return None


def watch(client: Client, job: dict[str, Any], console: Console) -> int:
    job_id = str(job["id"])
    board = Board(epochs=int((job.get("spec") or {}).get("epochs") or 1))
    if job.get("status") in TERMINAL:
        return _finished(job, board, console)
    follower = Follower(client, job_id)
    if not console.is_terminal:
        return _watch_plain(client, job_id, board, follower, console)
    progress = Progress(TextColumn("{task.fields[head]}"), BarColumn(bar_width=24),
                        TaskProgressColumn(), TextColumn("{task.fields[tail]}",
                                                         markup=False),
                        console=console, transient=False, expand=False)
    final, line = None, None
    with progress:
        task = progress.add_task("train", total=board.epochs, head=job_id[:8], tail="")
        for event in client.events(job_id, keepalives=True):
            if event.type == "metric" and isinstance(event.data, dict):
                board.fold(event.data)
                if event.data.get("values", {}).keys() & board.val.keys():
                    progress.console.print(board.describe_val(), markup=False)
                progress.update(task, completed=board.done,
                                tail=_fit(board.describe_train(), console.width - 45))
                continue
            line = watch_line(event)
            final = follower.verdict(event)
            if final is not None:
                break
            if line:
                progress.console.print(line, markup=False, overflow="ellipsis")
    # The final status after the live display has ended: the last line, below the bar.
    if final is None:
        return 0
    if line:
        console.print(line, markup=False, overflow="ellipsis")
    return _stop(final, job_id, console)


def _watch_plain(client: Client, job_id: str, board: Board, follower: Follower,
                 console: Console) -> int:
    """Not a terminal (a pipe, a file, CI): one line per epoch end and per event."""
    for event in client.events(job_id, keepalives=True):
        if event.type == "metric" and isinstance(event.data, dict):
            board.fold(event.data)
            if any(k.startswith("val_") for k in event.data.get("values", {})):
                print(f"{board.describe_train()}\n{board.describe_val()}", flush=True)
            continue
        line = watch_line(event)
        if line:
            print(line, flush=True)
        final = follower.verdict(event)
        if final is not None:
            return _stop(final, job_id, console)
    return 0


def _stop(status: str, job_id: str, console: Console) -> int:
    if status == "paused":
        console.print(f"{job_id[:8]} is paused: `rudder resume {job_id[:8]}` continues it",
                      markup=False)
    return EXIT_CODES.get(status, 1)


def _finished(job: dict[str, Any], board: Board, console: Console) -> int:
    progress = job.get("progress") or {}
    metrics = progress.get("metrics") or {}
    shown = " ".join(f"{k}={float(v):.4g}" for k, v in sorted(metrics.items()))
    reason = f" ({job['status_reason']})" if job.get("status_reason") else ""
    console.print(f"status: {job['status']}{reason}", markup=False)
    # Wrapped at word boundaries to the terminal's width.
    console.print(f"{progress.get('epoch', 0)}/{board.epochs} epochs, step "
                  f"{progress.get('step', 0)}{': ' + shown if shown else ''}", markup=False)
    return EXIT_CODES.get(str(job["status"]), 1)


def _fit(text: str, width: int) -> str:
    width = max(width, 10)
    return text if len(text) <= width else text[: width - 1] + "…"


def event_time(event: ServerEvent) -> str:
    """When the event happened, in local time: its stream id is ``<ms since epoch>-<n>``
    (the time the api or worker published it, not when this client read it)."""
    try:
        millis = int(str(event.id).split("-", 1)[0])
    except ValueError:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis / 1000))


def logs(client: Client, job_id: str, follow: bool) -> int:
    """Print a job's log (the worker's lines too), status and lr events, each
    with its time; without ``follow`` stop once caught up."""
    for event in client.events(job_id, keepalives=True):
        if event.type == "keepalive":
            if not follow:
                return 0
            continue
        if event.type in ("log", "status", "lr"):
            line = describe_event(event)
            if line:
                print(f"{event_time(event)} {line}", flush=True)
    return 0
