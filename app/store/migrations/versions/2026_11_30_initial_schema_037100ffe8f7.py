"""Initial schema: contract snapshots, runs, receipts, cache, audit, idempotency, instances.

Revision ID: 037100ffe8f7
Revises:
Create Date: 2026-11-30 13:40:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "037100ffe8f7"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_KINDS = "'sequential', 'parallel', 'router'"
RUN_STATUSES = (
    "'running', 'succeeded', 'failed', 'interrupted', 'cancelled', "
    "'done', 'incomplete', 'pending', 'error'"
)
IDEMPOTENCY_STATES = "'in_progress', 'completed'"


def upgrade() -> None:
    op.create_table(
        "contract_snapshots",
        sa.Column("hash", sa.String(128), nullable=False),
        sa.Column("canonical", sa.JSON(), nullable=False),
        sa.Column("tool_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_contract_snapshots")),
    )

    op.create_table(
        "service_instances",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_service_instances")),
    )
    op.create_index(
        op.f("ix_service_instances_heartbeat_at"), "service_instances", ["heartbeat_at"]
    )

    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("caller", sa.Text(), nullable=True),
        sa.Column("contract_hash", sa.String(128), nullable=False),
        sa.Column("parallel_batch_id", sa.String(64), nullable=True),
        sa.Column("request_digest", sa.String(128), nullable=True),
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.Column("outcome", sa.JSON(), nullable=True),
        sa.Column("call_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.ForeignKeyConstraint(
            ["contract_hash"],
            ["contract_snapshots.hash"],
            name=op.f("fk_runs_contract_hash_contract_snapshots"),
        ),
        sa.CheckConstraint(f"kind IN ({RUN_KINDS})", name=op.f("ck_runs_kind")),
        sa.CheckConstraint(f"status IN ({RUN_STATUSES})", name=op.f("ck_runs_status")),
    )
    op.create_index(op.f("ix_runs_created_at_id"), "runs", ["created_at", "id"])
    op.create_index(op.f("ix_runs_owner_created_at_id"), "runs", ["owner", "created_at", "id"])
    op.create_index(op.f("ix_runs_status_created_at_id"), "runs", ["status", "created_at", "id"])
    op.create_index(op.f("ix_runs_caller_created_at_id"), "runs", ["caller", "created_at", "id"])
    op.create_index(op.f("ix_runs_instance_id_status"), "runs", ["instance_id", "status"])

    op.create_table(
        "receipts",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("call_key", sa.Text(), nullable=False),
        sa.Column("item_key", sa.Text(), nullable=True),
        sa.Column("parallel_batch_id", sa.String(64), nullable=True),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("output", sa.JSON(), nullable=True),
        sa.Column("output_digest", sa.String(128), nullable=True),
        sa.Column("output_truncated", sa.Boolean(), nullable=False),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("cache_hit", sa.Boolean(), nullable=False),
        sa.Column("cache_source_receipt_id", sa.String(64), nullable=True),
        sa.Column("fingerprint", sa.String(128), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("parent_receipt_id", sa.String(64), nullable=True),
        sa.Column("control", sa.JSON(), nullable=True),
        sa.Column("admission_wait_ms", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_receipts")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_receipts_run_id_runs"), ondelete="CASCADE"
        ),
        sa.UniqueConstraint("run_id", "seq", name=op.f("uq_receipts_run_id_seq")),
    )
    op.create_index(op.f("ix_receipts_created_at_id"), "receipts", ["created_at", "id"])
    op.create_index(
        op.f("ix_receipts_tool_created_at_id"), "receipts", ["tool", "created_at", "id"]
    )
    op.create_index(
        op.f("ix_receipts_owner_created_at_id"), "receipts", ["owner", "created_at", "id"]
    )
    op.create_index(
        op.f("ix_receipts_status_created_at_id"), "receipts", ["status", "created_at", "id"]
    )
    op.create_index(op.f("ix_receipts_fingerprint"), "receipts", ["fingerprint"])

    op.create_table(
        "cache_entries",
        sa.Column("fingerprint", sa.String(128), nullable=False),
        sa.Column("definition_hash", sa.String(128), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("output", sa.JSON(), nullable=False),
        sa.Column("source_receipt_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("fingerprint", "definition_hash", name=op.f("pk_cache_entries")),
    )
    op.create_index(op.f("ix_cache_entries_expires_at"), "cache_entries", ["expires_at"])

    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("caller", sa.Text(), nullable=True),
        sa.Column("tool", sa.Text(), nullable=True),
        sa.Column("call_key", sa.Text(), nullable=True),
        sa.Column("item_key", sa.Text(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index(op.f("ix_audit_events_run_id_id"), "audit_events", ["run_id", "id"])

    op.create_table(
        "idempotency_keys",
        sa.Column("caller", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("request_digest", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.JSON(), nullable=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("caller", "key", name=op.f("pk_idempotency_keys")),
        sa.CheckConstraint(
            f"state IN ({IDEMPOTENCY_STATES})", name=op.f("ck_idempotency_keys_state")
        ),
    )
    op.create_index(op.f("ix_idempotency_keys_expires_at"), "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_idempotency_keys_expires_at"), table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    op.drop_index(op.f("ix_audit_events_run_id_id"), table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index(op.f("ix_cache_entries_expires_at"), table_name="cache_entries")
    op.drop_table("cache_entries")
    op.drop_index(op.f("ix_receipts_fingerprint"), table_name="receipts")
    op.drop_index(op.f("ix_receipts_status_created_at_id"), table_name="receipts")
    op.drop_index(op.f("ix_receipts_owner_created_at_id"), table_name="receipts")
    op.drop_index(op.f("ix_receipts_tool_created_at_id"), table_name="receipts")
    op.drop_index(op.f("ix_receipts_created_at_id"), table_name="receipts")
    op.drop_table("receipts")
    op.drop_index(op.f("ix_runs_instance_id_status"), table_name="runs")
    op.drop_index(op.f("ix_runs_caller_created_at_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_status_created_at_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_owner_created_at_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_created_at_id"), table_name="runs")
    op.drop_table("runs")
    op.drop_index(op.f("ix_service_instances_heartbeat_at"), table_name="service_instances")
    op.drop_table("service_instances")
    op.drop_table("contract_snapshots")
