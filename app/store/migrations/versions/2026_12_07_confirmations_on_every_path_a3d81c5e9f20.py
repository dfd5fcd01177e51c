"""Confirmations for plan runs as well as router runs, and expiry.

A waiting plan call is placed by its lane (`item_key`) and its receipt's
sequence number (`seq`); it has no model call id, so `call_id` may be empty.
A confirmation nobody decided within the TTL ends `expired`. The listing of
confirmations by status, newest first, and the expiry sweep read the new index.

Revision ID: a3d81c5e9f20
Revises: fd82ad3e373c
Create Date: 2026-12-07 06:30:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a3d81c5e9f20"
down_revision: str | Sequence[str] | None = "fd82ad3e373c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "router_confirmations"
CHECK = "ck_router_confirmations_status"
INDEX = "ix_router_confirmations_status_created_at_id"
BEFORE = "'pending', 'approved', 'rejected', 'refused'"
AFTER = "'pending', 'approved', 'rejected', 'refused', 'expired'"


def upgrade() -> None:
    with op.batch_alter_table(TABLE) as batch:
        batch.add_column(sa.Column("item_key", sa.Text(), nullable=True))
        batch.add_column(sa.Column("seq", sa.Integer(), nullable=True))
        batch.alter_column("call_id", existing_type=sa.Text(), nullable=True)
        batch.drop_constraint(op.f(CHECK), type_="check")
        batch.create_check_constraint(op.f(CHECK), sa.text(f"status IN ({AFTER})"))
    op.create_index(INDEX, TABLE, ["status", "created_at", "id"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    op.execute(
        sa.text(
            f"UPDATE {TABLE} SET status = 'rejected', reason = 'expired' "
            "WHERE status = 'expired'"
        )
    )
    op.execute(sa.text(f"DELETE FROM {TABLE} WHERE call_id IS NULL"))
    with op.batch_alter_table(TABLE) as batch:
        batch.drop_constraint(op.f(CHECK), type_="check")
        batch.create_check_constraint(op.f(CHECK), sa.text(f"status IN ({BEFORE})"))
        batch.alter_column("call_id", existing_type=sa.Text(), nullable=False)
        batch.drop_column("seq")
        batch.drop_column("item_key")
