"""Receipts: the status index holds only the receipts that did not succeed.

Every receipt insert maintained `(status, created_at, id)`, though nearly every
receipt succeeds and an operator filtering by status looks for the others.
On PostgreSQL it was a measurable share of a durable call's rows; succeeded
receipts are found newest first through `(created_at, id)` as well. Queries
for another status name the index's predicate, so they use it when the status
is a parameter (docs/decisions.md, "What a call writes"). Rebuilding the index reads the whole table once, under a lock that
holds back writes to receipts while it runs.

Revision ID: 7f2a9c4e1b63
Revises: e3b9a4c70d15
Create Date: 2026-12-05 11:00:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7f2a9c4e1b63"
down_revision: str | Sequence[str] | None = "e3b9a4c70d15"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_receipts_status_created_at_id"
COLUMNS = ["status", "created_at", "id"]
# As `app.store.models.RECEIPT_NOT_SUCCEEDED` wrote it when this revision was made.
NOT_SUCCEEDED = "status <> 'succeeded'"


def upgrade() -> None:
    op.drop_index(INDEX, table_name="receipts")
    op.create_index(
        INDEX,
        "receipts",
        COLUMNS,
        postgresql_where=sa.text(NOT_SUCCEEDED),
        sqlite_where=sa.text(NOT_SUCCEEDED),
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="receipts")
    op.create_index(INDEX, "receipts", COLUMNS)
