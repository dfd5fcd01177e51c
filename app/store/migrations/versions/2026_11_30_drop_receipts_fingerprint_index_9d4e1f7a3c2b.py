"""Receipts: drop the index on `fingerprint`, which no query uses.

Every receipt insert maintained it (a b-tree over a 71-character digest), yet
no read filters or orders receipts by fingerprint: the cache is looked up in
`cache_entries` by its primary key, and `GET /receipts` filters by run, tool,
owner, status, item key, cache hit and creation time (docs/decisions.md,
"What a call writes").

Revision ID: 9d4e1f7a3c2b
Revises: 5b0c7e2a91d4
Create Date: 2026-11-30 16:30:00.000000+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "9d4e1f7a3c2b"
down_revision: str | Sequence[str] | None = "5b0c7e2a91d4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index(op.f("ix_receipts_fingerprint"), table_name="receipts")


def downgrade() -> None:
    op.create_index(op.f("ix_receipts_fingerprint"), "receipts", ["fingerprint"])
