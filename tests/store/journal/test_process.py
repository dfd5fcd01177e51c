"""What both databases' writer processes share (`app.store.journal.process`): a process
that ends between batches or with one in flight, a batch cancelled in flight, a
closed process, and a batch larger than a pipe's buffer."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.journal.batch import Batch
from app.store.journal.outage import is_transient
from app.store.journal.process import WriterProcess
from tests.store.factories import migrated_engine, receipt_row, run_row
from tests.writer_support import WriterProcessOf, started_writer_process, through_process


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    async with migrated_engine(database_url) as engine:
        yield engine


@pytest.fixture
async def process(database_url: str, engine: AsyncEngine) -> AsyncIterator[WriterProcessOf]:
    async with started_writer_process(database_url) as process:
        yield process


def _batch(run_id: str, **output: Any) -> Batch:
    receipts = [
        receipt_row(run_id, seq, **({"output": output} if output else {})) for seq in range(3)
    ]
    return Batch(runs=[run_row(run_id)], receipts=receipts)


async def _scalar(engine: AsyncEngine, query: str) -> Any:
    async with engine.connect() as connection:
        return (await connection.execute(text(query))).scalar_one()


async def _receipts(engine: AsyncEngine) -> int:
    count: int = await _scalar(engine, "SELECT count(*) FROM receipts")
    return count


async def test_a_process_that_ended_between_batches_is_started_again(
    engine: AsyncEngine, process: WriterProcessOf
) -> None:
    first = process.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    for _ in range(500):  # until asyncio's child watcher reaps it
        if process.pid is None:
            break
        await asyncio.sleep(0.01)
    assert process.pid is None

    await through_process(process, _batch("run-1"))

    assert process.started == 2
    assert process.pid not in (None, first)
    assert await _receipts(engine) == 3


async def test_a_process_that_ends_while_a_batch_is_in_flight_is_a_dropped_connection(
    engine: AsyncEngine, process: WriterProcessOf, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = type(process)
    original = kind._exchange

    async def killed_first(
        self: WriterProcess, child: asyncio.subprocess.Process, payload: bytes
    ) -> Any:
        child.kill()
        await child.wait()
        return await original(self, child, payload)

    monkeypatch.setattr(kind, "_exchange", killed_first)
    with pytest.raises(DBAPIError) as raised:
        await through_process(process, _batch("run-1"))
    monkeypatch.undo()

    assert raised.value.connection_invalidated
    assert is_transient(raised.value)  # the group commit retries it
    assert f"{process.name} ended" in str(raised.value.orig)
    await through_process(process, _batch("run-1"))  # a new process: nothing was written before
    assert process.started == 2
    assert await _receipts(engine) == 3


async def test_a_batch_cancelled_in_flight_ends_its_process(
    process: WriterProcessOf, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = type(process)
    original = kind._exchange
    sent = asyncio.Event()

    async def stalled(
        self: WriterProcess, child: asyncio.subprocess.Process, payload: bytes
    ) -> Any:
        sent.set()
        await asyncio.Event().wait()  # cancelled here, between request and answer
        return await original(self, child, payload)  # pragma: no cover

    monkeypatch.setattr(kind, "_exchange", stalled)
    first = process.pid
    task = asyncio.create_task(through_process(process, _batch("run-1")))
    await sent.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()

    assert process.pid != first  # killed: the pipe could hold half a frame
    await through_process(process, _batch("run-1"))
    assert process.started == 2


async def test_a_closed_process_ends_and_takes_no_more_batches(
    process: WriterProcessOf,
) -> None:
    pid = process.pid
    assert pid is not None

    await process.aclose()

    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(DBAPIError, match="closed") as raised:
        await through_process(process, _batch("run-1"))
    assert raised.value.connection_invalidated


async def test_a_batch_larger_than_the_pipe_s_buffer_goes_through_whole(
    engine: AsyncEngine, process: WriterProcessOf
) -> None:
    big = "x" * (4 * 1024 * 1024)  # far past a pipe's 64 KiB: written as the process reads

    await through_process(process, _batch("run-1", big=big))

    length = "length(output)" if engine.dialect.name == "sqlite" else "length(output::text)"
    async with engine.connect() as connection:
        sizes = (await connection.execute(text(f"SELECT {length} FROM receipts"))).scalars()
        assert list(sizes) == [len(big) + len('{"big":""}')] * 3
