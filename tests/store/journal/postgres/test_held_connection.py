"""On PostgreSQL the group commit keeps its engine's connection from one batch to the
next, gives it back before any session of its own and on a failure, and still
retries a batch whose connection dropped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.engine.ports import CachedOutput
from app.store.database import create_session_factory, create_writer_engine
from app.store.journal.batch import Batch
from app.store.journal.postgres import backend as postgres_backend
from app.store.repositories.cache import CacheRepository
from app.store.repositories.receipts import ReceiptRepository
from tests.writer_support import (
    HASH,
    RUN_ID,
    engine_with_a_run,
    listeners_read_rows_only_when_they_read,
    running_writer,
    succeeded_receipt,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
async def engine(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    async with engine_with_a_run(postgres_url) as engine:
        yield engine


@pytest.fixture
async def writer_engine(postgres_url: str, engine: AsyncEngine) -> AsyncIterator[AsyncEngine]:
    """The writer's own engine, as the runtime makes it: one connection, no ping."""
    writer_engine = create_writer_engine(postgres_url, engine)
    yield writer_engine
    await writer_engine.dispose()


class Checkouts:
    """Connections taken from the engine's pool, and how many are out now."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.taken = 0
        self.out = 0
        event.listen(engine.sync_engine, "checkout", self._checkout)
        event.listen(engine.sync_engine, "checkin", self._checkin)

    def _checkout(self, *_: object) -> None:
        self.taken += 1
        self.out += 1

    def _checkin(self, *_: object) -> None:
        self.out -= 1


async def _stored(engine: AsyncEngine) -> list[int]:
    async with create_session_factory(engine)() as session:
        return [row.seq for row in await ReceiptRepository(session).list_for_run(RUN_ID)]


async def test_batches_share_one_connection_kept_until_the_writer_closes(
    engine: AsyncEngine, writer_engine: AsyncEngine
) -> None:
    checkouts = Checkouts(writer_engine)
    async with running_writer(writer_engine) as writer:
        for seq in range(5):  # one batch each: each waits for its commit
            await writer.submit(succeeded_receipt(seq, {"n": seq}))
        # One more checkout before the first batch: the run's chain head, read once
        # (it was stored before the writer started).
        assert (checkouts.taken, checkouts.out) == (2, 1)
    assert checkouts.out == 0  # given back when the writer closed
    assert await _stored(engine) == list(range(5))


async def test_a_failed_batch_gives_its_connection_back_and_the_next_commits(
    engine: AsyncEngine, writer_engine: AsyncEngine
) -> None:
    checkouts = Checkouts(writer_engine)
    orphan = succeeded_receipt(0, {"n": 0})._replace(run_id="no-such-run")
    async with running_writer(writer_engine) as writer:
        with pytest.raises(DBAPIError, match="foreign key"):
            await writer.submit(orphan)
        assert checkouts.out == 0
        await writer.submit(succeeded_receipt(1, {"n": 1}))
    # Each batch after a read of its run's chain head (neither run started here).
    assert checkouts.taken == 4
    assert await _stored(engine) == [1]


async def test_a_batch_needing_a_session_gets_the_writer_s_only_connection(
    engine: AsyncEngine, writer_engine: AsyncEngine
) -> None:
    # Cache entries are written through a session of the writer's: its pool holds one
    # connection, which the writer gives back first (or this would wait forever).
    now = datetime.now(UTC)
    entry = CachedOutput("sha256:" + "c" * 64, HASH, "t", {"n": 1}, "r1", now, None)
    async with running_writer(writer_engine) as writer:
        await writer.submit(succeeded_receipt(0, {"n": 0}))
        async with asyncio.timeout(20):
            await writer.submit(succeeded_receipt(1, {"n": 1}), entry)
        await writer.submit(succeeded_receipt(2, {"n": 2}))
    async with create_session_factory(engine)() as session:
        assert await CacheRepository(session).get(entry.fingerprint, HASH, now) is not None
    assert await _stored(engine) == [0, 1, 2]


async def test_a_batch_whose_held_connection_dropped_is_retried_and_stored_once(
    engine: AsyncEngine, writer_engine: AsyncEngine
) -> None:
    checkouts = Checkouts(writer_engine)
    async with running_writer(writer_engine) as writer:
        await writer.submit(succeeded_receipt(0, {"n": 0}))
        # The server ends the writer's connection between two batches.
        async with engine.connect() as admin:
            ended = await admin.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            assert ended.scalar_one() >= 1
        async with asyncio.timeout(20):
            await writer.submit(succeeded_receipt(1, {"n": 1}))
        assert checkouts.taken >= 2  # a new connection for the retry
    assert await _stored(engine) == [0, 1]


@pytest.mark.parametrize("lost", ["before its commit", "after its commit"])
async def test_a_batch_whose_answer_is_lost_is_stored_exactly_once(
    engine: AsyncEngine,
    writer_engine: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
    lost: str,
) -> None:
    real = postgres_backend.write_on
    failed: list[str] = []

    async def losing(connection: AsyncConnection, batch: Batch, *, commit: bool) -> set[str]:
        if not failed:
            failed.append(lost)
            if lost == "after its commit":
                await real(connection, batch, commit=commit)
            raise OperationalError(
                "COMMIT", {}, psycopg.OperationalError("server closed the connection")
            )
        return await real(connection, batch, commit=commit)

    monkeypatch.setattr(postgres_backend, "write_on", losing)
    async with running_writer(writer_engine) as writer:
        await asyncio.gather(*(writer.submit(succeeded_receipt(s, {"n": s})) for s in range(3)))
    assert failed == [lost]
    assert await _stored(engine) == [0, 1, 2]


async def test_receipts_go_as_driver_tuples_and_listeners_read_rows_only_when_they_read(
    engine: AsyncEngine, writer_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await listeners_read_rows_only_when_they_read(engine, writer_engine, monkeypatch)
