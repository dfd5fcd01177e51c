"""Runs: the plan's `context` (e.g. `trace_id`), stored redacted.

A JSON column, NULL for runs stored before it and for runs without a plan
context (router runs). On PostgreSQL it is compressed with lz4 where the server
has it, like the other JSON columns (revision c41e7b2d9a05).

Revision ID: 01b0481bfb3f
Revises: a3d81c5e9f20
Create Date: 2026-12-07 07:00:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "01b0481bfb3f"
down_revision: str | Sequence[str] | None = "a3d81c5e9f20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _has_lz4() -> bool:
    if op.get_context().dialect.name != "postgresql":
        return False
    if context.is_offline_mode():
        return True
    methods = (
        op.get_bind()
        .execute(sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
        .scalar()
    )
    return methods is not None and "lz4" in methods


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("context", sa.JSON(none_as_null=True), nullable=True))
    if _has_lz4():
        op.execute('ALTER TABLE "runs" ALTER COLUMN "context" SET COMPRESSION lz4')


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("context")
