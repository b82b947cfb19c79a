"""`rudder up` heals (issue 14): kill -9 its worker or its Redis and it restarts that child
while the rest keep running; a queued job survives the Redis restart."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import redis

from core.channel import lease_key
from rudder.client import Client
from tests.e2e.conftest import example_spec
from tests.e2e.harness import ROOT
from tests.services import free_port, wait_until

pytestmark = pytest.mark.slow


class Up:
    """A `rudder up` process and what it prints."""

    def __init__(self, home: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUDDER_")}
        env["PYTHONPATH"] = str(ROOT)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rudder.cli", "up", "--home", str(home),
             "--port", str(free_port()), *extra],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.url = self.wait_line("export RUDDER_URL=", 120).split("=", 1)[1]
        self.token = (home / "token").read_text().strip()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def wait_line(self, needle: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"`rudder up` never printed {needle!r}; it printed {self.seen}")

    def child(self, name: str) -> psutil.Process:
        """The (current) child process whose command line mentions ``name``."""
        for child in psutil.Process(self.process.pid).children():
            if any(name in part for part in child.cmdline()):
                return child
        raise LookupError(name)

    def redis_url(self) -> str:
        # redis-server retitles itself "redis-server 127.0.0.1:<port>"
        title = " ".join(self.child("redis-server").cmdline())
        match = re.search(r"127\.0\.0\.1:(\d+)", title)
        assert match, title
        return f"redis://127.0.0.1:{match.group(1)}/0"

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=150)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code


def _lease_holder(redis_url: str, job_id: str) -> str | None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        holder = client.get(lease_key(job_id))
    finally:
        client.close()
    return str(holder) if holder else None


def test_rudder_up_restarts_a_killed_worker_and_a_killed_redis(tmp_path: Path) -> None:
    up = Up(tmp_path / ".rudder")
    try:
        with Client(up.url, up.token, timeout=30) as client:
            running = client.submit(example_spec(name="survivor", epochs=2000))
            redis_url = up.redis_url()
            holder = wait_until(lambda: _lease_holder(redis_url, running["id"]), 90,
                                interval=0.1, what="the worker to take the job")
            api_pid = up.child("uvicorn").pid
            # Its API answers what the HTTP parser refuses in the API's shape (25.11).
            assert "api.http_protocol:ApiHttpProtocol" in up.child("uvicorn").cmdline()
            assert up.child("workers.validation_app").is_running()  # issue 26.3
            wait_until(lambda: client.get_job(running["id"])["status"] == "running", 30,
                       what="the job to run")

            worker = up.child("workers.celery_app")
            assert f":{worker.pid}:" in holder
            worker.kill()
            killed = time.monotonic()
            up.wait_line(f"worker (pid {worker.pid}) exited with code -9", 10)
            up.wait_line(f"released the lease of job(s) {running['id']}", 10)
            new_holder = wait_until(
                lambda: (h := _lease_holder(redis_url, running["id"])) and h != holder and h,
                60, interval=0.1, what="the restarted worker to resume the job")
            print(f"embedded take-over: {time.monotonic() - killed:.1f}s after kill -9")
            assert f":{up.child('workers.celery_app').pid}:" in new_holder
            shown = client.get_job(running["id"])
            assert shown["attempts"] == 1, shown

            # Queued behind the running job (one worker), its message in Redis only.
            waiting = client.submit(example_spec(name="waiting", epochs=1))
            time.sleep(1.5)  # appendfsync everysec: on disk before the kill
            redis_server = up.child("redis-server")
            redis_server.kill()
            up.wait_line(f"redis (pid {redis_server.pid}) exited with code -9", 10)
            up.wait_line("redis restarted", 10)
            wait_until(lambda: _lease_holder(redis_url, running["id"]) == new_holder, 30,
                       what="the lease kept across the Redis restart")
            assert client.get_job(waiting["id"])["status"] == "queued"
            client.cancel(running["id"])  # the queued job runs next
            wait_until(lambda: client.get_job(waiting["id"])["status"] == "succeeded", 120,
                       interval=0.5, what="the job queued before the Redis restart to run")
            assert up.child("uvicorn").pid == api_pid  # the API kept running throughout
    finally:
        code = up.stop()
    assert code == 0
