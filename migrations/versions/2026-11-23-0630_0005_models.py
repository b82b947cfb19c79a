"""uploaded models (issue 12)

Revision ID: 0005_models
Revises: 0004_dispatch_outbox
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_models"
down_revision: str | None = "0004_dispatch_outbox"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("storage_prefix", sa.String(length=512), nullable=False),
        sa.Column("symbol_sha256", sa.String(length=64), nullable=False),
        sa.Column("symbol_size", sa.BigInteger(), nullable=False),
        sa.Column("params_sha256", sa.String(length=64), nullable=True),
        sa.Column("params_size", sa.BigInteger(), nullable=True),
        sa.Column("input_name", sa.String(length=128), nullable=False),
        sa.Column("input_shape", sa.JSON(), nullable=False),
        sa.Column("output_shapes", sa.JSON(), nullable=False),
        sa.Column("ops", sa.JSON(), nullable=False),
        sa.Column("parameter_count", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_models_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
    )
    op.create_index("ix_models_owner_created", "models", ["owner_id", "created_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_models_owner_created", table_name="models")
    op.drop_table("models")
