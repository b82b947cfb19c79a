"""staged upload parts (``etag`` becomes ``stored_as``); datasets record when their
validation started (issue 25 item 4, issue 26 item 3)

Parts of uploads still open were written in place under the old scheme and cannot be
assembled by the new one: their rows are dropped, so the client's next run of the same
upload command sends them again (uploads are resumable by design).

Revision ID: 0007_upload_integrity
Revises: 0006_step_commands
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_upload_integrity"
down_revision: str | None = "0006_step_commands"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "DELETE FROM dataset_upload_parts WHERE upload_id IN "
        "(SELECT id FROM dataset_uploads WHERE status <> 'completed')"
    )
    with op.batch_alter_table("dataset_upload_parts") as batch:
        batch.alter_column("etag", new_column_name="stored_as",
                           existing_type=sa.String(length=128), existing_nullable=False)
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(
            sa.Column("validation_started_at", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("validation_started_at")
    with op.batch_alter_table("dataset_upload_parts") as batch:
        batch.alter_column("stored_as", new_column_name="etag",
                           existing_type=sa.String(length=128), existing_nullable=False)
