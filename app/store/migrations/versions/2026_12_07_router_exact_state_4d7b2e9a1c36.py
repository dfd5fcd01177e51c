"""What a router run on the Temporal executor keeps out of Temporal's history: its
exact conversation between stretches and the non-idempotent calls its stretches
started, until the run ends.

On PostgreSQL with lz4 the JSON columns are compressed with it, as the others are.

Revision ID: 4d7b2e9a1c36
Revises: 8c3f1a6e2d47
Create Date: 2026-12-07 16:00:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy import text

revision: str = "4d7b2e9a1c36"
down_revision: str | Sequence[str] | None = "8c3f1a6e2d47"
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
        "router_exact_state",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("conversation", sa.JSON(), nullable=True),
        sa.Column("started_calls", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_router_exact_state")),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_router_exact_state_run_id_runs"),
            ondelete="CASCADE",
        ),
    )
    if _has_lz4():
        for column in ("conversation", "started_calls"):
            op.execute(
                f'ALTER TABLE "router_exact_state" ALTER COLUMN "{column}" SET COMPRESSION lz4'
            )


def downgrade() -> None:
    op.drop_table("router_exact_state")
