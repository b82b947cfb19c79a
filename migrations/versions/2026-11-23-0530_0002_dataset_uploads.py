"""chunked dataset uploads; datasets gain status, reason, stats and files

Revision ID: 0002_dataset_uploads
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_dataset_uploads"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(
            sa.Column("status", sa.String(length=16), nullable=False, server_default="ready")
        )
        batch.add_column(sa.Column("reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("stats", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("files", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("validation_sent_at", sa.DateTime(timezone=True), nullable=True)
        )
    op.create_table(
        "dataset_uploads",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("part_size", sa.BigInteger(), nullable=False),
        sa.Column("total_size", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("dataset_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_dataset_uploads_owner_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_uploads")),
    )
    op.create_index("ix_dataset_uploads_owner", "dataset_uploads", ["owner_id"], unique=False)
    op.create_table(
        "dataset_upload_parts",
        sa.Column("upload_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("etag", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["upload_id"], ["dataset_uploads.id"],
            name=op.f("fk_dataset_upload_parts_upload_id_dataset_uploads"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("upload_id", "number", name=op.f("pk_dataset_upload_parts")),
    )


def downgrade() -> None:
    op.drop_table("dataset_upload_parts")
    op.drop_index("ix_dataset_uploads_owner", table_name="dataset_uploads")
    op.drop_table("dataset_uploads")
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("validation_sent_at")
        batch.drop_column("files")
        batch.drop_column("stats")
        batch.drop_column("reason")
        batch.drop_column("status")
