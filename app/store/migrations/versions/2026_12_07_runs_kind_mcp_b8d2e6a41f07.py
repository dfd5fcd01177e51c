"""Runs: kind `mcp`, a one-call run started by an MCP client's `tools/call`.

The check constraint on `runs.kind` admits the new kind. On SQLite the table
is rebuilt (batch mode), its rows copied as they are.

Revision ID: b8d2e6a41f07
Revises: 01b0481bfb3f
Create Date: 2026-12-07 07:00:00.000000+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "b8d2e6a41f07"
down_revision: str | Sequence[str] | None = "01b0481bfb3f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONSTRAINT = "ck_runs_kind"
KINDS_BEFORE = "kind IN ('sequential', 'parallel', 'router')"
KINDS_AFTER = "kind IN ('sequential', 'parallel', 'router', 'mcp')"


def _replace_check(condition: str) -> None:
    with op.batch_alter_table("runs", recreate="auto") as batch:
        batch.drop_constraint(op.f(CONSTRAINT), type_="check")
        batch.create_check_constraint(op.f(CONSTRAINT), condition)


def upgrade() -> None:
    _replace_check(KINDS_AFTER)


def downgrade() -> None:
    # Runs of kind `mcp` would break the narrower check: they go first.
    op.execute("DELETE FROM runs WHERE kind = 'mcp'")
    _replace_check(KINDS_BEFORE)
