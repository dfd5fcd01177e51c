"""The usage ledger: an index on `run_id`, by which a run's totals are read.

Revision ID: 2b6f8d4e1a93
Revises: 4d7b2e9a1c36
Create Date: 2026-12-07 19:30:00.000000+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "2b6f8d4e1a93"
down_revision: str | Sequence[str] | None = "4d7b2e9a1c36"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_model_usage_run_id"), "model_usage", ["run_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_model_usage_run_id"), table_name="model_usage")
