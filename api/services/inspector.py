"""The api's inspector processes: ask a question that needs the engine (core.inspection)
and get its answer, within limits, without the engine in this process.

Two lanes of long-lived child processes (``python -m workers.inspector``), each process
with the engine loaded once and its memory and CPU limited (rlimits): ``uploads`` checks
uploaded models and exports checkpoints, which can take seconds for a large one;
``checks`` answers submits and schedule previews, which take milliseconds, so an upload
never holds up a submit. A
request thread waits for a free process (past ``queue_seconds``: 503), sends its question
and waits for the answer (past ``wall_seconds`` the process is killed and the request
answered 413 with the reason); a process that died is replaced at the next question. The
event loop and the other request threads are never blocked. Answers to ``checks`` depend
only on the question, so they are kept (LRU): repeated submits skip the round trip.

One set of processes serves the whole api process (all apps in it with the same
inspector settings); they exit when the api does (their stdin closes).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

from api.errors import RETRY_AFTER_SECONDS, ApiError
from core.config import InspectorSettings
from core.inspection import (
    Answer,
    Bounds,
    CheckModel,
    ExportCheckpoint,
    InspectUpload,
    PreviewSchedule,
    parse_answer,
    write_message,
)

log = logging.getLogger("rudder.api")
ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 120.0  # importing the engine, on a busy machine


Message = InspectUpload | CheckModel | PreviewSchedule | ExportCheckpoint


class InspectorUnavailable(Exception):
    """No answer: every process stayed busy, or one could not start or failed."""


def unavailable_error(exc: InspectorUnavailable) -> ApiError:
    """503 with Retry-After: the request may succeed once a process is free again."""
    return ApiError(503, "unavailable", f"model inspection is unavailable: {exc}; retry",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


class InspectionFailed(Exception):
    """The question was too costly: the process was stopped at a limit (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Process:
    """One child; used by one thread at a time (its lane hands it out)."""

    def __init__(self, settings: InspectorSettings) -> None:
        self.settings = settings
        self.popen: subprocess.Popen[bytes] | None = None
        self._buffer = b""

    def _start(self) -> subprocess.Popen[bytes]:
        self.stop()  # reap one that died, and close its pipes
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        popen = subprocess.Popen(
            [sys.executable, "-m", "workers.inspector",
             "--memory-bytes", str(self.settings.memory_bytes),
             "--cpu-seconds", str(self.settings.cpu_seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env,
        )
        self.popen, self._buffer = popen, b""
        if self._read_line(time.monotonic() + START_SECONDS) != b"ready":
            self.stop()
            raise InspectorUnavailable("the inspector process did not start")
        return popen

    def ask(self, message: Message, blob: bytes | None) -> tuple[Answer, bytes | None]:
        """The answer, and the file that follows it (an export's params) if any."""
        popen = self.popen if self.popen and self.popen.poll() is None else self._start()
        assert popen.stdin is not None
        deadline = time.monotonic() + self.settings.wall_seconds
        try:
            write_message(popen.stdin, message, blob)
            line = self._read_line(deadline)
        except BrokenPipeError:
            line = None
        if line is None:
            raise InspectionFailed(self._why_stopped(deadline))
        answer = parse_answer(line)
        if answer.exported is None:
            return answer, None
        following = self._read_exact(answer.exported.params_size, deadline)
        if following is None:
            raise InspectionFailed(self._why_stopped(deadline))
        return answer, following

    def _read_exact(self, size: int, deadline: float) -> bytes | None:
        """``size`` bytes after an answer's line, or None at the child's end or past
        ``deadline``."""
        assert self.popen is not None and self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        chunks, have = [self._buffer[:size]], len(self._buffer[:size])
        self._buffer = self._buffer[size:]
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while have < size:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(fd, min(size - have, 1 << 20))
                if not chunk:
                    return None
                chunks.append(chunk)
                have += len(chunk)
        return b"".join(chunks)

    def _read_line(self, deadline: float) -> bytes | None:
        """The next line from the child, or None at its end or past ``deadline``."""
        assert self.popen is not None and self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _why_stopped(self, deadline: float) -> str:
        assert self.popen is not None
        timed_out = time.monotonic() >= deadline and self.popen.poll() is None
        self.stop()
        code = self.popen.returncode
        if timed_out:
            return f"inspecting it took longer than {self.settings.wall_seconds:g} s"
        if code == -signal.SIGXCPU:
            return f"inspecting it used more than {self.settings.cpu_seconds} s of CPU"
        if code in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT):
            return (f"inspecting it exceeded the inspector's limits ("
                    f"{self.settings.memory_bytes // 2**20} MiB of memory)")
        return f"the inspector stopped while inspecting it (exit status {code})"

    def stop(self) -> None:
        popen = self.popen
        if popen is None or popen.stdout is None or popen.stdout.closed:
            return
        if popen.poll() is None:
            popen.kill()
        popen.wait()
        for pipe in (popen.stdin, popen.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


class _Lane:
    def __init__(self, settings: InspectorSettings) -> None:
        self.settings = settings
        self.processes = [_Process(settings) for _ in range(settings.processes)]
        self.idle: queue.Queue[_Process] = queue.Queue()
        for process in self.processes:
            self.idle.put(process)

    def ask(self, message: Message, blob: bytes | None = None
            ) -> tuple[Answer, bytes | None]:
        try:
            process = self.idle.get(timeout=self.settings.queue_seconds)
        except queue.Empty:
            raise InspectorUnavailable(
                f"every inspector process stayed busy for {self.settings.queue_seconds:g} s"
            ) from None
        try:
            answer, following = process.ask(message, blob)
        finally:
            self.idle.put(process)
        if answer == Answer():
            raise InspectorUnavailable("the inspector failed on this question (see its log)")
        return answer, following

    def close(self) -> None:
        for process in self.processes:
            process.stop()


class Inspector:
    """The two lanes and the cache of answers to ``checks`` questions."""

    def __init__(self, settings: InspectorSettings) -> None:
        self.settings = settings
        self.uploads = _Lane(settings)
        self.checks = _Lane(settings)
        self._answers: OrderedDict[str, Answer] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def bounds(self) -> Bounds:
        s = self.settings
        return Bounds(max_node_elements=s.max_node_elements,
                      max_total_elements=s.max_graph_elements, seconds=s.wall_seconds)

    def inspect_upload(self, message: InspectUpload, params: bytes | None) -> Answer:
        return self.uploads.ask(message, params)[0]

    def export_checkpoint(self, message: ExportCheckpoint, params: bytes
                          ) -> tuple[Answer, bytes | None]:
        """A checkpoint as MXNet files (the slow lane: a large network takes seconds)."""
        return self.uploads.ask(message, params)

    def cached(self, key: str) -> Answer | None:
        with self._lock:
            known = self._answers.get(key)
            if known is not None:
                self._answers.move_to_end(key)
            return known

    def check(self, message: CheckModel | PreviewSchedule, *, key: str | None = None
              ) -> Answer:
        """The answer, kept under ``key`` (by default the question's own hash: give a
        shorter one that names the same question, e.g. by a symbol's sha256)."""
        key = key or hashlib.sha256(message.model_dump_json().encode()).hexdigest()
        known = self.cached(key)
        if known is not None:
            return known
        answer, _ = self.checks.ask(message)
        with self._lock:
            self._answers[key] = answer
            while len(self._answers) > self.settings.cache_entries:
                self._answers.popitem(last=False)
        return answer

    def warm(self) -> None:
        """Start the ``checks`` processes now, in the background (a first submit then does
        not wait for the engine to load)."""
        def start() -> None:
            try:
                self.check(PreviewSchedule(scheduler=None, step=0, learning_rate=1.0,
                                           mode="override"))
            except (InspectorUnavailable, InspectionFailed) as exc:
                log.warning("the inspector did not start: %s", exc)
        threading.Thread(target=start, name="inspector-warm", daemon=True).start()

    def close(self) -> None:
        self.uploads.close()
        self.checks.close()


_INSPECTORS: dict[str, Inspector] = {}
_INSPECTORS_LOCK = threading.Lock()


def inspector_for(settings: InspectorSettings) -> Inspector:
    """The process-wide inspector for these settings."""
    key = settings.model_dump_json()
    with _INSPECTORS_LOCK:
        if key not in _INSPECTORS:
            _INSPECTORS[key] = Inspector(settings)
        return _INSPECTORS[key]


@atexit.register
def _close_all() -> None:
    for inspector in _INSPECTORS.values():
        inspector.close()

