"""The rate-limited tools' token buckets shared across processes on PostgreSQL.

Revision ID: 8c3f2a6d1e94
Revises: 5e1c9a7d3b28
Create Date: 2026-12-07 12:40:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8c3f2a6d1e94"
down_revision: str | Sequence[str] | None = "5e1c9a7d3b28"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_buckets",
        sa.Column("tool_id", sa.Text(), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("tool_id", name=op.f("pk_tool_buckets")),
    )


def downgrade() -> None:
    op.drop_table("tool_buckets")
