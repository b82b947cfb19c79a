"""What a running job says to the outside world, as one small interface.

The hooks and the runner talk to :class:`JobIO`; :mod:`workers.service_io` implements it
with core's channel (Redis) and repositories (DB). Keeping the boundary this narrow lets
the training-loop logic be tested without caring how events are carried.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from core.commands import Command, CommandOutcome
from core.events import JobEvent


class JobIO(Protocol):
    """Everything a training job writes outside its own process."""

    #: Set when the loop must look up at its next step boundary: a command arrived or the
    #: lease was lost. The loop clears it, then polls commands and checks ownership.
    wake: threading.Event

    def still_owner(self) -> bool:
        """False once the lease is lost: nothing may be written any more."""
        ...

    def publish(self, event: JobEvent) -> None: ...

    def record_metrics(self, step: int, epoch: int, values: dict[str, float]) -> None: ...

    def record_progress(
        self, step: int, epoch: int, learning_rate: float, metrics: dict[str, float]
    ) -> None: ...

    def command_done(self, outcome: CommandOutcome) -> None:
        """Record and announce a command applied at its step, or refused with the reason
        (a rule's command is recorded from it)."""
        ...

    def checkpoint_saved(self, step: int, epoch: int, key_prefix: str, files: dict[str, Any],
                         size: int, sha256: str, pruned: list[int]) -> bool:
        """Record the complete checkpoint at ``step`` and forget the ``pruned`` ones, in
        one transaction; False when fenced off (nothing written)."""
        ...

    def poll_commands(self) -> list[Command]:
        """Commands that arrived since the last call; never blocks."""
        ...

    def flush(self) -> None:
        """Write out anything batched (metric points) before a checkpoint or the end."""
        ...
