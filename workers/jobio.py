"""What a running job says to the outside world, as one small interface.

The hooks and the runner talk to :class:`JobIO`; :mod:`workers.service_io` implements it
with core's channel (Redis) and repositories (DB). Keeping the boundary this narrow lets
the training-loop logic be tested without caring how events are carried.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class ControlCommand:
    """One command from the job's control stream (or a pending DB row at start-up)."""

    id: str
    type: str  # "set_lr" | "pause" | "cancel"
    learning_rate: float | None = None
    mode: str | None = None  # "scale" | "override" for set_lr


@dataclass(frozen=True)
class AppliedLR:
    change_id: str
    learning_rate: float  # the lr in effect for the next step
    requested_lr: float
    mode: str
    applied_step: int
    applied_at: datetime


class JobIO(Protocol):
    """Everything a training job writes outside its own process."""

    #: Set when the loop must look up at its next step boundary: a command arrived or the
    #: lease was lost. The loop clears it, then polls commands and checks ownership.
    wake: threading.Event

    def still_owner(self) -> bool:
        """False once the lease is lost: nothing may be written any more."""
        ...

    def publish(self, event_type: str, data: dict[str, Any]) -> None: ...

    def record_metrics(self, step: int, epoch: int, values: dict[str, float]) -> None: ...

    def record_progress(
        self, step: int, epoch: int, learning_rate: float, metrics: dict[str, float]
    ) -> None: ...

    def lr_applied(self, change: AppliedLR) -> None: ...

    def lr_rejected(self, change_id: str, reason: str) -> None: ...

    def checkpoint_saved(self, step: int, epoch: int, key_prefix: str, files: dict[str, Any],
                         size: int, sha256: str, pruned: list[int]) -> bool:
        """Record the complete checkpoint at ``step`` and forget the ``pruned`` ones, in
        one transaction; False when fenced off (nothing written)."""
        ...

    def poll_commands(self) -> list[ControlCommand]:
        """Commands that arrived since the last call; never blocks."""
        ...

    def flush(self) -> None:
        """Write out anything batched (metric points) before a checkpoint or the end."""
        ...
