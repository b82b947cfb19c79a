"""Migration 0004_dispatch_outbox on a SQLite database that already holds jobs."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import text

from core.db import make_engine
from core.migrate import alembic_config, upgrade

REVISION = "0004_dispatch_outbox"


def test_adding_the_outbox_keeps_every_jobs_rows_and_marks_queued_jobs_sent(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(url), "0001")
    engine = make_engine(url)  # foreign keys on, as the service runs
    try:
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO users (id, name, created_at) VALUES ('u', 'u', '2026-01-01')"))
            for job_id, status in (("queued-job", "queued"), ("done-job", "succeeded")):
                connection.execute(text(
                    "INSERT INTO jobs (id, owner_id, name, spec, status, queue, epoch, step, "
                    "latest_metrics, attempts, created_at, updated_at) VALUES (:id, 'u', 'n', "
                    "'{}', :status, 'cpu', 0, 0, '{}', 0, '2026-01-01', '2026-01-02')"),
                    {"id": job_id, "status": status})
                connection.execute(text(
                    "INSERT INTO job_status_events (job_id, status, created_at) "
                    "VALUES (:id, 'queued', '2026-01-01')"), {"id": job_id})
        command.upgrade(alembic_config(url), REVISION)
        with engine.connect() as connection:
            assert connection.execute(
                text("SELECT count(*) FROM job_status_events")).scalar() == 2
            rows = connection.execute(text(
                "SELECT id, dispatch_pending, dispatched_at FROM jobs ORDER BY id")).all()
        # Not pending (the old code sent them), with a send time the lost-message check
        # can judge; a finished job was never sent by the outbox.
        assert [(r[0], bool(r[1]), r[2] is not None) for r in rows] == [
            ("done-job", False, False), ("queued-job", False, True)]
        command.downgrade(alembic_config(url), "0001")
        with engine.connect() as connection:
            assert connection.execute(
                text("SELECT count(*) FROM job_status_events")).scalar() == 2
        upgrade(url)
    finally:
        engine.dispose()
