"""Router runs: checkpoints of paused runs and the calls waiting for confirmation.

Revision ID: 5b0c7e2a91d4
Revises: 037100ffe8f7
Create Date: 2026-11-30 14:30:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5b0c7e2a91d4"
down_revision: str | Sequence[str] | None = "037100ffe8f7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONFIRMATION_STATUSES = "'pending', 'approved', 'rejected', 'refused'"


def upgrade() -> None:
    op.create_table(
        "router_checkpoints",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_router_checkpoints")),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_router_checkpoints_run_id_runs"),
            ondelete="CASCADE",
        ),
    )

    op.create_table(
        "router_confirmations",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=False),
        sa.Column("call_key", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("args", sa.JSON(), nullable=True),
        sa.Column("args_digest", sa.String(128), nullable=False),
        sa.Column("contract_hash", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_router_confirmations")),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_router_confirmations_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            f"status IN ({CONFIRMATION_STATUSES})", name=op.f("ck_router_confirmations_status")
        ),
    )
    op.create_index(
        op.f("ix_router_confirmations_run_id_ordinal"),
        "router_confirmations",
        ["run_id", "ordinal"],
    )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_router_confirmations_run_id_ordinal"), table_name="router_confirmations"
    )
    op.drop_table("router_confirmations")
    op.drop_table("router_checkpoints")
