"""dispatch outbox on the job row

A job that must be sent to the broker says so on its own row (``dispatch_pending``), set
in the same statement that queues it; the dispatcher sends the task and clears the flag.
``dispatched_at`` is when the broker last took the job's message, which lets the
dispatcher tell a message the broker lost from one still in flight.

Revision ID: 0004_dispatch_outbox
Revises: 0003_token_expiry
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_dispatch_outbox"
down_revision: str | None = "0003_token_expiry"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN (SQLite has it natively), never a batch table copy: with SQLite's
    # foreign keys on, dropping the old jobs table would cascade to every job's rows.
    op.add_column("jobs", sa.Column("dispatch_pending", sa.Boolean(), nullable=False,
                                    server_default=sa.false()))
    op.add_column("jobs", sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
    # Queued jobs from before this revision were sent by the old code path, or lost with a
    # broker that is gone: either way the dispatcher's lost-message check covers them once
    # it sees a send time.
    op.execute(sa.text("UPDATE jobs SET dispatched_at = updated_at WHERE status = 'queued'"))
    op.create_index("ix_jobs_status_dispatch", "jobs", ["status", "dispatch_pending"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_jobs_status_dispatch", table_name="jobs")
    # SQLite >= 3.35 drops a column in place (no table copy, see upgrade).
    op.drop_column("jobs", "dispatched_at")
    op.drop_column("jobs", "dispatch_pending")
