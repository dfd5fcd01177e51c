"""Which batches the writer asks to be written on the event loop's thread: the small
one that ends a lone run, never one shared by runs or written while others are open."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.service.runs.records import run_end
from app.store.database import create_session_factory
from app.store.journal import session as journal_session
from app.store.journal.batch import Batch
from app.store.journal.sqlite import connection as sqlite_connection
from app.store.journal.sqlite.connection import HERE_MAX_ROWS
from app.store.repositories.receipts import ReceiptRepository
from tests.writer_support import (
    RUN_ID,
    running_writer,
    started_run,
    succeeded_receipt,
)


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """SQLite files only: PostgreSQL's batches go on the writer's held connection,
    where there is no thread to choose (`test_writer_held_connection`)."""
    return sqlite_url


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each committing batch was written on the loop's thread, in order."""
    asked: list[bool] = []
    write_on = sqlite_connection.write_on
    on_this_thread = sqlite_connection._executemany_here

    async def spied(connection: Any, batch: Batch, *, commit: bool, here: bool = False) -> Any:
        if commit:
            asked.append(False)
        return await write_on(connection, batch, commit=commit, here=here)

    def noted(*args: Any) -> bool:
        asked[-1] = True
        return on_this_thread(*args)

    monkeypatch.setattr(sqlite_connection, "write_on", spied)
    monkeypatch.setattr(sqlite_connection, "_executemany_here", noted)
    return asked


async def _stored_seqs(run_engine: AsyncEngine, run_id: str) -> list[int]:
    async with create_session_factory(run_engine)() as session:
        return [row.seq for row in await ReceiptRepository(session).list_for_run(run_id)]


def _end(run_id: str) -> dict[str, Any]:
    return run_end(run_id, status="succeeded", call_count=1)


async def test_the_batch_that_ends_a_lone_run_is_written_on_the_loop_s_thread(
    run_engine: AsyncEngine, here: list[bool]
) -> None:
    async with running_writer(run_engine, linger_s=0.002) as writer:
        await writer.start_run(started_run("lone"))
        durable = writer.submit(succeeded_receipt(0, {"n": 0})._replace(run_id="lone"))
        ended = writer.end_run_with([durable], _end("lone"))
        assert ended is not None
        await ended
    # Its start is not an end: the writer goes on at once after a batch written on
    # the loop's thread, so only a run's last batch is written there.
    assert here == [False, True]
    assert await _stored_seqs(run_engine, "lone") == [0]


async def test_an_end_while_another_run_is_open_goes_to_the_database_s_own_thread(
    run_engine: AsyncEngine, here: list[bool]
) -> None:
    async with running_writer(run_engine, linger_s=0.002) as writer:
        await asyncio.gather(writer.start_run(started_run("a")), writer.start_run(started_run("b")))
        await writer.end_run(_end("a"))
        await writer.end_run(_end("b"))
    assert here == [False, False, True]


async def test_a_large_batch_ending_a_lone_run_goes_to_the_database_s_own_thread(
    run_engine: AsyncEngine, here: list[bool]
) -> None:
    async with running_writer(run_engine, linger_s=0.002) as writer:
        receipts = [
            writer.submit(succeeded_receipt(seq, {"n": seq})) for seq in range(HERE_MAX_ROWS)
        ]
        await asyncio.gather(*receipts, writer.end_run(_end(RUN_ID)))
    assert here == [False]
    assert len(await _stored_seqs(run_engine, RUN_ID)) == HERE_MAX_ROWS


async def test_receipts_without_an_end_or_beside_another_run_s_go_to_the_database_s_own_thread(
    run_engine: AsyncEngine, here: list[bool]
) -> None:
    # Runs not started through the writer (a router run's, say) are not counted open.
    async with create_session_factory(run_engine).begin() as session:
        await journal_session.insert(session, Batch(runs=[started_run("other")]))
    async with running_writer(run_engine, linger_s=0.002) as writer:
        await writer.submit(succeeded_receipt(0, {"n": 0})._replace(run_id="other"))
        other = succeeded_receipt(1, {"n": 1})._replace(run_id="other", receipt_id="o")
        await asyncio.gather(writer.submit(other), writer.end_run(_end(RUN_ID)))
    # A batch of one run without its end is not written there either: nothing is
    # open, but the run may still be running.
    assert here == [False, False]
