"""The receipt writer rides out a short outage, and replaces superseded receipts in place."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import psycopg
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.service.outage import is_transient, retry_transient
from app.service.writer import GroupCommitWriter
from app.store.database import create_session_factory
from app.store.repositories.audit import AuditRepository
from app.store.repositories.receipts import ReceiptRepository
from tests.writer_support import engine_with_a_run, succeeded_receipt


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    async with engine_with_a_run(database_url) as engine:
        yield engine


def _lost_connection() -> OperationalError:
    return OperationalError("COMMIT", {}, psycopg.OperationalError("server closed the connection"))


def test_only_connection_level_errors_are_transient() -> None:
    assert is_transient(_lost_connection())
    assert is_transient(OperationalError("x", {}, sqlite3.OperationalError("database is locked")))
    assert not is_transient(OperationalError("x", {}, sqlite3.OperationalError("no such table")))
    assert not is_transient(IntegrityError("x", {}, sqlite3.IntegrityError("UNIQUE failed")))
    assert not is_transient(ValueError("x"))


async def test_a_transient_failure_is_retried_and_others_are_not() -> None:
    failures = [_lost_connection(), _lost_connection()]

    async def flaky() -> str:
        if failures:
            raise failures.pop()
        return "done"

    assert await retry_transient(flaky, "flaky") == "done"

    async def broken() -> None:
        raise ValueError("not transient")

    with pytest.raises(ValueError, match="not transient"):
        await retry_transient(broken, "broken")
    failures[:] = [_lost_connection()]
    with pytest.raises(OperationalError):
        await retry_transient(flaky, "flaky", window_s=0.0)


class FlakySessions:
    """Sessions whose first transaction fails with a lost connection, before or after it
    committed (the commit went through, only its answer was lost)."""

    def __init__(
        self, real: async_sessionmaker[AsyncSession], when: Literal["before", "after"]
    ) -> None:
        self._real = real
        self._when = when
        self.failed = False

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncSession]:
        first = not self.failed
        self.failed = True
        async with self._real.begin() as session:
            yield session
            if first and self._when == "before":
                raise _lost_connection()
        if first and self._when == "after":
            raise _lost_connection()


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_commit_lost_to_an_outage_is_retried_without_a_duplicate(
    engine: AsyncEngine,
    when: Literal["before", "after"],
) -> None:
    flaky = FlakySessions(create_session_factory(engine), when)
    writer = GroupCommitWriter(flaky)  # type: ignore[arg-type]
    writer.start()
    try:
        await writer.submit(succeeded_receipt(0, {"n": 0}))
    finally:
        await writer.aclose()
    assert flaky.failed
    async with create_session_factory(engine)() as session:
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert [(r.id, r.seq) for r in stored] == [("r0", 0)]


async def test_a_superseded_receipt_is_replaced_in_place_and_kept_in_audit(
    engine: AsyncEngine,
) -> None:
    sessions = create_session_factory(engine)
    writer = GroupCommitWriter(sessions)
    writer.start()
    old: dict[str, Any] = {"kind": "receipt.superseded", "detail": {"receipt_id": "r0"}}
    try:
        await writer.submit(succeeded_receipt(0, {"n": "first"}))
        writer.supersede(
            "run-1", {0: {**old, "run_id": "run-1", "at": succeeded_receipt(0, 0).started_at}}
        )
        await writer.submit(succeeded_receipt(0, {"n": "second"}, receipt_id="r0-new"))
        await writer.submit(succeeded_receipt(1, {"n": 1}))
        writer.supersede("run-1", {5: {**old, "run_id": "run-1"}})
        writer.forget_superseded("run-1")
    finally:
        await writer.aclose()
    async with sessions() as session:
        stored = await ReceiptRepository(session).list_for_run("run-1")
        events = await AuditRepository(session).list_for_run("run-1")
    assert [(r.id, r.seq, r.output) for r in stored] == [
        ("r0-new", 0, {"n": "second"}),
        ("r1", 1, {"n": 1}),
    ]
    assert [(e.kind, e.detail) for e in events] == [
        ("receipt.superseded", {"receipt_id": "r0", "superseded_by": "r0-new"})
    ]
