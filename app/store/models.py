"""Tables, as SQLAlchemy 2 declarative models.

Portable types only, so that one Alembic tree serves SQLite and PostgreSQL.
Times are `UtcDateTime` (aware UTC on both backends). JSON columns use the
generic `JSON` type (`json`, not `jsonb`, on PostgreSQL): documents keep their
key order and may hold any string, including NUL. In nullable JSON columns
Python `None` is SQL NULL.

Indexes ending in `(created_at, id)` serve keyset pagination, newest first.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    column,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.store.types import JsonDocument, JsonValue, UtcDateTime, utc_now

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RUN_KINDS = ("sequential", "parallel", "router", "mcp")
RUN_STATUSES = (
    "running",
    "succeeded",
    "failed",
    "interrupted",
    "cancelled",
    "done",
    "incomplete",
    "pending",
    "error",
)
IDEMPOTENCY_STATES = ("in_progress", "completed")
CONFIRMATION_STATUSES = ("pending", "approved", "rejected", "refused", "expired")

ID = String(64)
DIGEST = String(128)
STATUS = String(32)
CHAIN_LINK = String(64)  # a SHA-256, hex

# SQLite only auto-increments an INTEGER PRIMARY KEY (the rowid alias).
BigIntegerId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime(), dict[str, Any]: JsonDocument}


class ContractSnapshot(Base):
    __tablename__ = "contract_snapshots"

    hash: Mapped[str] = mapped_column(DIGEST, primary_key=True)
    canonical: Mapped[dict[str, Any]]
    tool_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        CheckConstraint(column("kind").in_(RUN_KINDS), name="kind"),
        CheckConstraint(column("status").in_(RUN_STATUSES), name="status"),
        Index(None, "created_at", "id"),
        Index(None, "owner", "created_at", "id"),
        Index(None, "status", "created_at", "id"),
        Index(None, "caller", "created_at", "id"),
        Index(None, "instance_id", "status"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(STATUS)
    caller: Mapped[str | None] = mapped_column(Text)
    contract_hash: Mapped[str] = mapped_column(DIGEST, ForeignKey("contract_snapshots.hash"))
    parallel_batch_id: Mapped[str | None] = mapped_column(ID)
    request_digest: Mapped[str | None] = mapped_column(DIGEST)
    # The W3C trace id (32 hex digits) of the request that started the run, when traced.
    trace_id: Mapped[str | None] = mapped_column(String(32))
    instance_id: Mapped[str] = mapped_column(ID)
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JsonValue)
    call_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    started_at: Mapped[datetime] = mapped_column(default=utc_now)
    finished_at: Mapped[datetime | None]
    # The plan's `context`, redacted (`app.service.plans.context`); NULL without one.
    context: Mapped[dict[str, Any] | None] = mapped_column(JsonValue)


# The receipts the index on `(status, created_at, id)` holds: those that did not
# succeed, which an operator filtering by status looks for. Succeeded receipts,
# nearly all of them, are found newest first through `(created_at, id)`, and no
# insert of one maintains it (docs/decisions.md, "What a call writes"). A query
# uses the index when it says the same, as a literal
# (`repositories.receipts.page_statement`): a status given as a parameter proves
# nothing.
RECEIPT_SUCCEEDED = "succeeded"
RECEIPT_NOT_SUCCEEDED = f"status <> '{RECEIPT_SUCCEEDED}'"


class Receipt(Base):
    __tablename__ = "receipts"
    __table_args__ = (
        UniqueConstraint("run_id", "seq"),
        Index(None, "created_at", "id"),
        Index(None, "run_id", "chain_seq"),
        Index(None, "tool", "created_at", "id"),
        Index(None, "owner", "created_at", "id"),
        Index(
            None,
            "status",
            "created_at",
            "id",
            postgresql_where=text(RECEIPT_NOT_SUCCEEDED),
            sqlite_where=text(RECEIPT_NOT_SUCCEEDED),
        ),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    run_id: Mapped[str] = mapped_column(ID, ForeignKey("runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    call_key: Mapped[str] = mapped_column(Text)
    item_key: Mapped[str | None] = mapped_column(Text)
    parallel_batch_id: Mapped[str | None] = mapped_column(ID)
    tool: Mapped[str] = mapped_column(Text)
    owner: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(STATUS)
    output: Mapped[Any | None] = mapped_column(JsonValue)
    output_digest: Mapped[str | None] = mapped_column(DIGEST)
    output_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[dict[str, Any] | None] = mapped_column(JsonValue)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    cache_hit: Mapped[bool] = mapped_column(Boolean, default=False)
    cache_source_receipt_id: Mapped[str | None] = mapped_column(ID)
    fingerprint: Mapped[str] = mapped_column(DIGEST)
    idempotency_key: Mapped[str] = mapped_column(Text)
    parent_receipt_id: Mapped[str | None] = mapped_column(ID)
    control: Mapped[dict[str, Any] | None] = mapped_column(JsonValue)
    admission_wait_ms: Mapped[float] = mapped_column(Float, default=0.0)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    duration_ms: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    # The row's place in its run's hash chain (`app.foundation.chain`); NULL for rows
    # stored before the chain existed.
    chain_seq: Mapped[int | None] = mapped_column(Integer)
    chain_link: Mapped[str | None] = mapped_column(CHAIN_LINK)


class CacheEntry(Base):
    __tablename__ = "cache_entries"

    fingerprint: Mapped[str] = mapped_column(DIGEST, primary_key=True)
    definition_hash: Mapped[str] = mapped_column(DIGEST, primary_key=True)
    tool: Mapped[str] = mapped_column(Text)
    output: Mapped[Any] = mapped_column(JsonDocument)
    source_receipt_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    expires_at: Mapped[datetime | None] = mapped_column(index=True)


class AuditEvent(Base):
    __tablename__ = "audit_events"
    __table_args__ = (Index(None, "run_id", "id"), Index(None, "run_id", "chain_seq"))

    id: Mapped[int] = mapped_column(BigIntegerId, primary_key=True, autoincrement=True)
    run_id: Mapped[str | None] = mapped_column(ID)
    at: Mapped[datetime] = mapped_column(default=utc_now)
    kind: Mapped[str] = mapped_column(String(64))
    caller: Mapped[str | None] = mapped_column(Text)
    tool: Mapped[str | None] = mapped_column(Text)
    call_key: Mapped[str | None] = mapped_column(Text)
    item_key: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Its place in its run's hash chain, or its UTC day's for a row without a run.
    chain_seq: Mapped[int | None] = mapped_column(Integer)
    chain_link: Mapped[str | None] = mapped_column(CHAIN_LINK)


class IdempotencyKey(Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (CheckConstraint(column("state").in_(IDEMPOTENCY_STATES), name="state"),)

    caller: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    request_digest: Mapped[str] = mapped_column(DIGEST)
    state: Mapped[str] = mapped_column(String(16), default="in_progress")
    response_status: Mapped[int | None] = mapped_column(Integer)
    response_body: Mapped[Any | None] = mapped_column(JsonValue)
    run_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    expires_at: Mapped[datetime] = mapped_column(index=True)


class ServiceInstance(Base):
    __tablename__ = "service_instances"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    hostname: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(default=utc_now)
    heartbeat_at: Mapped[datetime] = mapped_column(default=utc_now, index=True)


class RouterCheckpoint(Base):
    """A paused run's state: a router run's redacted request, conversation and runtime
    state; a plan run's shape and the arguments of the calls after those that wait
    (`app.service.plans.pause`)."""

    __tablename__ = "router_checkpoints"

    run_id: Mapped[str] = mapped_column(
        ID, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    document: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class RouterExactState(Base):
    """What a router run on the Temporal executor keeps out of Temporal's history, which
    holds only redacted copies: its exact conversation after its last finished stretch,
    and the calls of a `non_idempotent` tool its stretches started (seq, call key, tool,
    exact arguments), for the `outcome_unknown` receipt of one whose worker was lost.
    Forgotten when the run ends."""

    __tablename__ = "router_exact_state"

    run_id: Mapped[str] = mapped_column(
        ID, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    conversation: Mapped[list[Any] | None] = mapped_column(JsonValue)
    started_calls: Mapped[list[Any]] = mapped_column(JsonDocument)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now)


class Confirmation(Base):
    """A call waiting for a person's decision, in a plan run or a router run. `args`
    holds its exact arguments only until the decision (docs/decisions.md, "pending
    confirmation arguments"). `call_id` is the model's id of a router run's call;
    `item_key` and `seq` place a plan's call (its lane, its receipt's sequence).
    The table keeps the name it had when only router runs waited."""

    __tablename__ = "router_confirmations"
    __table_args__ = (
        CheckConstraint(column("status").in_(CONFIRMATION_STATUSES), name="status"),
        Index(None, "run_id", "ordinal"),
        Index(None, "status", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    run_id: Mapped[str] = mapped_column(ID, ForeignKey("runs.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    call_id: Mapped[str | None] = mapped_column(Text)
    call_key: Mapped[str] = mapped_column(Text)
    item_key: Mapped[str | None] = mapped_column(Text)
    seq: Mapped[int | None] = mapped_column(Integer)
    tool: Mapped[str] = mapped_column(Text)
    args: Mapped[Any | None] = mapped_column(JsonValue)
    args_digest: Mapped[str] = mapped_column(DIGEST)
    contract_hash: Mapped[str] = mapped_column(DIGEST)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    reason: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    decided_at: Mapped[datetime | None]


class ModelUsage(Base):
    """The usage ledger: one row per model request of a router run, its tokens and
    cost (integer nano-units, `app.foundation.money`; null when the profile declares
    no prices). `hour` and `day` are `at` truncated (UTC), the buckets usage is
    summed in. `caller` is the key's name, empty in open mode (keyset paging
    over the grouped rows needs no NULL). Rows outlive their runs; a run's rows
    are read by `run_id` (its totals)."""

    __tablename__ = "model_usage"
    __table_args__ = (Index(None, "at"), Index(None, "run_id"))

    id: Mapped[int] = mapped_column(BigIntegerId, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    hour: Mapped[datetime]
    day: Mapped[datetime]
    run_id: Mapped[str | None] = mapped_column(ID)
    owner: Mapped[str] = mapped_column(Text)
    caller: Mapped[str] = mapped_column(Text)
    profile: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(String(16))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cost_nanos: Mapped[int | None] = mapped_column(BigInteger)


RouterConfirmation = Confirmation


class RouterRecording(Base):
    """What a router run's replay needs: its request and its model's replies, both
    redacted (`app.router.recording` caps each reply), in the order they came."""

    __tablename__ = "router_recordings"

    run_id: Mapped[str] = mapped_column(
        ID, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    request: Mapped[dict[str, Any]]
    replies: Mapped[list[Any]] = mapped_column(JsonDocument)
    reply_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now)


class ToolBucket(Base):
    """A rate-limited tool's token bucket, shared by every process on PostgreSQL
    (`app.store.shared_limits`): the tokens left at `updated_s` (the database
    server's clock, seconds since the epoch). Only PostgreSQL uses it."""

    __tablename__ = "tool_buckets"

    tool_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_s: Mapped[float] = mapped_column(Float)


class ChainCheckpoint(Base):
    """The heads of the runs that ended since the previous checkpoint, chained to it
    (`app.foundation.chain.checkpoint_link`); signed with the operator's Ed25519 key
    when one is configured (`signature` base64, `key_id` the public key's SHA-256)."""

    __tablename__ = "chain_checkpoints"

    id: Mapped[int] = mapped_column(BigIntegerId, primary_key=True, autoincrement=True)
    seq: Mapped[int] = mapped_column(Integer, unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    runs: Mapped[list[Any]] = mapped_column(JsonDocument)
    prev: Mapped[str] = mapped_column(CHAIN_LINK)
    link: Mapped[str] = mapped_column(CHAIN_LINK)
    signature: Mapped[str | None] = mapped_column(Text)
    key_id: Mapped[str | None] = mapped_column(Text)
