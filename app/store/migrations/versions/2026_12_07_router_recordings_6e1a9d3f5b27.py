"""Router recordings: a router run's redacted request and model replies, for replay.

On PostgreSQL with lz4 the JSON columns are compressed with it, as the others are.

Revision ID: 6e1a9d3f5b27
Revises: b8d2e6a41f07
Create Date: 2026-12-07 09:30:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy import text

revision: str = "6e1a9d3f5b27"
down_revision: str | Sequence[str] | None = "b8d2e6a41f07"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _has_lz4() -> bool:
    if op.get_context().dialect.name != "postgresql":
        return False
    if context.is_offline_mode():
        return True
    methods = op.get_bind().execute(
        text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar()
    return methods is not None and "lz4" in methods


def upgrade() -> None:
    op.create_table(
        "router_recordings",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("replies", sa.JSON(), nullable=False),
        sa.Column("reply_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_router_recordings")),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_router_recordings_run_id_runs"),
            ondelete="CASCADE",
        ),
    )
    if _has_lz4():
        for column in ("request", "replies"):
            op.execute(f'ALTER TABLE "router_recordings" ALTER COLUMN "{column}" SET COMPRESSION lz4')


def downgrade() -> None:
    op.drop_table("router_recordings")
