"""Migration 0006 moves every learning-rate change into the commands table, and back."""

from __future__ import annotations

import json
from pathlib import Path

from alembic import command
from sqlalchemy import text

from core.db import make_engine
from core.migrate import alembic_config, upgrade

REVISION = "0006_step_commands"


def test_learning_rate_changes_become_set_lr_commands_and_back(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'old.db'}"
    config = alembic_config(database_url)
    command.upgrade(config, "0005_models")
    engine = make_engine(database_url)  # foreign keys on, as the service runs
    try:
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO users (id, name, created_at) VALUES ('u', 'mig-u', '2026-01-01')"))
            connection.execute(text(
                "INSERT INTO jobs (id, owner_id, name, spec, status, queue, epoch, step, "
                "latest_metrics, attempts, created_at, updated_at, dispatch_pending) VALUES "
                "('j', 'u', 'n', '{}', 'running', 'cpu', 0, 0, '{}', 0, '2026-01-01', "
                "'2026-01-02', 0)"))
            for change_id, status, step, applied, reason in (
                    ("a", "applied", 41, 0.05, None), ("r", "rejected", None, None, "too big"),
                    ("p", "pending", None, None, None)):
                connection.execute(text(
                    "INSERT INTO lr_changes (id, job_id, requested_lr, mode, requested_by, "
                    "requested_at, status, applied_step, applied_lr, reason) VALUES (:id, 'j', "
                    "0.05, 'override', 'u', '2026-01-01', :status, :step, :applied, :reason)"),
                    {"id": change_id, "status": status, "step": step, "applied": applied,
                     "reason": reason})
        command.upgrade(config, REVISION)
        with engine.connect() as connection:
            rows = connection.execute(text(
                "SELECT id, kind, params, status, applied_step, result, reason, source "
                "FROM job_commands ORDER BY id")).all()
        moved = [(r[0], r[1], _json(r[2]), r[3], r[4], _json(r[5]), r[6], r[7]) for r in rows]
        assert moved == [
            ("a", "set_lr", {"learning_rate": 0.05, "mode": "override"}, "applied", 41,
             {"learning_rate": 0.05}, None, "user"),
            ("p", "set_lr", {"learning_rate": 0.05, "mode": "override"}, "pending", None,
             None, None, "user"),
            ("r", "set_lr", {"learning_rate": 0.05, "mode": "override"}, "rejected", None,
             None, "too big", "user")]
        command.downgrade(config, "0005_models")
        with engine.connect() as connection:
            back = connection.execute(text(
                "SELECT id, status, applied_step, applied_lr FROM lr_changes ORDER BY id")).all()
        assert [tuple(r) for r in back] == [("a", "applied", 41, 0.05),
                                            ("p", "pending", None, None),
                                            ("r", "rejected", None, None)]
        upgrade(database_url)
    finally:
        engine.dispose()


def _json(value: object) -> object:
    return json.loads(value) if isinstance(value, str) else value
