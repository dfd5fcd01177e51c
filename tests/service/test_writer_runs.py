"""A run whose start and end fall in one transaction is inserted already ended."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.service.writer import GroupCommitWriter
from app.store.database import create_session_factory
from app.store.repositories.bulk import BulkWrite
from tests.writer_support import HASH, engine_with_a_run, succeeded_receipt

NOW = datetime(2026, 11, 30, 12, 0, 0, 250001, tzinfo=UTC)
OUTCOME = {"status": "succeeded", "receipts": [{"n": 1, "note": "é\u2028"}], "z": None, "a": 1.5}


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    async with engine_with_a_run(database_url) as engine:
        yield engine


@pytest.fixture
def ends_updated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids whose end went to the database as an UPDATE."""
    updated: list[str] = []
    finish_runs = BulkWrite.finish_runs

    def spy(self: BulkWrite, ends: Sequence[Mapping[str, Any]]) -> BulkWrite:
        updated.extend(end["run_id"] for end in ends)
        return finish_runs(self, ends)

    monkeypatch.setattr(BulkWrite, "finish_runs", spy)
    return updated


def start(run_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "kind": "parallel",
        "owner": "o",
        "status": "running",
        "caller": "caller-a",
        "contract_hash": HASH,
        "parallel_batch_id": "batch-1",
        "request_digest": "sha256:" + "d" * 64,
        "instance_id": "i",
        "outcome": None,
        "call_count": 0,
        "created_at": NOW,
        "started_at": NOW,
        "finished_at": None,
        **overrides,
    }


def end(run_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "status": "succeeded",
        "outcome": OUTCOME,
        "call_count": 3,
        "finished_at": NOW + timedelta(milliseconds=7),
        **overrides,
    }


async def stored_run(engine: AsyncEngine, run_id: str) -> dict[str, Any]:
    """The row as the database holds it (no type processing), but its id."""
    async with engine.connect() as connection:
        row = (
            await connection.execute(text("SELECT * FROM runs WHERE id = :id"), {"id": run_id})
        ).one()
    return {key: value for key, value in row._mapping.items() if key != "id"}


async def test_a_run_started_and_ended_in_one_transaction_is_inserted_ended(
    engine: AsyncEngine, ends_updated: list[str]
) -> None:
    writer = GroupCommitWriter(create_session_factory(engine))
    writer.start()
    try:
        # Started and ended in two transactions: the reference.
        await writer.start_run(start("apart"))
        await writer.end_run(end("apart"))
        # In one transaction, with a receipt, and an end that keeps the stored count.
        started = writer.start_run(start("together"))
        receipt = writer.submit(succeeded_receipt(0, {}))
        ended = writer.end_run(end("together"))
        kept = writer.start_run(start("count-kept", call_count=2))
        writer.end_run(end("count-kept", call_count=None))
        assert started is receipt is ended is kept  # one transaction
        await ended
        await writer.start_run(start("count-kept-apart", call_count=2))
        await writer.end_run(end("count-kept-apart", call_count=None))
    finally:
        await writer.aclose()

    assert ends_updated == ["apart", "count-kept-apart"]
    together, apart = await stored_run(engine, "together"), await stored_run(engine, "apart")
    assert together == apart
    assert together["status"] == "succeeded"
    assert together["call_count"] == 3
    assert await stored_run(engine, "count-kept") == await stored_run(engine, "count-kept-apart")
    assert (await stored_run(engine, "count-kept"))["call_count"] == 2


async def test_two_ends_of_a_run_started_with_them_apply_in_order(
    engine: AsyncEngine, ends_updated: list[str]
) -> None:
    writer = GroupCommitWriter(create_session_factory(engine))
    writer.start()
    try:
        writer.start_run(start("twice"))
        writer.end_run(end("twice", status="failed", call_count=1))
        await writer.end_run(end("twice", outcome=None, call_count=None))
        await writer.start_run(start("twice-apart"))
        await writer.end_run(end("twice-apart", status="failed", call_count=1))
        await writer.end_run(end("twice-apart", outcome=None, call_count=None))
    finally:
        await writer.aclose()

    assert ends_updated == ["twice-apart", "twice-apart"]
    twice = await stored_run(engine, "twice")
    assert twice == await stored_run(engine, "twice-apart")
    assert (twice["status"], twice["call_count"], twice["outcome"]) == ("succeeded", 1, None)


class LosingSessions:
    """Sessions whose first transaction fails with a lost connection: before it ran,
    or after it committed (only the answer was lost)."""

    def __init__(self, real: async_sessionmaker[AsyncSession], when: str) -> None:
        self._real = real
        self._when = when
        self.attempts = 0

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[AsyncSession]:
        self.attempts += 1
        first = self.attempts == 1
        if first and self._when == "before":
            raise _lost()
        async with self._real() as session:
            yield session
        if first and self._when == "after":
            raise _lost()


def _lost() -> OperationalError:
    return OperationalError("COMMIT", {}, sqlite3.OperationalError("database is locked"))


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_folded_run_whose_commit_answer_was_lost_is_written_once(
    engine: AsyncEngine, ends_updated: list[str], when: Literal["before", "after"]
) -> None:
    sessions = LosingSessions(create_session_factory(engine), when)
    writer = GroupCommitWriter(sessions)  # type: ignore[arg-type]
    writer.start()
    try:
        writer.start_run(start("lost"))
        await writer.end_run(end("lost"))
    finally:
        await writer.aclose()

    assert sessions.attempts >= 2
    assert ends_updated == []
    stored = await stored_run(engine, "lost")
    assert stored["status"] == "succeeded"
    async with engine.connect() as connection:
        count = await connection.scalar(text("SELECT count(*) FROM runs WHERE id = 'lost'"))
    assert count == 1
