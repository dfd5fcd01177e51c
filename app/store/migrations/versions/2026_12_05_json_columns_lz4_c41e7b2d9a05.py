"""JSON documents compressed with lz4 on PostgreSQL, where the server has it.

PostgreSQL compresses a value it stores out of line (one over about 2 KB) with
pglz unless the column names another method. The large values here are JSON
documents: a long plan's shared audit rows (up to 64 events, about 4.5 KB
each), tool outputs, router checkpoints. lz4 compresses and decompresses them
several times faster than pglz, which shortens a long plan's audit insert
(docs/decisions.md, "What a call writes").

Only values stored from then on are compressed so; those stored before stay
readable as they are. Nothing changes on SQLite, nor on a PostgreSQL server
older than 14 or built without lz4.

Revision ID: c41e7b2d9a05
Revises: 9d4e1f7a3c2b
Create Date: 2026-12-05 03:30:00.000000+00:00
"""

from collections.abc import Sequence

from alembic import context, op
from sqlalchemy import text

revision: str = "c41e7b2d9a05"
down_revision: str | Sequence[str] | None = "9d4e1f7a3c2b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every JSON column, as (table, column).
JSON_COLUMNS = (
    ("audit_events", "detail"),
    ("cache_entries", "output"),
    ("contract_snapshots", "canonical"),
    ("idempotency_keys", "response_body"),
    ("receipts", "control"),
    ("receipts", "error"),
    ("receipts", "output"),
    ("router_checkpoints", "document"),
    ("router_confirmations", "args"),
    ("runs", "outcome"),
)


def _has_lz4() -> bool:
    if op.get_context().dialect.name != "postgresql":
        return False
    if context.is_offline_mode():
        # A script for a server not asked: written for one that has lz4 (14 and
        # later, built with it); without it, leave these statements out.
        return True
    methods = op.get_bind().execute(
        text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar()
    return methods is not None and "lz4" in methods


def _compress_with(method: str) -> None:
    if not _has_lz4():
        return
    for table, column in JSON_COLUMNS:
        op.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')


def upgrade() -> None:
    _compress_with("lz4")


def downgrade() -> None:
    _compress_with("default")
