"""PostgreSQL: a committing batch is its whole transaction in one round trip,
and leaves its connection as it found it, whether it committed or failed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.store.database import create_database_engine, create_session_factory, create_writer_engine
from app.store.journal.batch import Batch
from app.store.journal.postgres import encoding as postgres_encoding
from app.store.journal.postgres.connection import ONE_RUN_COPY_MIN_ROWS
from app.store.journal.postgres.literals import Literals, NotALiteral
from app.store.journal.session import write_on
from app.store.migrate import upgrade_database
from app.store.repositories import ContractSnapshotRepository, RunRepository
from tests.store.factories import CONTRACT_HASH, T0, receipt_row, run_row

pytestmark = pytest.mark.postgres


@pytest.fixture
async def writer_engine(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    """The writer's engine: one connection, reused by every session."""
    await upgrade_database(postgres_url)
    shared = create_database_engine(postgres_url)
    engine = create_writer_engine(postgres_url, shared)
    async with create_session_factory(engine)() as session:
        await ContractSnapshotRepository(session).save_if_absent(CONTRACT_HASH, {}, 0)
        await session.commit()
    yield engine
    await engine.dispose()
    await shared.dispose()


async def _driver(session: AsyncSession) -> psycopg.AsyncConnection[Any]:
    raw = await (await session.connection()).get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, psycopg.AsyncConnection)
    return driver


async def _traced(session: AsyncSession, batch: Batch, trace: Path) -> list[list[str]]:
    """The protocol messages of committing `batch` (libpq's trace, one list per line)."""
    driver = await _driver(session)
    with trace.open("w") as sink:
        driver.pgconn.trace(sink.fileno())
        driver.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            await write_on(await session.connection(), batch, commit=True)
        finally:
            driver.pgconn.untrace()
    return _messages(trace)


def _messages(trace: Path) -> list[list[str]]:
    return [line.split("\t") for line in trace.read_text().splitlines()]


def _batch(run_id: str) -> Batch:
    return Batch(
        runs=[run_row(run_id)],
        receipts=[receipt_row(run_id, 0, id=f"{run_id}-r")],
        ends=[{"run_id": run_id, "status": "succeeded", "finished_at": T0}],
        audit=[{"run_id": run_id, "at": T0, "kind": "call.finished"}],
    )


async def _status(sessions: async_sessionmaker[AsyncSession], run_id: str) -> str | None:
    async with sessions() as session:
        run = await RunRepository(session).get(run_id)
        return None if run is None else run.status


async def test_a_committing_batch_is_sent_as_one_query(
    writer_engine: AsyncEngine, tmp_path: Path
) -> None:
    sessions = create_session_factory(writer_engine)
    trace = tmp_path / "protocol.trace"
    async with sessions() as session:
        sent = await _traced(session, _batch("traced"), trace)
        driver = await _driver(session)
        assert driver.autocommit is False
        assert driver.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    messages = [fields[2] for fields in sent if fields[0] == "F"]
    assert messages == ["Query"], trace.read_text()
    assert await _status(sessions, "traced") == "succeeded"


