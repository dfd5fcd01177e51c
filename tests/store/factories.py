"""Rows for store tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.store.database import create_database_engine, create_session_factory
from app.store.migrate import upgrade_database
from app.store.models import Run
from app.store.repositories import ContractSnapshotRepository, RunRepository

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONTRACT_HASH = "sha256:" + "c" * 64


async def create_run(
    session: AsyncSession,
    run_id: str = "run-1",
    *,
    instance_id: str = "instance-1",
    owner: str = "worker-a",
    kind: str = "sequential",
    caller: str | None = None,
) -> Run:
    await ContractSnapshotRepository(session).save_if_absent(CONTRACT_HASH, {"tools": {}}, 0)
    return await RunRepository(session).create(
        id=run_id,
        kind=kind,
        owner=owner,
        contract_hash=CONTRACT_HASH,
        instance_id=instance_id,
        caller=caller,
    )


def run_row(run_id: str, *, caller: str | None = None) -> dict[str, Any]:
    """A running sequential run's row, every column given (for bulk writes)."""
    return {
        "id": run_id,
        "kind": "sequential",
        "owner": "worker-a",
        "status": "running",
        "caller": caller,
        "contract_hash": CONTRACT_HASH,
        "parallel_batch_id": None,
        "request_digest": None,
        "instance_id": "instance-1",
        "outcome": None,
        "call_count": 0,
        "created_at": T0,
        "started_at": T0,
        "finished_at": None,
    }


def receipt_row(run_id: str, seq: int, **overrides: Any) -> dict[str, Any]:
    started = T0 + timedelta(seconds=seq)
    row: dict[str, Any] = {
        "id": f"{run_id}-receipt-{seq}",
        "run_id": run_id,
        "seq": seq,
        "call_key": f"c{seq}",
        "item_key": None,
        "parallel_batch_id": None,
        "tool": "transform",
        "owner": "worker-a",
        "status": "succeeded",
        "output": {"n": seq},
        "output_digest": None,
        "output_truncated": False,
        "error": None,
        "attempts": 1,
        "cache_hit": False,
        "cache_source_receipt_id": None,
        "fingerprint": f"sha256:{seq:064x}",
        "idempotency_key": f"{run_id}:{seq}",
        "parent_receipt_id": None,
        "control": None,
        "admission_wait_ms": 0.0,
        "started_at": started,
        "finished_at": started + timedelta(milliseconds=5),
        "duration_ms": 5.0,
        "created_at": started,
    }
    row.update(overrides)
    return row


def key_row(key: str, run_id: str, *, caller: str = "ops") -> dict[str, Any]:
    """An idempotency key held for a day from now by `run_id` (for bulk claims)."""
    now = datetime.now(UTC)
    return {
        "caller": caller,
        "key": key,
        "request_digest": "d",
        "state": "in_progress",
        "response_status": None,
        "response_body": None,
        "run_id": run_id,
        "created_at": now,
        "expires_at": now + timedelta(days=1),
    }


@asynccontextmanager
async def migrated_engine(url: str) -> AsyncIterator[AsyncEngine]:
    """The database at head, holding run "run-0" (and the contract snapshot runs need)."""
    await upgrade_database(url)
    engine = create_database_engine(url)
    try:
        async with create_session_factory(engine).begin() as session:
            await create_run(session, "run-0")
        yield engine
    finally:
        await engine.dispose()


def audit_row(run_id: str, text: str) -> dict[str, Any]:
    """A call's finished event (`AuditEvent` column names), its detail holding `text`."""
    return {
        "run_id": run_id,
        "at": T0 + timedelta(microseconds=7),
        "kind": "call.finished",
        "caller": None,
        "tool": "transform",
        "call_key": "c0",
        "item_key": None,
        "detail": {"seq": 0, "status": "succeeded", "text": text},
    }


def run_end_row(run_id: str, calls: int) -> dict[str, Any]:
    """A run's successful end after `calls` calls (`BulkWrite.finish_runs`)."""
    return {
        "run_id": run_id,
        "status": "succeeded",
        "outcome": {"n": calls},
        "call_count": calls,
        "finished_at": T0 + timedelta(seconds=3),
    }
