"""The child processes of ``rudder up``: started, restarted with backoff when one dies,
stopped in order.

A dead child is started again (after 0.5 s, doubling per quick death up to 30 s; a child
that ran for 10 s starts from 0.5 s again) while the others keep running: a killed
worker's job is taken over by its replacement, a killed Redis comes back with its
append-only file (queued jobs and leases included). An ``on_exit`` hook runs first, e.g.
to release a dead worker's leases at once instead of waiting for them to expire.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

STOP_GRACE_SECONDS = 15.0
# The worker finishes its step, checkpoints and re-queues the job before it exits.
WORKER_STOP_GRACE_SECONDS = 90.0
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0
# A child that ran this long before dying got up and worked (a crash loop dies while
# starting: a bad setting, a missing dependency): its next restart waits the least, so a
# worker killed now and then (an OOM kill, an operator) is replaced as fast each time.
STABLE_SECONDS = 10.0


def _spawn(argv: list[str], env: dict[str, str],
           log_path: Path | None) -> subprocess.Popen[bytes]:
    stdout = open(log_path, "ab") if log_path else None  # noqa: SIM115 - closed below
    try:
        return subprocess.Popen(argv, env=env, stdout=stdout,
                                stderr=subprocess.STDOUT if stdout else None,
                                start_new_session=True)
    finally:
        if stdout is not None:
            stdout.close()  # the child has its own descriptor now


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path | None
    process: subprocess.Popen[bytes]
    started_at: float = field(default_factory=time.monotonic)
    quick_deaths: int = 0
    restart_at: float | None = None  # set while dead and waiting for its restart

    def respawn(self) -> None:
        self.process = _spawn(self.argv, self.env, self.log_path)
        self.started_at = time.monotonic()
        self.restart_at = None


ExitHook = Callable[[Child, int], None]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Supervisor:
    """Starts child processes, restarts the ones that die, stops them (newest first)."""

    children: list[Child] = field(default_factory=list)
    stopping: bool = False
    on_exit: dict[str, ExitHook] = field(default_factory=dict)
    # Children the others need while they stop (Redis: the worker checkpoints and
    # re-queues through it); started again at once by stop_all if they are down.
    needed_to_stop: set[str] = field(default_factory=lambda: {"redis"})

    def start(self, name: str, argv: list[str], env: dict[str, str],
              log_path: Path | None = None) -> subprocess.Popen[bytes]:
        child = Child(name, argv, env, log_path, process=_spawn(argv, env, log_path))
        self.children.append(child)
        return child.process

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.name == name)

    def tend(self) -> list[str]:
        """Notice children that died and restart those whose backoff has passed; returns
        the names restarted. Call it every fraction of a second."""
        restarted = []
        now = time.monotonic()
        for child in self.children:
            code = child.process.poll()
            if code is None or self.stopping:
                continue
            if child.restart_at is None:
                lived = now - child.started_at
                child.quick_deaths = 0 if lived >= STABLE_SECONDS else child.quick_deaths + 1
                backoff = min(MAX_BACKOFF_SECONDS,
                              FIRST_BACKOFF_SECONDS * 2 ** max(child.quick_deaths - 1, 0))
                child.restart_at = now + backoff
                _say(f"{child.name} (pid {child.process.pid}) exited with code {code}; "
                     f"restarting it in {backoff:.1f}s")
                hook = self.on_exit.get(child.name)
                if hook is not None:
                    try:
                        hook(child, code)
                    except Exception as exc:  # noqa: BLE001 - a hook must not stop healing
                        _say(f"after {child.name} exited: {exc!r}")
            if child.restart_at is not None and now >= child.restart_at:
                child.respawn()
                _say(f"{child.name} restarted (pid {child.process.pid})")
                restarted.append(child.name)
        return restarted

    def stop_all(self) -> None:
        """Stop the children one at a time, newest first (worker, API, Redis): each gets
        SIGTERM and its grace time before the next, so the worker still has the Redis it
        checkpoints and re-queues through (started again first if it is down)."""
        self.stopping = True
        for child in self.children:
            if child.name in self.needed_to_stop and child.process.poll() is not None:
                child.respawn()
                time.sleep(0.5)
        for child in reversed(self.children):
            process = child.process
            if process.poll() is not None:
                continue
            print(f"stopping {child.name} (pid {process.pid})", flush=True)
            process.send_signal(signal.SIGTERM)
            grace = (WORKER_STOP_GRACE_SECONDS if child.name.startswith("worker")
                     else STOP_GRACE_SECONDS)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                print(f"{child.name} did not stop within {grace:.0f}s; killing it", flush=True)
                process.kill()
                process.wait(timeout=5)
        self.children.clear()

    def first_exited(self) -> tuple[str, int] | None:
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                return child.name, code
        return None
