"""A bulk write with its commit on the calling thread (SQLite), and its way back to
aiosqlite's thread when another connection holds the write lock."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiosqlite
import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.store.database import create_session_factory
from app.store.journal.batch import Batch
from app.store.journal.sqlite.connection import _executemany_here, write_on
from app.store.journal.sqlite.encoding import statements
from app.store.journal.sqlite.statements import SqliteClaims
from app.store.migrate import upgrade_database
from app.store.repositories import ReceiptRepository, RunRepository
from app.store.repositories.idempotency import IdempotencyRepository
from tests.aiosqlite_support import note_thread_calls
from tests.store.factories import create_run, key_row, receipt_row, run_row

BUSY_TIMEOUT_MS = 5000  # `app.store.database.SQLITE_PRAGMAS`


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """SQLite only (the store's `engine` fixture runs on it): the loop's thread is SQLite's path."""
    return sqlite_url


@pytest.fixture
def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return create_session_factory(engine)


@pytest.fixture
def thread_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return note_thread_calls(monkeypatch)


def _now() -> datetime:
    return datetime.now(UTC)


async def _busy_timeout(session: AsyncSession) -> int:
    raw = await (await session.connection()).get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, aiosqlite.Connection)
    async with driver.execute("PRAGMA busy_timeout") as cursor:
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_write_on_this_thread_stores_and_commits_without_aiosqlite_s_thread(
    sessions: async_sessionmaker[AsyncSession], thread_calls: list[str]
) -> None:
    async with sessions.begin() as session:
        await create_run(session, "run-1")
    thread_calls.clear()
    async with sessions() as session:
        batch = Batch(
            claims=[(key_row("k", "run-2"), run_row("run-2"))],
            receipts=[receipt_row("run-1", 0)],
            ends=[{"run_id": "run-1", "status": "succeeded", "finished_at": _now()}],
        )
        won = await write_on(await session.connection(), batch, commit=True, here=True)
    assert won == {"run-2"}
    assert thread_calls == []
    async with sessions() as session:
        assert [r.seq for r in await ReceiptRepository(session).list_for_run("run-1")] == [0]
        run = await RunRepository(session).get("run-1")
        assert run is not None
        assert run.status == "succeeded"
        assert await RunRepository(session).get("run-2") is not None
        assert await _busy_timeout(session) == BUSY_TIMEOUT_MS


async def test_without_a_commit_the_write_stays_on_aiosqlite_s_thread(
    sessions: async_sessionmaker[AsyncSession], thread_calls: list[str]
) -> None:
    async with sessions.begin() as session:
        await create_run(session, "run-1")
    thread_calls.clear()
    async with sessions.begin() as session:
        batch = Batch(receipts=[receipt_row("run-1", 0)])
        await write_on(await session.connection(), batch, commit=False, here=True)
    assert thread_calls[0] == "execute_all"


async def test_a_failure_on_this_thread_is_a_sqlalchemy_error_and_leaves_nothing(
    sessions: async_sessionmaker[AsyncSession], thread_calls: list[str]
) -> None:
    async with sessions.begin() as session:
        await create_run(session, "run-1")
    batch = Batch(runs=[run_row("run-2")], receipts=[receipt_row("no-such-run", 0)])
    with pytest.raises(IntegrityError):
        async with sessions() as session:
            await write_on(await session.connection(), batch, commit=True, here=True)
    assert "execute_all" not in thread_calls  # not tried again there
    async with sessions() as session:
        assert await RunRepository(session).get("run-2") is None
        assert await _busy_timeout(session) == BUSY_TIMEOUT_MS


async def test_a_write_lock_held_elsewhere_sends_the_write_to_aiosqlite_s_thread(
    sqlite_url: str,
    sessions: async_sessionmaker[AsyncSession],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with sessions.begin() as session:
        await create_run(session, "run-1")
        await IdempotencyRepository(session).insert(
            caller="ops", key="held", request_digest="d",
            expires_at=datetime.now(UTC) + timedelta(days=1), run_id="run-1",
        )  # fmt: skip
    other = sqlite3.connect(Path(sqlite_url.split(":///", 1)[1]), check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process's writer, say, mid-transaction

    def lock_released_first(name: str) -> None:
        if name == "execute_all":
            # The try on this thread gave up at once; aiosqlite's thread would wait
            # up to the busy timeout, so the lock goes away while it waits.
            threading.Timer(0.05, other.rollback).start()

    sent = note_thread_calls(monkeypatch, lock_released_first)
    async with sessions() as session:
        batch = Batch(
            claims=[
                (key_row("held", "run-2"), run_row("run-2")),
                (key_row("free", "run-3"), run_row("run-3")),
            ],
            receipts=[receipt_row("run-1", 0)],
        )
        won = await write_on(await session.connection(), batch, commit=True, here=True)
    other.close()
    assert sent == ["execute_all"]
    assert won == {"run-3"}
    async with sessions() as session:
        assert [r.seq for r in await ReceiptRepository(session).list_for_run("run-1")] == [0]
        assert await RunRepository(session).get("run-2") is None
        assert await RunRepository(session).get("run-3") is not None
        assert await _busy_timeout(session) == BUSY_TIMEOUT_MS


async def test_claims_made_before_a_busy_commit_are_forgotten(sqlite_url: str) -> None:
    # In rollback-journal mode (not the service's WAL), a commit waits for readers:
    # a claim may have been made when the commit is refused, and is then undone.
    await upgrade_database(sqlite_url)
    path = Path(sqlite_url.split(":///", 1)[1])
    ours = sqlite3.connect(path)
    ours.execute("PRAGMA journal_mode=DELETE")
    ours.execute("PRAGMA busy_timeout = 250")
    reader = sqlite3.connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM runs").fetchone()  # holds its read lock
    won: set[str] = set()
    (claims,) = statements(Batch(claims=[(key_row("k", "run-2"), run_row("run-2"))]), won)
    assert isinstance(claims, SqliteClaims)
    try:
        assert not _executemany_here(ours, [claims], [])
    finally:
        reader.rollback()
        reader.close()
    assert claims.won == set()
    assert ours.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    assert ours.execute("SELECT count(*) FROM idempotency_keys").fetchone()[0] == 0
    ours.close()
