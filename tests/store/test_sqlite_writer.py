"""SQLite batches written by the writer process: the same rows as in this process,
errors as the driver's, and a process that ends (killed, cancelled, closed)."""

from __future__ import annotations

import asyncio
import io
import os
import pickle
import signal
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.service.outage import is_transient
from app.store import sqlite_statements
from app.store.database import create_database_engine, create_session_factory, sqlite_pragmas
from app.store.migrate import upgrade_database
from app.store.repositories.bulk import BulkWrite
from app.store.sqlite_writer import SqliteWriterProcess, WriterProcessGone
from tests.store.factories import T0, create_run, key_row, receipt_row, run_row


def _path(url: str) -> Path:
    return Path(url.split(":///", 1)[1])


async def _migrated(url: str) -> AsyncEngine:
    await upgrade_database(url)
    engine = create_database_engine(url)
    async with create_session_factory(engine).begin() as session:
        await create_run(session, "run-0")  # the contract snapshot the runs below need
    return engine


@pytest.fixture
async def engine(sqlite_url: str) -> AsyncIterator[AsyncEngine]:
    engine = await _migrated(sqlite_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def process(sqlite_url: str, engine: AsyncEngine) -> AsyncIterator[SqliteWriterProcess]:
    process = SqliteWriterProcess(_path(sqlite_url), sqlite_pragmas())
    await process.start()
    yield process
    await process.aclose()


def _table(path: Path, table: str) -> list[tuple[Any, ...]]:
    """The table's rows, less the run every database here starts with."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f'SELECT * FROM "{table}" ORDER BY 1').fetchall()
    return [row for row in rows if "run-0" not in row]


def _batch(run_id: str) -> BulkWrite:
    audit = [
        {
            "run_id": run_id,
            "at": T0 + timedelta(microseconds=7),
            "kind": "call.finished",
            "caller": None,
            "tool": "transform",
            "call_key": "c0",
            "item_key": None,
            "detail": {"seq": 0, "status": "succeeded", "text": "é\u2028"},
        }
    ]
    return (
        BulkWrite()
        .add_runs([run_row(run_id)])
        .add_receipts([receipt_row(run_id, 0), receipt_row(run_id, 1, output=None)])
        .add_audit(audit)
        .finish_runs(
            [
                {
                    "run_id": run_id,
                    "status": "succeeded",
                    "outcome": {"n": 2},
                    "call_count": 2,
                    "finished_at": T0 + timedelta(seconds=3),
                }
            ]
        )
    )


async def test_a_batch_written_by_the_process_reads_back_as_one_written_here(
    tmp_path: Path, engine: AsyncEngine, process: SqliteWriterProcess, sqlite_url: str
) -> None:
    here_url = f"sqlite+aiosqlite:///{tmp_path / 'here.db'}"
    here = await _migrated(here_url)
    try:
        async with create_session_factory(here)() as session:
            await _batch("run-1").execute(session, commit=True)
    finally:
        await here.dispose()
    await _batch("run-1").execute_in(process)

    assert process.commits == 1
    assert process.pid not in (None, os.getpid())
    for table in ("runs", "receipts", "audit_events"):
        assert _table(_path(sqlite_url), table) == _table(_path(here_url), table)
    assert len(_table(_path(sqlite_url), "receipts")) == 2


async def test_claims_in_the_process_say_which_runs_were_inserted(
    sqlite_url: str, process: SqliteWriterProcess
) -> None:
    key = key_row("k", "run-1")
    first = BulkWrite()
    won = first.claim_runs([key], [run_row("run-1")])
    await first.execute_in(process)
    again = BulkWrite()
    held = again.claim_runs([{**key, "run_id": "run-2"}], [run_row("run-2")])
    await again.execute_in(process)

    assert won == {"run-1"}
    assert held == set()
    stored = {row[0] for row in _table(_path(sqlite_url), "runs")}
    assert "run-1" in stored
    assert "run-2" not in stored


async def test_a_failed_statement_is_the_driver_s_error_and_rolls_the_batch_back(
    sqlite_url: str, process: SqliteWriterProcess
) -> None:
    batch = BulkWrite().add_runs([run_row("run-1")]).add_receipts([receipt_row("missing", 0)])

    with pytest.raises(IntegrityError) as raised:
        await batch.execute_in(process)

    assert isinstance(raised.value.orig, sqlite3.IntegrityError)
    assert "FOREIGN KEY" in str(raised.value.orig)
    assert raised.value.statement.startswith('INSERT INTO "receipts"')
    assert not is_transient(raised.value)
    assert "run-1" not in {row[0] for row in _table(_path(sqlite_url), "runs")}
    assert process.commits == 0
    await _batch("run-2").execute_in(process)  # the same process goes on
    assert process.started == 1


async def test_a_process_that_ended_between_batches_is_started_again(
    sqlite_url: str, process: SqliteWriterProcess
) -> None:
    first = process.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    for _ in range(500):  # until asyncio's child watcher reaps it
        if process.pid is None:
            break
        await asyncio.sleep(0.01)
    assert process.pid is None

    await _batch("run-1").execute_in(process)

    assert process.started == 2
    assert process.pid not in (None, first)
    assert len(_table(_path(sqlite_url), "receipts")) == 2


async def test_a_process_that_ends_while_a_batch_is_in_flight_is_a_dropped_connection(
    sqlite_url: str, process: SqliteWriterProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = SqliteWriterProcess._exchange

    async def killed_first(
        self: SqliteWriterProcess, child: asyncio.subprocess.Process, payload: bytes
    ) -> Any:
        child.kill()
        await child.wait()
        return await original(self, child, payload)

    monkeypatch.setattr(SqliteWriterProcess, "_exchange", killed_first)
    with pytest.raises(DBAPIError) as raised:
        await _batch("run-1").execute_in(process)
    monkeypatch.undo()

    assert raised.value.connection_invalidated
    assert is_transient(raised.value)  # the group commit retries it
    assert "ended" in str(raised.value.orig)
    await _batch("run-1").execute_in(process)  # a new process: nothing was written before
    assert process.started == 2
    assert len(_table(_path(sqlite_url), "receipts")) == 2


async def test_a_batch_cancelled_in_flight_ends_its_process(
    sqlite_url: str, process: SqliteWriterProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = SqliteWriterProcess._exchange
    sent = asyncio.Event()

    async def stalled(
        self: SqliteWriterProcess, child: asyncio.subprocess.Process, payload: bytes
    ) -> Any:
        sent.set()
        await asyncio.Event().wait()  # cancelled here, between request and answer
        return await original(self, child, payload)  # pragma: no cover

    monkeypatch.setattr(SqliteWriterProcess, "_exchange", stalled)
    first = process.pid
    task = asyncio.create_task(_batch("run-1").execute_in(process))
    await sent.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()

    assert process.pid != first  # killed: the pipe could hold half a frame
    await _batch("run-1").execute_in(process)
    assert process.started == 2


async def test_a_database_the_process_cannot_open_fails_its_start(tmp_path: Path) -> None:
    process = SqliteWriterProcess(tmp_path / "absent" / "toolloop.db", sqlite_pragmas())
    with pytest.raises(WriterProcessGone, match="could not open"):
        await process.start()
    await process.aclose()
    assert not (tmp_path / "absent").exists()


async def test_a_closed_process_ends_and_takes_no_more_batches(
    process: SqliteWriterProcess,
) -> None:
    pid = process.pid
    assert pid is not None

    await process.aclose()

    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(DBAPIError, match="closed"):
        await _batch("run-1").execute_in(process)


def test_a_request_holding_anything_but_plain_data_is_refused() -> None:
    payload = pickle.dumps(([(os.getcwd, [])], False))
    unpickler = sqlite_statements._Requests(io.BytesIO(payload))
    with pytest.raises(pickle.UnpicklingError, match="not part of a writer request"):
        unpickler.load()


async def test_a_batch_larger_than_the_pipe_s_buffer_goes_through_whole(
    sqlite_url: str, process: SqliteWriterProcess
) -> None:
    big = "x" * (4 * 1024 * 1024)  # far past a pipe's 64 KiB: written as the process reads
    batch = (
        BulkWrite()
        .add_runs([run_row("run-1")])
        .add_receipts([receipt_row("run-1", seq, output={"big": big}) for seq in range(3)])
    )

    await batch.execute_in(process)

    with sqlite3.connect(_path(sqlite_url)) as conn:
        sizes = conn.execute("SELECT length(output) FROM receipts ORDER BY seq").fetchall()
    assert sizes == [(len(big) + len('{"big":""}'),)] * 3
