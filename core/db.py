"""Database engines and sessions for SQLite (embedded) and PostgreSQL (production).

Repositories only ``flush()``; the edge that opened the session (an HTTP request or a
Celery task) commits with :func:`session_scope`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from core.config import get_settings

DEFAULT_SQLITE_BUSY_TIMEOUT_S = 10.0


def _sqlite_pragmas(busy_timeout_s: float) -> Any:
    def enable(dbapi_connection: Any, _record: Any) -> None:
        # WAL lets readers go on while one connection writes; foreign keys are off by
        # default in SQLite. Past the busy timeout a write fails with "database is
        # locked", which the api answers with a 503 and Retry-After.
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.close()

    return enable


def make_engine(url: str, *, echo: bool = False, lock_timeout_s: float | None = None) -> Engine:
    """Create an engine for ``url``; SQLite gets WAL + foreign keys, Postgres a pool.

    SQLite gets a pool of connections too, one per request or task in flight: in WAL mode
    readers never wait for the writer, so a write that waits for another process's lock
    holds only its own connection while reads go on. (One shared connection had made every
    read queue behind such a write for the whole busy timeout.)

    ``lock_timeout_s`` bounds how long a statement waits for a lock: SQLite's busy timeout
    (10 s when None) and PostgreSQL's ``lock_timeout`` (none when None). Past it the
    statement fails ("database is locked", SQLSTATE 55P03), which the api answers with a
    503 and Retry-After.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        busy_timeout_s = DEFAULT_SQLITE_BUSY_TIMEOUT_S if lock_timeout_s is None else lock_timeout_s
        database = parsed.database
        pool: dict[str, Any] = {}
        if database and database != ":memory:":
            directory = os.path.dirname(os.path.abspath(database))
            os.makedirs(directory, exist_ok=True)
            pool = {"pool_size": 8, "max_overflow": 8,
                    "pool_timeout": max(busy_timeout_s, 1.0)}
        engine = create_engine(
            url,
            echo=echo,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_s},
            pool_pre_ping=False,
            **pool,
        )
        event.listen(engine, "connect", _sqlite_pragmas(busy_timeout_s))
        return engine
    if parsed.drivername == "postgresql":
        # psycopg 3 is the driver we ship; plain postgresql:// would mean psycopg2.
        url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    # A few connections are enough: more only make PostgreSQL backends fight for CPU.
    # No pre-ping: it costs a round trip per checkout (a quarter of a submit's latency
    # here). After a database restart SQLAlchemy sees the first disconnect error and
    # invalidates the whole pool, so one request fails instead of every one paying.
    connect_args: dict[str, Any] = {}
    if lock_timeout_s is not None and parsed.get_backend_name() == "postgresql":
        connect_args["options"] = f"-c lock_timeout={max(1, int(lock_timeout_s * 1000))}"
    return create_engine(
        url, echo=echo, pool_pre_ping=False, pool_recycle=300, pool_size=8, max_overflow=4,
        connect_args=connect_args,
    )


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)


@lru_cache(maxsize=1)
def get_engine() -> Engine:
    """The process-wide engine for ``Settings.database_url``."""
    return make_engine(get_settings().database_url)


@lru_cache(maxsize=1)
def get_sessionmaker() -> sessionmaker[Session]:
    return make_sessionmaker(get_engine())


def reset_engine_cache() -> None:
    """Forget the cached engine (after settings changed, e.g. in tests)."""
    if get_engine.cache_info().currsize:
        get_engine().dispose()
    get_engine.cache_clear()
    get_sessionmaker.cache_clear()


@contextmanager
def session_scope(factory: sessionmaker[Session] | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on error: the task/request edge."""
    session = (factory or get_sessionmaker())()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def check_database(engine: Engine) -> None:
    """Raise if the database does not answer (``/readyz``)."""
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
