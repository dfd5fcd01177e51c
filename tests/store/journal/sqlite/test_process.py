"""SQLite batches written by the writer process: the same rows as in this process,
errors as the driver's, and a process that ends (killed, cancelled, closed)."""

from __future__ import annotations

import io
import os
import pickle
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import create_session_factory, sqlite_pragmas
from app.store.journal.batch import Batch
from app.store.journal.outage import is_transient
from app.store.journal.session import write_on
from app.store.journal.sqlite import statements as sqlite_statements
from app.store.journal.sqlite.process import SqliteWriterProcess, WriterProcessGone
from tests.store.factories import (
    audit_row,
    key_row,
    migrated_engine,
    receipt_row,
    run_end_row,
    run_row,
)
from tests.writer_support import started_writer_process, through_process


def _path(url: str) -> Path:
    return Path(url.split(":///", 1)[1])


@pytest.fixture
async def engine(sqlite_url: str) -> AsyncIterator[AsyncEngine]:
    async with migrated_engine(sqlite_url) as engine:
        yield engine


@pytest.fixture
async def process(sqlite_url: str, engine: AsyncEngine) -> AsyncIterator[SqliteWriterProcess]:
    async with started_writer_process(sqlite_url) as process:
        assert isinstance(process, SqliteWriterProcess)
        yield process


def _table(path: Path, table: str) -> list[tuple[Any, ...]]:
    """The table's rows, less the run every database here starts with."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f'SELECT * FROM "{table}" ORDER BY 1').fetchall()
    return [row for row in rows if "run-0" not in row]


def _batch(run_id: str) -> Batch:
    return Batch(
        runs=[run_row(run_id)],
        receipts=[receipt_row(run_id, 0), receipt_row(run_id, 1, output=None)],
        audit=[audit_row(run_id, "é\u2028")],
        ends=[run_end_row(run_id, 2)],
    )


async def test_a_batch_written_by_the_process_reads_back_as_one_written_here(
    tmp_path: Path, engine: AsyncEngine, process: SqliteWriterProcess, sqlite_url: str
) -> None:
    here_url = f"sqlite+aiosqlite:///{tmp_path / 'here.db'}"
    async with migrated_engine(here_url) as here, create_session_factory(here)() as session:
        await write_on(await session.connection(), _batch("run-1"), commit=True)
    await through_process(process, _batch("run-1"))

    assert process.commits == 1
    assert process.pid not in (None, os.getpid())
    for table in ("runs", "receipts", "audit_events"):
        assert _table(_path(sqlite_url), table) == _table(_path(here_url), table)
    assert len(_table(_path(sqlite_url), "receipts")) == 2


async def test_claims_in_the_process_say_which_runs_were_inserted(
    sqlite_url: str, process: SqliteWriterProcess
) -> None:
    key = key_row("k", "run-1")
    won = await through_process(process, Batch(claims=[(key, run_row("run-1"))]))
    again = Batch(claims=[({**key, "run_id": "run-2"}, run_row("run-2"))])
    held = await through_process(process, again)

    assert won == {"run-1"}
    assert held == set()
    stored = {row[0] for row in _table(_path(sqlite_url), "runs")}
    assert "run-1" in stored
    assert "run-2" not in stored


async def test_a_failed_statement_is_the_driver_s_error_and_rolls_the_batch_back(
    sqlite_url: str, process: SqliteWriterProcess
) -> None:
    batch = Batch(runs=[run_row("run-1")], receipts=[receipt_row("missing", 0)])

    with pytest.raises(IntegrityError) as raised:
        await through_process(process, batch)

    assert isinstance(raised.value.orig, sqlite3.IntegrityError)
    assert "FOREIGN KEY" in str(raised.value.orig)
    assert raised.value.statement.startswith('INSERT INTO "receipts"')
    assert not is_transient(raised.value)
    assert "run-1" not in {row[0] for row in _table(_path(sqlite_url), "runs")}
    assert process.commits == 0
    await through_process(process, _batch("run-2"))  # the same process goes on
    assert process.started == 1


async def test_a_database_the_process_cannot_open_fails_its_start(tmp_path: Path) -> None:
    process = SqliteWriterProcess(tmp_path / "absent" / "toolloop.db", sqlite_pragmas())
    with pytest.raises(WriterProcessGone, match="could not open"):
        await process.start()
    await process.aclose()
    assert not (tmp_path / "absent").exists()


def test_a_request_holding_anything_but_plain_data_is_refused() -> None:
    payload = pickle.dumps(([(os.getcwd, [])], False))
    unpickler = sqlite_statements._Requests(io.BytesIO(payload))
    with pytest.raises(pickle.UnpicklingError, match="not part of a writer request"):
        unpickler.load()
