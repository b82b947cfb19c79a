"""step-boundary commands, lineage and abandoned branches (issue 24)

One table of commands (``job_commands``) for every way a running job is steered; the
learning-rate changes of ``lr_changes`` move into it as ``set_lr`` commands (params
``{learning_rate, mode}``, result ``{learning_rate}``) and the old table goes. Jobs gain
their lineage (``parent_id``, ``fork_step``), a rollback count (``branch``) and the
parameter names the worker publishes (``parameters``); a rollback moves the metric points
it abandons to ``abandoned_metric_points``.

Revision ID: 0006_step_commands
Revises: 0005_models
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_step_commands"
down_revision: str | None = "0005_models"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LR_COLUMNS = ("id", "job_id", "requested_lr", "mode", "requested_by", "requested_at",
               "status", "applied_step", "applied_at", "applied_lr", "reason")


def _lr_changes() -> sa.TableClause:
    return sa.table(
        "lr_changes", sa.column("id", sa.String), sa.column("job_id", sa.String),
        sa.column("requested_lr", sa.Float), sa.column("mode", sa.String),
        sa.column("requested_by", sa.String), sa.column("requested_at", sa.DateTime),
        sa.column("status", sa.String), sa.column("applied_step", sa.BigInteger),
        sa.column("applied_at", sa.DateTime), sa.column("applied_lr", sa.Float),
        sa.column("reason", sa.Text),
    )


def _job_commands() -> sa.TableClause:
    return sa.table(
        "job_commands", sa.column("id", sa.String), sa.column("job_id", sa.String),
        sa.column("kind", sa.String), sa.column("params", sa.JSON),
        sa.column("source", sa.String), sa.column("requested_by", sa.String),
        sa.column("requested_at", sa.DateTime), sa.column("status", sa.String),
        sa.column("applied_step", sa.BigInteger), sa.column("applied_at", sa.DateTime),
        sa.column("result", sa.JSON), sa.column("reason", sa.Text),
        sa.column("checkpoint_before", sa.Boolean), sa.column("abandoned", sa.Boolean),
    )


def upgrade() -> None:
    op.create_table(
        "job_commands",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("rule", sa.String(length=128), nullable=True),
        sa.Column("requested_by", sa.String(length=36), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checkpoint_before", sa.Boolean(), nullable=False,
                  server_default=sa.false()),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("applied_step", sa.BigInteger(), nullable=True),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("abandoned", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.CheckConstraint("status IN ('pending', 'applied', 'rejected')",
                           name=op.f("ck_job_commands_status")),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"],
                                name=op.f("fk_job_commands_job_id_jobs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["requested_by"], ["users.id"],
                                name=op.f("fk_job_commands_requested_by_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_commands")),
    )
    op.create_index("ix_job_commands_job_requested", "job_commands",
                    ["job_id", "requested_at"], unique=False)
    op.create_index("ix_job_commands_job_status", "job_commands", ["job_id", "status"],
                    unique=False)

    connection = op.get_bind()
    lr_changes = _lr_changes()
    rows = connection.execute(sa.select(*(lr_changes.c[name] for name in _LR_COLUMNS)))
    moved = [{
        "id": row.id, "job_id": row.job_id, "kind": "set_lr",
        "params": {"learning_rate": row.requested_lr, "mode": row.mode}, "source": "user",
        "requested_by": row.requested_by, "requested_at": row.requested_at,
        "status": row.status, "applied_step": row.applied_step, "applied_at": row.applied_at,
        "result": None if row.applied_lr is None else {"learning_rate": row.applied_lr},
        "reason": row.reason, "checkpoint_before": False, "abandoned": False,
    } for row in rows]
    if moved:
        op.bulk_insert(_job_commands(), moved)
    op.drop_index("ix_lr_changes_job_requested", table_name="lr_changes")
    op.drop_table("lr_changes")

    op.create_table(
        "abandoned_metric_points",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("branch", sa.Integer(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"],
                                name=op.f("fk_abandoned_metric_points_job_id_jobs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_abandoned_metric_points")),
    )
    op.create_index("ix_abandoned_metric_points_job_branch", "abandoned_metric_points",
                    ["job_id", "branch", "step"], unique=False)

    # Plain ADD COLUMN (see 0004: no batch copy of the jobs table on SQLite). parent_id
    # is not a foreign key: a child outlives its deleted parent and keeps its id.
    op.add_column("jobs", sa.Column("parent_id", sa.String(length=36), nullable=True))
    op.add_column("jobs", sa.Column("fork_step", sa.BigInteger(), nullable=True))
    op.add_column("jobs", sa.Column("branch", sa.Integer(), nullable=False,
                                    server_default="0"))
    op.add_column("jobs", sa.Column("parameters", sa.JSON(), nullable=True))
    op.create_index(op.f("ix_jobs_parent_id"), "jobs", ["parent_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_jobs_parent_id"), table_name="jobs")
    for column in ("parameters", "branch", "fork_step", "parent_id"):
        op.drop_column("jobs", column)
    op.drop_index("ix_abandoned_metric_points_job_branch", table_name="abandoned_metric_points")
    op.drop_table("abandoned_metric_points")

    op.create_table(
        "lr_changes",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("requested_lr", sa.Float(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("requested_by", sa.String(length=36), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("applied_step", sa.BigInteger(), nullable=True),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("applied_lr", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.CheckConstraint("mode IN ('scale', 'override')", name=op.f("ck_lr_changes_mode")),
        sa.CheckConstraint("status IN ('pending', 'applied', 'rejected')",
                           name=op.f("ck_lr_changes_status")),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_lr_changes_job_id_jobs"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["requested_by"], ["users.id"],
                                name=op.f("fk_lr_changes_requested_by_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lr_changes")),
    )
    op.create_index("ix_lr_changes_job_requested", "lr_changes", ["job_id", "requested_at"],
                    unique=False)
    commands = _job_commands()
    rows = op.get_bind().execute(
        sa.select(commands).where(commands.c.kind == "set_lr",
                                  commands.c.requested_by.is_not(None)))
    back = [{
        "id": row.id, "job_id": row.job_id, "requested_lr": row.params["learning_rate"],
        "mode": row.params.get("mode", "scale"), "requested_by": row.requested_by,
        "requested_at": row.requested_at, "status": row.status,
        "applied_step": row.applied_step, "applied_at": row.applied_at,
        "applied_lr": (row.result or {}).get("learning_rate"), "reason": row.reason,
    } for row in rows]
    if back:
        op.bulk_insert(_lr_changes(), back)
    op.drop_index("ix_job_commands_job_status", table_name="job_commands")
    op.drop_index("ix_job_commands_job_requested", table_name="job_commands")
    op.drop_table("job_commands")
