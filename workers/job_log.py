"""The worker's log lines about a job, on the job's event stream (issue 26): what
``rudder logs`` and the dashboard's log panel show (resumed from step N, checkpoints, steps
per second, export), not only what the worker's own log file has.

A line is forwarded when it comes from the worker's modules, is INFO or above and names
the job (so a process that ran several jobs at once could not leak one job's lines into
another's log). Its first line only: a traceback stays in the worker's log, the failure's
reason is published on its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from core.channel import Channel

_LOGGERS = "workers"
# lifecycle publishes its own events (a failure's reason, a lost lease) beside its lines
_SKIPPED = ("workers.lifecycle",)


class JobLogForwarder(logging.Handler):
    def __init__(self, channel: Channel, job_id: str) -> None:
        super().__init__(level=logging.INFO)
        self.channel, self.job_id = channel, job_id
        self._inside = threading.local()  # publishing must not log its way back here

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(_SKIPPED) or getattr(self._inside, "active", False):
            return
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return
        if self.job_id not in message:
            return
        line = message.splitlines()[0] if message else ""
        for prefix in (f"job {self.job_id}: ", f"job {self.job_id} "):
            line = line.removeprefix(prefix)
        self._inside.active = True
        try:
            self.channel.publish_log(self.job_id, level=record.levelname.lower(), message=line)
        except Exception:  # noqa: BLE001 - a log line is never worth failing a step for
            pass
        finally:
            self._inside.active = False


@contextmanager
def forwarded_logs(channel: Channel, job_id: str) -> Iterator[None]:
    """Forward the worker's lines about ``job_id`` while the block runs."""
    handler = JobLogForwarder(channel, job_id)
    logger = logging.getLogger(_LOGGERS)
    logger.addHandler(handler)
    # The handler sees INFO only if the logger lets it through; keep what was configured
    # for the worker's own output (a handler on the root decides what it prints).
    previous = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
