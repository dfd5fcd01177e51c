"""A migrated database with one running run, and receipts for it: for writer tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.engine.receipt import Receipt, Status
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor
from app.service.runs.records import run_start_row
from app.store.database import (
    create_database_engine,
    create_session_factory,
    postgres_conninfo,
    sqlite_file,
    sqlite_pragmas,
)
from app.store.journal import queue as journal_queue
from app.store.journal.batch import Batch
from app.store.journal.postgres.backend import PostgresProcess
from app.store.journal.postgres.process import PostgresWriterProcess
from app.store.journal.records import receipt_row
from app.store.journal.sqlite.backend import SqliteProcess
from app.store.journal.sqlite.process import SqliteWriterProcess
from app.store.journal.writer import GroupCommitWriter
from app.store.migrate import upgrade_database
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository

HASH = "sha256:" + "a" * 64
# Either database's writer process.
WriterProcessOf = SqliteWriterProcess | PostgresWriterProcess
RUN_ID = "run-1"


class CommitCounter:
    """Counts the commits made on `engine` from now on (SQLAlchemy's `commit` event)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.count = 0
        event.listen(engine.sync_engine, "commit", self._committed)

    def _committed(self, _connection: object) -> None:
        self.count += 1


@asynccontextmanager
async def started_writer_process(database_url: str) -> AsyncIterator[WriterProcessOf]:
    """The database's writer process (SQLite's or PostgreSQL's), started, closed on the
    way out."""
    path = sqlite_file(database_url)
    conninfo = postgres_conninfo(database_url)
    process: WriterProcessOf
    if path is not None:
        process = SqliteWriterProcess(path, sqlite_pragmas())
    else:
        assert conninfo is not None
        process = PostgresWriterProcess(conninfo)
    try:
        await process.start()
        yield process
    finally:
        await process.aclose()


@asynccontextmanager
async def engine_with_a_run(database_url: str) -> AsyncIterator[AsyncEngine]:
    """The database at head, holding a contract snapshot and the running run RUN_ID."""
    await upgrade_database(database_url)
    engine = create_database_engine(database_url)
    try:
        async with create_session_factory(engine).begin() as session:
            await ContractSnapshotRepository(session).save_if_absent(HASH, {}, 0)
            await RunRepository(session).create(
                id=RUN_ID, kind="sequential", owner="o", contract_hash=HASH, instance_id="i"
            )
        yield engine
    finally:
        await engine.dispose()


@asynccontextmanager
async def running_writer(engine: AsyncEngine, **options: Any) -> AsyncIterator[GroupCommitWriter]:
    """A started `GroupCommitWriter(sessions of engine, **options)`, closed on the way out."""
    writer = GroupCommitWriter(create_session_factory(engine), **options)
    writer.start()
    try:
        yield writer
    finally:
        await writer.aclose()


def succeeded_receipt(
    seq: int,
    output: object,
    *,
    receipt_id: str | None = None,
    redactor: Redactor = DEFAULT_REDACTOR,
) -> Receipt:
    """A succeeded receipt of RUN_ID at `seq`."""
    now = datetime.now(UTC)
    return Receipt(
        receipt_id=receipt_id or f"r{seq}",
        run_id=RUN_ID,
        seq=seq,
        owner="o",
        tool="t",
        call_key=str(seq),
        item_key=None,
        parallel_batch_id=None,
        status=Status.SUCCEEDED,
        output=output,
        error=None,
        attempts=1,
        cache_hit=False,
        cache_source_receipt_id=None,
        fingerprint="sha256:" + "b" * 64,
        definition_hash=HASH,
        idempotency_key=f"{RUN_ID}:{seq}",
        parent_receipt_id=None,
        control=None,
        admission_wait_ms=0.0,
        started_at=now,
        finished_at=now,
        duration_ms=0.1,
        redactor=redactor,
    )


def started_run(run_id: str, *, caller: str | None = None) -> dict[str, Any]:
    """A sequential run's row for `GroupCommitWriter.start_run`, under HASH."""
    return run_start_row(
        run_id=run_id,
        kind="sequential",
        owner="o",
        contract_hash=HASH,
        instance_id="i",
        caller=caller,
        parallel_batch_id=None,
        request_digest=None,
    )


async def listeners_read_rows_only_when_they_read(
    engine: AsyncEngine,
    writer_engine: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
    **options: Any,
) -> None:
    """A writer that sends receipts as driver tuples (`options`) makes their rows for
    its listeners only when one reads them, and those are the rows it stored."""
    made: list[str] = []

    def counted(receipt: Receipt, max_output_bytes: int) -> dict[str, Any]:
        made.append(receipt.receipt_id)
        return receipt_row(receipt, max_output_bytes)

    monkeypatch.setattr(journal_queue, "receipt_row", counted)
    batches: list[Sequence[dict[str, Any]]] = []
    secret = "Bearer sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    async with running_writer(writer_engine, **options) as writer:
        writer.add_listener(batches.append)
        await asyncio.gather(
            *(writer.submit(succeeded_receipt(s, {"n": s, "auth": secret})) for s in range(3))
        )
        assert made == []  # committed as driver tuples; no listener read a row yet
        rows = [dict(row) for batch in batches for row in batch]
    assert sorted(made) == ["r0", "r1", "r2"]
    async with create_session_factory(engine)() as session:
        stored = await ReceiptRepository(session).list_for_run(RUN_ID)
    assert [(row["id"], row["output"], row["created_at"]) for row in rows] == [
        (receipt.id, receipt.output, receipt.created_at) for receipt in stored
    ]
    assert all(row["output"]["auth"] == "Bearer [REDACTED]" for row in rows)


async def through_process(process: WriterProcessOf, batch: Batch) -> set[str]:
    """Write `batch` in the database's writer process, as its backend does (a batch
    that goes through a session is not for here): the runs whose key was claimed."""
    no_sessions = cast(async_sessionmaker[AsyncSession], None)
    if isinstance(process, SqliteWriterProcess):
        return await SqliteProcess(no_sessions, process).write(batch)
    return await PostgresProcess(no_sessions, process).write(batch)
