"""A real PostgreSQL outage for one test database: its connections are killed
(``pg_terminate_backend``) and new ones refused (``ALLOW_CONNECTIONS false``) until the
outage ends. The server keeps running for every other database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, make_url, text

from tests.services import PG_ADMIN_URL


class Outage:
    def __init__(self, database_url: str) -> None:
        self.name = make_url(database_url).database
        self._admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        self.active = False

    def start(self) -> None:
        with self._admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false'))
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = :name AND pid <> pg_backend_pid()"),
                         {"name": self.name})
        self.active = True

    def end(self) -> None:
        with self._admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true'))
        self.active = False

    def close(self) -> None:
        if self.active:
            self.end()
        self._admin.dispose()


@contextmanager
def outage_controller(database_url: str) -> Iterator[Outage]:
    """An :class:`Outage` the test starts and ends; always ended on exit."""
    outage = Outage(database_url)
    try:
        yield outage
    finally:
        outage.close()
