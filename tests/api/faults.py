"""Real processes for fault tests: a redis-server of the test's own, to kill under the api
(the ``private_redis`` fixture in tests/api/conftest.py)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile

import redis

from tests.services import free_port, wait_until


class RedisProcess:
    """A redis-server of this test's own, to kill (or freeze) under the api and start
    again on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.mkdtemp(prefix="rudder-redis-fault-")
        self._process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self._dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        try:
            wait_until(client.ping, 10, what="redis-server")
        finally:
            client.close()
        return process

    def restart(self) -> None:
        """Kill it and start an empty one on the same port."""
        self.kill()
        self._process = self._start()

    def subscribers(self, channel: str) -> int:
        client = redis.Redis.from_url(self.url)
        try:
            return int(dict(client.pubsub_numsub(channel))[channel.encode()])
        finally:
            client.close()

    def freeze(self) -> None:
        """SIGSTOP: the server keeps its port but answers nothing (a hung Redis)."""
        self._process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self._dir, ignore_errors=True)
