"""Runs: the W3C trace id of the request that started them (null without tracing).

Revision ID: fd82ad3e373c
Revises: 7f2a9c4e1b63
Create Date: 2026-12-07 07:00:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "fd82ad3e373c"
down_revision: str | Sequence[str] | None = "7f2a9c4e1b63"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("trace_id", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("trace_id")
