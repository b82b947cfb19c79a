"""Follow a job's SSE stream in a background thread so a test can wait on what arrives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rudder.client import Client, ServerEvent


class EventTap:
    def __init__(self, url: str, token: str, job_id: str) -> None:
        self.events: list[ServerEvent] = []
        self.received_at: list[float] = []
        self.error: BaseException | None = None
        self._client = Client(url, token)
        self._job_id = job_id
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._client.events(self._job_id):
                with self._lock:
                    self.events.append(event)
                    self.received_at.append(time.time())
        except BaseException as exc:  # noqa: BLE001 - reported by wait_for
            self.error = exc

    def snapshot(self) -> list[ServerEvent]:
        with self._lock:
            return list(self.events)

    def wait_for(self, predicate: Callable[[ServerEvent], bool], timeout: float = 60,
                 what: str = "event") -> ServerEvent:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            events = self.snapshot()
            for event in events[seen:]:
                if predicate(event):
                    return event
            seen = len(events)
            if self.error is not None or not self._thread.is_alive():
                break
            time.sleep(0.02)
        tail = [(e.type, e.data) for e in self.snapshot()[-8:]]
        raise AssertionError(f"no {what} within {timeout}s (error={self.error!r}); last: {tail}")

    def close(self) -> None:
        self._client.close()


def is_status(status: str) -> Callable[[ServerEvent], bool]:
    return lambda e: e.type == "status" and e.data.get("status") == status


def metric_at_least(step: int) -> Callable[[ServerEvent], bool]:
    return lambda e: e.type == "metric" and e.data["step"] >= step
