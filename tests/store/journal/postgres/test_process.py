"""PostgreSQL batches written by the writer process: the same rows as in this
process, errors as the driver's, a lost connection, and a process that ends
(killed, cancelled, closed)."""

from __future__ import annotations

import os
import pickle
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import (
    create_session_factory,
    postgres_conninfo,
)
from app.store.journal.batch import Batch
from app.store.journal.outage import is_transient
from app.store.journal.postgres import statements as postgres_statements
from app.store.journal.postgres.connection import steps
from app.store.journal.postgres.process import PostgresStatementFailed, PostgresWriterProcess
from app.store.journal.rows import encode, layout_of
from app.store.journal.session import write_on
from app.store.models import Receipt
from tests.conftest import _scratch_postgres_database
from tests.store.factories import (
    T0,
    audit_row,
    key_row,
    migrated_engine,
    receipt_row,
    run_end_row,
    run_row,
)
from tests.writer_support import started_writer_process, through_process

pytestmark = pytest.mark.postgres

TABLES = {
    "runs": "id",
    "receipts": "id",
    "audit_events": "id",
    "idempotency_keys": '"caller", "key"',
}


def _conninfo(url: str) -> str:
    conninfo = postgres_conninfo(url)
    assert conninfo is not None
    return conninfo


@pytest.fixture
async def engine(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    async with migrated_engine(postgres_url) as engine:
        yield engine


@pytest.fixture
async def process(postgres_url: str, engine: AsyncEngine) -> AsyncIterator[PostgresWriterProcess]:
    async with started_writer_process(postgres_url) as process:
        assert isinstance(process, PostgresWriterProcess)
        yield process


@pytest.fixture
def other_postgres_url() -> Iterator[str]:
    yield from _scratch_postgres_database()


def _table(url: str, table: str) -> list[tuple[Any, ...]]:
    """The table's rows, less the run every database here starts with."""
    with psycopg.connect(_conninfo(url)) as conn:
        rows = conn.execute(f'SELECT * FROM "{table}" ORDER BY {TABLES[table]}').fetchall()
    return [row for row in rows if "run-0" not in row]


def _receipt_values(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """As the group commit queues them (`Batch.encoded`): all but `created_at`."""
    return [values[:-1] for values in encode(layout_of(Receipt), rows)]


def _batch(run_id: str) -> Batch:
    queued = [
        receipt_row(run_id, 2, output={"nul": "a\u0000b", "big": 2**70}),
        receipt_row(run_id, 3, error={"kind": "timeout"}, output=None),
    ]
    key = {**key_row(f"key-{run_id}", f"{run_id}-keyed"), "created_at": T0}
    key["expires_at"] = T0 + timedelta(days=365_000)  # held, and equal wherever written
    completion = {
        "caller": "ops",
        "key": f"key-{run_id}",
        "state": "completed",
        "response_status": 200,
        "response_body": {"ok": True},
        "run_id": None,
    }
    return Batch(
        claims=[(key, run_row(f"{run_id}-keyed"))],
        runs=[run_row(run_id)],
        # As rows, and as the group commit queues them.
        receipts=[receipt_row(run_id, 0), receipt_row(run_id, 1, output=None)],
        encoded=_receipt_values(queued),
        created_at=T0 + timedelta(seconds=9),
        audit=[audit_row(run_id, "é\u2028\\u0000"), audit_row(f"{run_id}-keyed", "")],
        ends=[run_end_row(run_id, 4)],
        completions=[completion],
    )


async def test_a_batch_written_by_the_process_reads_back_as_one_written_here(
    engine: AsyncEngine,
    process: PostgresWriterProcess,
    postgres_url: str,
    other_postgres_url: str,
) -> None:
    async with (
        migrated_engine(other_postgres_url) as here,
        create_session_factory(here)() as session,
    ):
        await write_on(await session.connection(), _batch("run-1"), commit=True)
    await through_process(process, _batch("run-1"))

    assert process.commits == 1
    assert process.pid not in (None, os.getpid())
    for table in TABLES:
        assert _table(postgres_url, table) == _table(other_postgres_url, table)
    assert len(_table(postgres_url, "receipts")) == 4
    assert [row[0] for row in _table(postgres_url, "runs")] == ["run-1", "run-1-keyed"]
    assert len(_table(postgres_url, "audit_events")) == 2


async def test_claims_in_the_process_say_which_runs_were_inserted(
    postgres_url: str, process: PostgresWriterProcess
) -> None:
    first = Batch(
        claims=[
            (key_row("k", "run-1"), run_row("run-1")),
            (key_row("other", "run-3"), run_row("run-3")),
        ]
    )
    won = await through_process(process, first)
    again = Batch(
        claims=[
            (key_row("k", "run-2"), run_row("run-2")),
            (key_row("new", "run-4"), run_row("run-4")),
        ]
    )
    held = await through_process(process, again)

    # A key the JSON batch cannot take (its text looks like an escaped NUL to the
    # search that keeps NULs out of JSON): one statement per key instead.
    odd = Batch(
        claims=[
            (key_row("k\\u0000", "run-5"), run_row("run-5")),
            (key_row("k", "run-6"), run_row("run-6")),
        ]
    )
    assert "json_populate_recordset" in steps(first, set())[0].operation()[1]
    assert "json_populate_recordset" not in steps(odd, set())[0].operation()[1]
    odd_won = await through_process(process, odd)

    assert won == {"run-1", "run-3"}
    assert held == {"run-4"}
    assert odd_won == {"run-5"}
    stored = {row[0] for row in _table(postgres_url, "runs")}
    assert stored == {"run-1", "run-3", "run-4", "run-5"}
    keys = {row[1] for row in _table(postgres_url, "idempotency_keys")}
    assert keys == {"k", "other", "new", "k\\u0000"}


async def test_a_failed_statement_is_the_driver_s_error_and_rolls_the_batch_back(
    postgres_url: str, process: PostgresWriterProcess
) -> None:
    batch = Batch(runs=[run_row("run-1")], receipts=[receipt_row("missing", 0)])

    with pytest.raises(IntegrityError) as raised:
        await through_process(process, batch)

    assert isinstance(raised.value.orig, psycopg.errors.ForeignKeyViolation)
    assert raised.value.orig.sqlstate == "23503"
    assert raised.value.statement.startswith('COPY "receipts"')
    assert not raised.value.connection_invalidated
    assert not is_transient(raised.value)
    assert _table(postgres_url, "runs") == []
    assert process.commits == 0
    await through_process(process, _batch("run-2"))  # the same process goes on
    assert process.started == 1
    assert len(_table(postgres_url, "receipts")) == 4


async def test_a_lost_connection_is_a_transient_error_and_the_next_batch_connects_again(
    postgres_url: str, process: PostgresWriterProcess
) -> None:
    name = make_url(postgres_url).database
    with psycopg.connect(_conninfo(postgres_url), autocommit=True) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    assert ended  # the process's connection

    with pytest.raises(DBAPIError) as raised:
        await through_process(process, _batch("run-1"))

    assert raised.value.connection_invalidated
    assert is_transient(raised.value)  # the group commit retries it
    await through_process(process, _batch("run-1"))
    assert process.started == 1  # the same process, connected again
    assert len(_table(postgres_url, "receipts")) == 4


async def test_a_database_the_process_cannot_reach_fails_its_start() -> None:
    process = PostgresWriterProcess("postgresql://postgres:secret@127.0.0.1:1/x")
    with pytest.raises(PostgresStatementFailed) as raised:
        await process.start()
    await process.aclose()

    assert raised.value.connection_lost
    assert isinstance(raised.value.error, psycopg.OperationalError)
    assert "127.0.0.1" in str(raised.value.error)


def test_a_request_holding_anything_but_plain_data_is_refused() -> None:
    payload = pickle.dumps(([(os.getcwd, [])], False))
    with pytest.raises(pickle.UnpicklingError, match="not part of a writer request"):
        postgres_statements.load(payload)


def test_a_request_s_datetimes_are_let_through() -> None:
    payload = pickle.dumps(([("many", "SELECT %s", [(T0, T0 - T0)])], True))
    assert postgres_statements.load(payload) == ([("many", "SELECT %s", [(T0, T0 - T0)])], True)


def test_the_process_runs_the_statements_file_in_isolated_mode() -> None:
    command = PostgresWriterProcess("postgresql://x")._command()
    assert command[1] == "-I"
    assert Path(command[2]) == Path(postgres_statements.__file__)


def test_copies_stand_alone_between_pipelines_that_open_and_close_the_transaction() -> None:
    copy = ("copy", "COPY a", ["text"], [("x",)])
    end = ("many", "UPDATE c", [("z",)])
    claim = ("claim", "WITH ...", [("k", "r")])

    assert postgres_statements._segments([claim, copy, copy, end]) == [[claim], copy, copy, [end]]
    assert postgres_statements._segments([copy]) == [[], copy, []]
    assert postgres_statements._segments([claim, end]) == [[claim, end]]
    assert postgres_statements._segments([]) == [[]]
