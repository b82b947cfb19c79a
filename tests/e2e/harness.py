"""Real processes for end-to-end tests: uvicorn (the API) and Celery workers.

Each worker runs with ``--pool=solo`` so SIGKILL really kills the training process, as a
crashed machine would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from rudder.embedded import validator_argv
from tests.services import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stack:
    """API + workers sharing one environment (DB, Redis, object store)."""

    env: dict[str, str]
    logs: Path
    api_url: str = ""
    token: str = ""
    api: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    validators: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _log_files: list[IO[bytes]] = field(default_factory=list)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        self._log_files.append(log)
        return subprocess.Popen(argv, env=self.env, cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def start_api(self) -> None:
        port = free_port()
        self.api_url = f"http://127.0.0.1:{port}"
        self.api = self._spawn("api", [
            sys.executable, "-m", "uvicorn", "api.main:create_app", "--factory",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
            "--http", "api.http_protocol:ApiHttpProtocol",
        ])
        wait_until(lambda: httpx.get(self.api_url + "/healthz", timeout=1).status_code == 200,
                   60, interval=0.2, what="the API")

    def start_worker(self) -> subprocess.Popen[bytes]:
        name = f"w{len(self.workers)}-{uuid.uuid4().hex[:6]}"
        worker = self._spawn(f"worker-{len(self.workers)}", [
            sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
            "-Q", "cpu,gpu", "--pool=solo", "--concurrency=1", "--loglevel=INFO",
            "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
        ])
        self.workers.append(worker)
        return worker

    def start_validator(self) -> subprocess.Popen[bytes]:
        """A validator (the ``datasets`` queue), as ``rudder up`` starts one."""
        number = len(self.validators)
        validator = self._spawn(f"validator-{number}", [
            *validator_argv(sys.executable, f"v{number}-{uuid.uuid4().hex[:6]}@%h"),
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ])
        self.validators.append(validator)
        return validator

    def kill_worker(self, worker: subprocess.Popen[bytes]) -> None:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)

    def issue_token(self, name: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "rudder.cli", "token", "create", "--name", name],
            env=self.env, cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
        )
        return out.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        processes = [*self.workers, *self.validators, *([self.api] if self.api else [])]
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        for log in self._log_files:
            log.close()

    def log_tail(self, lines: int = 40) -> str:
        chunks = []
        for path in sorted(self.logs.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            chunks.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(chunks)


@contextmanager
def running_stack(env: dict[str, str], logs: Path, *, user: str) -> Iterator[Stack]:
    """An API, one worker and one validator, up and with ``user``'s token, stopped on
    exit."""
    stack = Stack(env=env, logs=logs)
    try:
        stack.start_api()
        stack.start_worker()
        stack.start_validator()
        stack.token = stack.issue_token(user)
        yield stack
    finally:
        stack.stop()


def stack_env(database_url: str, redis_url: str, storage_url: str,
              extra: dict[str, Any] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUDDER_")}
    env.update({
        "RUDDER_ENVIRONMENT": "development",
        "RUDDER_DATABASE_URL": database_url,
        "RUDDER_REDIS_URL": redis_url,
        "RUDDER_STORAGE_URL": storage_url,
        # Short lease and a fast watchdog: a killed worker's job comes back in seconds.
        "RUDDER_WORKER_LEASE_TTL_SECONDS": "2",
        "RUDDER_WORKER_WATCHDOG_INTERVAL_SECONDS": "0.5",
        "RUDDER_WORKER_LOG_EVERY_STEPS": "20",
        # These jobs train for seconds; crash tests need interval checkpoints inside that.
        "RUDDER_WORKER_CHECKPOINT_MIN_INTERVAL_SECONDS": "0.2",
        # the repository first; a machine's own additions (wheels installed with --target on
        # a GPU machine, scripts/gpu-check) stay behind it
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    })
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env
