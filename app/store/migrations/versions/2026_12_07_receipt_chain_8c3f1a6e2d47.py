"""The tamper-evident log: each receipt and audit row's place in its hash chain,
and the checkpoints that chain the runs' heads.

Rows stored before this revision keep NULL chain columns (reported as unchained).
On PostgreSQL with lz4 the checkpoints' JSON column is compressed with it, as the
others are.

Revision ID: 8c3f1a6e2d47
Revises: 8c3f2a6d1e94
Create Date: 2026-12-07 12:40:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy import text

revision: str = "8c3f1a6e2d47"
down_revision: str | Sequence[str] | None = "8c3f2a6d1e94"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHAINED_TABLES = ("receipts", "audit_events")


def _has_lz4() -> bool:
    if op.get_context().dialect.name != "postgresql":
        return False
    if context.is_offline_mode():
        return True
    methods = (
        op.get_bind()
        .execute(text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
        .scalar()
    )
    return methods is not None and "lz4" in methods


def upgrade() -> None:
    for table in CHAINED_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("chain_seq", sa.Integer(), nullable=True))
            batch.add_column(sa.Column("chain_link", sa.String(64), nullable=True))
        op.create_index(op.f(f"ix_{table}_run_id_chain_seq"), table, ["run_id", "chain_seq"])
    op.create_table(
        "chain_checkpoints",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("prev", sa.String(64), nullable=False),
        sa.Column("link", sa.String(64), nullable=False),
        sa.Column("signature", sa.Text(), nullable=True),
        sa.Column("key_id", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chain_checkpoints")),
        sa.UniqueConstraint("seq", name=op.f("uq_chain_checkpoints_seq")),
    )
    if _has_lz4():
        op.execute('ALTER TABLE "chain_checkpoints" ALTER COLUMN "runs" SET COMPRESSION lz4')


def downgrade() -> None:
    op.drop_table("chain_checkpoints")
    for table in reversed(CHAINED_TABLES):
        op.drop_index(op.f(f"ix_{table}_run_id_chain_seq"), table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("chain_link")
            batch.drop_column("chain_seq")