async def test_a_batch_with_a_value_not_written_as_a_literal_is_synced_once(
    writer_engine: AsyncEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its parameters bound instead, in one pipeline: still one round trip.
    def refused(_literals: Literals, value: object) -> bytes:
        raise NotALiteral(f"{value!r} refused")

    monkeypatch.setattr(Literals, "literal", refused)
    sessions = create_session_factory(writer_engine)
    trace = tmp_path / "protocol.trace"
    async with sessions() as session:
        sent = await _traced(session, _batch("traced"), trace)
    syncs = [fields for fields in sent if fields[0] == "F" and fields[2:3] == ["Sync"]]
    assert len(syncs) == 1, trace.read_text()
    assert "Query" not in [fields[2] for fields in sent if fields[0] == "F"]
    assert await _status(sessions, "traced") == "succeeded"


# From one row on, every insert goes by COPY, between the pipelines (the run's
# insert, sent before the receipt's COPY fails, is rolled back with it).
@pytest.mark.parametrize("copy_min_rows", [postgres_encoding.COPY_MIN_ROWS, 1])
async def test_after_a_failed_batch_the_connection_takes_transactions_again(
    writer_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, copy_min_rows: int
) -> None:
    monkeypatch.setattr(postgres_encoding, "COPY_MIN_ROWS", copy_min_rows)
    sessions = create_session_factory(writer_engine)
    for index in range(6):  # psycopg prepares a statement from its fifth use
        async with sessions() as session:
            await write_on(await session.connection(), _batch(f"before-{index}"), commit=True)
            before = await _driver(session)
    batch = Batch(runs=[run_row("left-out")], receipts=[receipt_row("no-such-run", 0)])
    with pytest.raises(IntegrityError) as failure:
        async with sessions() as session:
            await write_on(await session.connection(), batch, commit=True)
    # The error names the statements, never the rows' values (logged as it is).
    assert '"receipts"' in str(failure.value.statement)
    assert "no-such-run" not in str(failure.value.statement)
    assert await _status(sessions, "left-out") is None
    async with sessions() as session:
        driver = await _driver(session)
        assert driver is before  # rolled back and kept, not replaced
        assert driver.autocommit is False
        assert driver.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # In a transaction again: what is rolled back does not stay.
        await RunRepository(session).add_many([run_row("rolled-back")])
        await session.rollback()
    assert await _status(sessions, "rolled-back") is None
    for index in range(6):  # prepared statements still in place (or made again)
        async with sessions() as session:
            await write_on(await session.connection(), _batch(f"after-{index}"), commit=True)
    assert await _status(sessions, "after-5") == "succeeded"


async def test_a_batch_joins_the_transaction_its_session_already_opened(
    writer_engine: AsyncEngine,
) -> None:
    sessions = create_session_factory(writer_engine)
    async with sessions() as session:
        await session.execute(text("SELECT 1"))
        await RunRepository(session).add_many([run_row("first")])
        await write_on(await session.connection(), _batch("second"), commit=True)
    assert await _status(sessions, "first") == "running"
    assert await _status(sessions, "second") == "succeeded"


def _exchanges(trace: list[list[str]]) -> int:
    """Exchanges with the server that the client waited for: each ends with the
    server's ReadyForQuery (a pipeline's sync, a COPY, a simple query)."""
    return len([fields for fields in trace if fields[0] == "B" and fields[2] == "ReadyForQuery"])


def _copying(
    monkeypatch: pytest.MonkeyPatch, engine: AsyncEngine, tmp_path: Path, *, min_rows: int
) -> tuple[async_sessionmaker[AsyncSession], Path]:
    """Sessions whose inserts of `min_rows` rows or more go by COPY, and a trace file."""
    monkeypatch.setattr(postgres_encoding, "COPY_MIN_ROWS", min_rows)
    return create_session_factory(engine), tmp_path / "protocol.trace"


async def _count(sessions: async_sessionmaker[AsyncSession], table: str, run_id: str) -> int:
    async with sessions() as session:
        found = await session.execute(
            text(f"SELECT count(*) FROM {table} WHERE run_id = :run_id"), {"run_id": run_id}
        )
        return int(found.scalar_one())


def _large_batch(run_id: str) -> Batch:
    return Batch(
        runs=[run_row(run_id)],
        receipts=[receipt_row(run_id, seq, id=f"{run_id}-{seq}") for seq in range(3)],
        audit=[{"run_id": run_id, "at": T0, "kind": "call.finished"}] * 3,
        ends=[{"run_id": run_id, "status": "succeeded", "finished_at": T0}],
    )


async def test_large_inserts_go_by_copy_between_pipelines_in_one_transaction(
    writer_engine: AsyncEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions, trace = _copying(monkeypatch, writer_engine, tmp_path, min_rows=3)
    async with sessions() as session:
        sent = await _traced(session, _large_batch("copied"), trace)
        driver = await _driver(session)
        assert driver.autocommit is False
        assert driver.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    copies = [fields for fields in sent if fields[2] == "Query" and "COPY" in fields[3]]
    assert [fields[3].split()[1] for fields in copies] == ['"receipts"', '"audit_events"']
    assert "FORMAT BINARY" in copies[0][3]
    # BEGIN with the run's insert, the two COPYs, the end with COMMIT: four exchanges.
    assert _exchanges(sent) == 4, trace.read_text()
    assert await _status(sessions, "copied") == "succeeded"
    assert await _count(sessions, "receipts", "copied") == 3
    assert await _count(sessions, "audit_events", "copied") == 3


async def test_receipts_all_of_one_run_go_by_copy_from_fewer_rows(
    writer_engine: AsyncEngine, tmp_path: Path
) -> None:
    sessions = create_session_factory(writer_engine)
    copied: dict[str, list[str]] = {}
    least = ONE_RUN_COPY_MIN_ROWS
    for name, count in (("named", least), ("default", least - 1)):
        receipts = [receipt_row(name, seq, id=f"{name}-{seq}") for seq in range(count)]
        batch = Batch(runs=[run_row(name)], receipts=receipts)
        async with sessions() as session:
            sent = await _traced(session, batch, tmp_path / f"{name}.trace")
        copied[name] = [
            fields[3].split()[1]
            for fields in sent
            if fields[0] == "F" and fields[2] == "Query" and "COPY" in fields[3]
        ]
        assert await _count(sessions, "receipts", name) == count
    # By COPY from `ONE_RUN_COPY_MIN_ROWS` receipts of one run, in the JSON batch below.
    assert copied == {"named": ['"receipts"'], "default": []}


async def test_a_copy_in_a_transaction_already_open_costs_no_pipeline_before_it(
    writer_engine: AsyncEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions, trace = _copying(monkeypatch, writer_engine, tmp_path, min_rows=1)
    async with sessions() as session:
        await RunRepository(session).add_many([run_row("open")])
        receipts = [receipt_row("open", 0, id="open-0")]
        sent = await _traced(session, Batch(receipts=receipts), trace)
    assert _exchanges(sent) == 2, trace.read_text()  # the COPY, then COMMIT
    assert await _status(sessions, "open") == "running"
