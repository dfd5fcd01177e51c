"""The receipt writer's backlog is bounded: past the bound, new calls wait for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.contract import Contract
from app.engine.engine import Engine
from app.engine.memory import MemoryAuditSink, MemoryCacheStore
from app.engine.run import RunIdentity
from app.store.database import create_database_engine, create_session_factory
from app.store.journal.writer import GroupCommitWriter
from app.store.migrate import upgrade_database
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.engine.harness import OWNER, Harness, tool, until, write_contract
from tests.writer_support import CommitCounter


@pytest.fixture
def contract(tmp_path: Path) -> Contract:
    return write_contract(tmp_path, {"n": tool("noop", effect="read")})


@pytest.fixture
async def database(database_url: str, contract: Contract) -> AsyncIterator[AsyncEngine]:
    await upgrade_database(database_url)
    engine = create_database_engine(database_url)
    async with create_session_factory(engine).begin() as session:
        await ContractSnapshotRepository(session).save_if_absent(contract.hash, {}, 1)
    yield engine
    await engine.dispose()


def _harness(contract: Contract, writer: GroupCommitWriter) -> Harness:
    engine = Engine(contract, receipts=writer, audit=writer, backpressure=writer)
    return Harness(contract, engine, writer, MemoryAuditSink(), MemoryCacheStore())


async def _open_run(database: AsyncEngine, harness: Harness) -> RunIdentity:
    run = harness.identity()
    async with create_session_factory(database).begin() as session:
        await RunRepository(session).create(
            id=run.run_id,
            kind="sequential",
            owner=OWNER,
            contract_hash=run.contract_hash,
            instance_id="i",
        )
    return run


async def test_calls_wait_while_the_backlog_is_over_its_bound(
    database: AsyncEngine, contract: Contract
) -> None:
    # Each call queues three rows (call.started, call.finished, its receipt).
    writer = GroupCommitWriter(create_session_factory(database), linger_s=0, max_backlog=4)
    harness = _harness(contract, writer)
    run = await _open_run(database, harness)

    plan = asyncio.create_task(harness.sequential([(str(i), "n", {}) for i in range(10)], run=run))
    # The writer is not started, so nothing drains: two calls fit under the bound.
    await until(lambda: writer.backlog >= 6)
    for _ in range(100):
        await asyncio.sleep(0)
    assert writer.backlog == 6
    assert not plan.done()

    writer.start()
    outcome = await plan
    await writer.aclose()
    await harness.engine.aclose()
    assert [receipt.call_key for receipt in outcome.receipts] == [str(i) for i in range(10)]
    assert all(receipt.succeeded for receipt in outcome.receipts)
    held = [receipt for receipt in outcome.receipts if receipt.admission_wait_ms > 0]
    assert held, "the calls held by backpressure record their wait"
    async with create_session_factory(database)() as session:
        stored = await ReceiptRepository(session).list_for_run(run.run_id)
    assert [row.seq for row in stored] == list(range(10))


async def test_receipts_of_one_transaction_share_one_future_and_one_commit(
    database: AsyncEngine, contract: Contract
) -> None:
    writer = GroupCommitWriter(create_session_factory(database), linger_s=0)
    harness = _harness(contract, writer)
    run = await _open_run(database, harness)
    commits = CommitCounter(database)

    # Not started yet: the whole plan queues, then goes in one transaction.
    plan = asyncio.create_task(harness.sequential([(str(i), "n", {}) for i in range(50)], run=run))
    await until(lambda: writer.backlog == 150)
    writer.start()
    outcome = await plan
    await writer.aclose()
    await harness.engine.aclose()
    assert len(outcome.receipts) == 50
    assert commits.count == 1
    assert writer.room() is None


@pytest.mark.parametrize("turn_every", [10, 1_000_000])
async def test_a_long_plan_of_quick_calls_gives_the_writer_turns(
    database: AsyncEngine, contract: Contract, turn_every: int
) -> None:
    # An async no-op never waits: without turns the plan holds the event loop to
    # its end, and the writer sends everything afterwards, in one transaction.
    writer = GroupCommitWriter(create_session_factory(database), linger_s=0, turn_every=turn_every)
    batches: list[int] = []
    writer.add_listener(lambda rows: batches.append(len(rows)))
    harness = _harness(contract, writer)
    run = await _open_run(database, harness)
    writer.start()

    outcome = await harness.sequential([(str(i), "n", {}) for i in range(600)], run=run)
    await writer.aclose()
    await harness.engine.aclose()

    assert all(receipt.succeeded for receipt in outcome.receipts)
    assert sum(batches) == 600
    if turn_every == 10:
        # Writes began while the plan ran: its receipts went in several transactions.
        assert len(batches) >= 2
    else:
        assert batches == [600]
    async with create_session_factory(database)() as session:
        stored = await ReceiptRepository(session).list_for_run(run.run_id)
    assert [row.seq for row in stored] == list(range(600))
