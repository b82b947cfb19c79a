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


def _enable_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the API read while a worker writes; foreign keys are off by default in SQLite.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def make_engine(
    url: str, *, echo: bool = False, sqlite_single_connection: bool = False
) -> Engine:
    """Create an engine for ``url``; SQLite gets WAL + foreign keys, Postgres a pool.

    ``sqlite_single_connection`` makes the process use one SQLite connection, so its
    threads queue for the database in Python (woken the moment it is free) instead of
    in SQLite's busy handler, which polls with sleeps of up to 100 ms and makes the
    latency tail under concurrent writes. Only safe where no thread ever holds two
    sessions at once (the api); SQLite allows one writer at a time anyway.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            directory = os.path.dirname(os.path.abspath(database))
            os.makedirs(directory, exist_ok=True)
        pool: dict[str, Any] = (
            {"pool_size": 1, "max_overflow": 0, "pool_timeout": 60}
            if sqlite_single_connection
            else {}
        )
        engine = create_engine(
            url,
            echo=echo,
            connect_args={"check_same_thread": False, "timeout": 10},
            pool_pre_ping=False,
            **pool,
        )
        event.listen(engine, "connect", _enable_sqlite_pragmas)
        return engine
    if parsed.drivername == "postgresql":
        # psycopg 3 is the driver we ship; plain postgresql:// would mean psycopg2.
        url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    # A few connections are enough: more only make PostgreSQL backends fight for CPU.
    # No pre-ping: it costs a round trip per checkout (a quarter of a submit's latency
    # here). After a database restart SQLAlchemy sees the first disconnect error and
    # invalidates the whole pool, so one request fails instead of every one paying.
    return create_engine(
        url, echo=echo, pool_pre_ping=False, pool_recycle=300, pool_size=8, max_overflow=4
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
