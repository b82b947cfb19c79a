"""A redis-server the test owns and can kill -9 and start again on the same port, with or
without what it had (fault tests: the broker going away and coming back empty or not)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import redis

from tests.services import free_port, wait_until


class RedisProcess:
    """``url`` stays valid across :meth:`kill` and :meth:`start`."""

    def __init__(self, *, persistent: bool = False, binary: str | None = None) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.persistent = persistent
        self.binary = binary or shutil.which("redis-server") or "redis-server"
        self.workdir = Path(tempfile.mkdtemp(prefix="rudder-redis-fault-"))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, empty: bool = False) -> RedisProcess:
        if empty:
            for path in self.workdir.iterdir():
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent \
            else ["--appendonly", "no"]
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--dir", str(self.workdir), *persistence],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        try:
            wait_until(client.ping, 10, what="redis-server")
        finally:
            client.close()
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown save, connections cut as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        """Kill it and start an empty one on the same port."""
        self.kill()
        self.start(empty=True)

    def freeze(self) -> None:
        """SIGSTOP: the server keeps its port but answers nothing (a hung Redis)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def subscribers(self, channel: str) -> int:
        client = redis.Redis.from_url(self.url)
        try:
            return int(dict(client.pubsub_numsub(channel))[channel.encode()])
        finally:
            client.close()

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.thaw()  # a frozen server cannot die of SIGKILL until it runs again
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RedisProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
