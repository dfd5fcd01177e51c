"""The group commit through the database's writer process (SQLite's, PostgreSQL's):
the same transactions, and a batch written exactly once when the process ends
around its commit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.engine.ports import CachedOutput
from app.service.runs.records import run_end
from app.store.database import create_session_factory
from app.store.journal.process import WriterProcess, WriterProcessGone
from app.store.journal.sqlite.process import SqliteWriterProcess
from app.store.repositories.cache import CacheRepository
from app.store.repositories.idempotency import IdempotencyRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.observability.metrics_reading import value
from tests.store.factories import key_row
from tests.writer_support import (
    HASH,
    RUN_ID,
    CommitCounter,
    WriterProcessOf,
    listeners_read_rows_only_when_they_read,
    running_writer,
    started_run,
    started_writer_process,
    succeeded_receipt,
)

STARTS = {
    "sqlite": "toolloop_sqlite_writer_starts_total",
    "postgresql": "toolloop_postgres_writer_starts_total",
}


@pytest.fixture
async def process(database_url: str, run_engine: AsyncEngine) -> AsyncIterator[WriterProcessOf]:
    async with started_writer_process(database_url) as process:
        yield process


def _through(process: WriterProcessOf) -> dict[str, Any]:
    """The writer's option that sends its transactions to `process`."""
    if isinstance(process, SqliteWriterProcess):
        return {"sqlite_process": process}
    return {"postgres_process": process}


async def _stored(run_engine: AsyncEngine, run_id: str = RUN_ID) -> list[tuple[str, int, Any]]:
    async with create_session_factory(run_engine)() as session:
        stored = await ReceiptRepository(session).list_for_run(run_id)
    return [(r.id, r.seq, r.output) for r in stored]


async def test_runs_receipts_keys_and_ends_commit_in_the_process_together(
    run_engine: AsyncEngine, process: WriterProcessOf
) -> None:
    here = CommitCounter(run_engine)
    checkouts: list[object] = []
    event.listen(run_engine.sync_engine, "checkout", lambda *args: checkouts.append(args))
    key = key_row("k", "run-2")
    async with running_writer(run_engine, linger_s=0.005, **_through(process)) as writer:
        claimed = writer.claim_run(key, started_run("run-2", caller="ops"))
        receipts = [
            writer.submit(succeeded_receipt(seq, {"n": seq})._replace(run_id="run-2"))
            for seq in range(50)
        ]
        assert await claimed is True
        await asyncio.gather(*receipts)
        answer = {
            "caller": "ops",
            "key": "k",
            "state": "completed",
            "response_status": 200,
            "response_body": {"ok": True},
            "run_id": None,
        }
        ended = writer.end_run_with(
            receipts, run_end("run-2", status="succeeded", call_count=50), answer
        )
        assert ended is not None
        await ended
        # (Before the writer closes: its last chain checkpoint goes through a session.)
        assert here.count == 0  # nothing committed through this process's connection
        assert checkouts == []  # nor was one of its connections taken for the batches
    assert 1 <= process.commits < 10
    assert [seq for _, seq, _ in await _stored(run_engine, "run-2")] == list(range(50))
    async with create_session_factory(run_engine)() as session:
        run = await RunRepository(session).get("run-2")
        stored_key = await IdempotencyRepository(session).get("ops", "k")
    assert run is not None
    assert run.status == "succeeded"
    assert stored_key is not None
    assert (stored_key.state, stored_key.response_body) == ("completed", {"ok": True})


async def test_a_batch_with_cache_entries_is_written_in_this_process(
    run_engine: AsyncEngine, process: WriterProcessOf
) -> None:
    # Cache upserts and superseded receipts take statements of their own: such a
    # batch stays on this process's connection, in one transaction.
    here = CommitCounter(run_engine)
    now = datetime.now(UTC)
    entry = CachedOutput("sha256:" + "c" * 64, HASH, "t", {"n": 0}, "r0", now, None)
    async with running_writer(run_engine, **_through(process)) as writer:
        await writer.submit(succeeded_receipt(0, {"n": 0}), entry)
    assert here.count == 1
    assert process.commits == 0
    async with create_session_factory(run_engine)() as session:
        assert await CacheRepository(session).get(entry.fingerprint, HASH, now) is not None
    assert await _stored(run_engine) == [("r0", 0, {"n": 0})]


@pytest.mark.parametrize("ends", ["before its commit", "after its commit"])
async def test_a_batch_is_written_once_when_the_process_ends_around_its_commit(
    run_engine: AsyncEngine,
    process: WriterProcessOf,
    monkeypatch: pytest.MonkeyPatch,
    ends: str,
) -> None:
    kind = type(process)
    original = kind._exchange
    ended: list[int] = []

    async def ending(self: WriterProcess, child: asyncio.subprocess.Process, payload: bytes) -> Any:
        if ended:
            return await original(self, child, payload)
        ended.append(child.pid)
        if ends == "before its commit":
            child.kill()
            await child.wait()
            return await original(self, child, payload)
        await original(self, child, payload)  # committed; the answer is lost
        child.kill()
        await child.wait()
        raise WriterProcessGone(f"{self.name} ended (killed)")

    monkeypatch.setattr(kind, "_exchange", ending)
    starts = value(STARTS[run_engine.dialect.name])
    async with running_writer(run_engine, **_through(process)) as writer:
        await asyncio.gather(*(writer.submit(succeeded_receipt(s, {"n": s})) for s in range(3)))
    assert len(ended) == 1
    assert await _stored(run_engine) == [(f"r{s}", s, {"n": s}) for s in range(3)]
    if ends == "before its commit":  # retried through a new process
        assert (process.started, process.commits) == (2, 1)
    else:  # the retry found the batch stored and sent nothing (its answer was lost)
        assert (process.started, process.commits) == (1, 0)
    assert (
        value(STARTS[run_engine.dialect.name]) == starts + process.started
    )  # the first start, and the restart


async def test_a_refused_batch_fails_its_waiters_with_the_driver_s_error(
    run_engine: AsyncEngine, process: WriterProcessOf, caplog: pytest.LogCaptureFixture
) -> None:
    orphan = succeeded_receipt(0, {"n": 0})._replace(run_id="no-such-run")
    async with running_writer(run_engine, **_through(process)) as writer:
        with pytest.raises(DBAPIError, match=r"(?i)foreign key"):
            await writer.submit(orphan)
        assert "group commit of 1 receipts failed" in caplog.text
        await writer.submit(succeeded_receipt(1, {"n": 1}))  # the next batch commits
    assert await _stored(run_engine) == [("r1", 1, {"n": 1})]


async def test_listeners_read_the_rows_the_process_stored_and_only_when_they_read(
    run_engine: AsyncEngine, process: WriterProcessOf, monkeypatch: pytest.MonkeyPatch
) -> None:
    await listeners_read_rows_only_when_they_read(
        run_engine, run_engine, monkeypatch, **_through(process)
    )
