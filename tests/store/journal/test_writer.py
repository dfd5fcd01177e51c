from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.engine.ports import AuditEvent, AuditKind, CachedOutput
from app.foundation.redaction import Redactor
from app.store.database import create_session_factory
from app.store.journal import queue as journal_queue
from app.store.journal import writer as writer_module
from app.store.journal.batch import Batch
from app.store.journal.postgres import connection as postgres_connection
from app.store.journal.postgres import driver as postgres_driver
from app.store.journal.postgres import encoding as postgres_encoding
from app.store.journal.writer import GroupCommitWriter
from app.store.repositories.audit import AuditRepository
from app.store.repositories.cache import CacheRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.observability.metrics_reading import value
from tests.writer_support import (
    HASH,
    CommitCounter,
    running_writer,
    succeeded_receipt,
)


async def test_concurrent_receipts_share_commits_and_each_waits_for_its_own(
    run_engine: AsyncEngine,
) -> None:
    commits = CommitCounter(run_engine)
    async with running_writer(run_engine, linger_s=0.005) as writer:
        futures = [writer.submit(succeeded_receipt(seq, {"n": seq})) for seq in range(200)]
        await asyncio.gather(*futures)
    assert 1 <= commits.count < 20
    async with create_session_factory(run_engine)() as session:
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert [r.seq for r in stored] == list(range(200))


async def test_stored_rows_are_the_redacted_copy(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        await writer.submit(
            succeeded_receipt(
                0,
                {"token": "plain", "note": "sk-abcdefghijklmnopqrstuvwx"},
                redactor=Redactor(["token"]),
            )
        )
        writer.emit(
            AuditEvent(
                kind=AuditKind.CALL_FINISHED,
                at=datetime.now(UTC),
                run_id="run-1",
                caller=None,
                tool="t",
                call_key="0",
                item_key=None,
                detail={"status": "succeeded"},
            )
        )
        await writer.flush()
    async with create_session_factory(run_engine)() as session:
        (stored,) = await ReceiptRepository(session).list_for_run("run-1")
        events = await AuditRepository(session).list_for_run("run-1")
    assert stored.output == {"token": "[REDACTED]", "note": "[REDACTED]"}
    assert [e.kind for e in events] == ["call.finished"]


async def test_a_failed_write_fails_the_waiting_receipts(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        await writer.submit(succeeded_receipt(0, {}))
        duplicate = writer.submit(succeeded_receipt(0, {}))
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            await duplicate
        await writer.submit(succeeded_receipt(1, {}))


async def test_run_starts_and_ends_share_group_commits_with_receipts(
    run_engine: AsyncEngine,
) -> None:
    commits = CommitCounter(run_engine)
    now = datetime.now(UTC)
    async with running_writer(run_engine, linger_s=0.005) as writer:
        await asyncio.gather(
            *(writer.start_run(_run_row(f"started-{index}")) for index in range(50))
        )
        started_commits = commits.count
        receipt = writer.submit(succeeded_receipt(0, {"n": 0}))
        end = writer.end_run(
            {"run_id": "run-1", "status": "succeeded", "call_count": 1, "finished_at": now}
        )
        await asyncio.gather(receipt, end)
    assert 1 <= started_commits < 10
    async with create_session_factory(run_engine)() as session:
        runs = RunRepository(session)
        assert all([await runs.get(f"started-{index}") is not None for index in range(50)])
        finished = await runs.get("run-1")
    assert finished is not None
    assert (finished.status, finished.call_count) == ("succeeded", 1)


async def test_a_batch_goes_to_the_driver_in_one_call_below_sqlalchemy(
    run_engine: AsyncEngine,
) -> None:
    # Run start, receipt, run end and audit rows of one transaction: no statement
    # passes through SQLAlchemy's statement layer (the driver gets them together).
    statements: list[str] = []
    event.listen(
        run_engine.sync_engine,
        "before_cursor_execute",
        lambda _c, _cur, statement, *_rest: statements.append(statement),
    )
    now = datetime.now(UTC)
    async with running_writer(run_engine, linger_s=0.005) as writer:
        start = writer.start_run(_run_row("run-2"))
        receipt = writer.submit(succeeded_receipt(0, {"n": 0}))
        writer.emit(
            AuditEvent(AuditKind.CALL_FINISHED, now, "run-1", None, "t", "c0", None, {"ok": True})
        )
        end = writer.end_run(
            {"run_id": "run-1", "status": "succeeded", "call_count": 1, "finished_at": now}
        )
        assert start is receipt is end  # one transaction
        await end
        # The only statements: reading run-1's chain head, once (the run was stored
        # before this writer started; the writer's last checkpoint comes at close).
        assert statements
        assert all("chain_seq, " in statement for statement in statements)
    async with create_session_factory(run_engine)() as session:
        runs = RunRepository(session)
        started, finished = await runs.get("run-2"), await runs.get("run-1")
        events = await AuditRepository(session).list_for_run("run-1")
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert started is not None
    assert started.status == "running"
    assert finished is not None
    assert (finished.status, finished.call_count, finished.finished_at) == ("succeeded", 1, now)
    assert [(e.kind, e.detail) for e in events] == [("call.finished", {"ok": True})]
    assert [r.seq for r in stored] == [0]


class EndsUpdated:
    """The run ends each batch leaves to updates (`Batch.ends`), by run id."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.run_ids: list[str] = []
        write_durably = writer_module.write_durably

        async def recorded(backend: Any, batch: Batch, outage: Any) -> set[str]:
            self.run_ids.extend(end["run_id"] for end in batch.ends)
            return await write_durably(backend, batch, outage)

        monkeypatch.setattr(writer_module, "write_durably", recorded)


async def test_a_run_that_starts_and_ends_in_one_transaction_is_inserted_ended(
    run_engine: AsyncEngine, through: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    updated = EndsUpdated(monkeypatch)
    now = datetime.now(UTC)
    row = _run_row("run-2")
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        start = writer.start_run(row)
        receipt = writer.submit(succeeded_receipt(0, {"n": 0})._replace(run_id="run-2"))
        ended = {"status": "failed", "outcome": {"why": "x"}, "call_count": 1, "finished_at": now}
        end = writer.end_run({"run_id": "run-2", **ended})
        earlier = writer.end_run({**_end(), "finished_at": now})  # run-1 started before
        assert start is receipt is end is earlier  # one transaction
        await end
    # run-2's end went into its inserted row; run-1's, started earlier, is an update.
    assert updated.run_ids == ["run-1"]
    async with create_session_factory(run_engine)() as session:
        runs = RunRepository(session)
        inserted, finished = await runs.get("run-2"), await runs.get("run-1")
        stored = await ReceiptRepository(session).list_for_run("run-2")
    assert inserted is not None
    assert (inserted.status, inserted.outcome, inserted.call_count, inserted.finished_at) == (
        "failed",
        {"why": "x"},
        1,
        now,
    )
    assert (inserted.kind, inserted.owner, inserted.started_at) == (
        "sequential",
        "o",
        row["started_at"],
    )
    assert finished is not None
    assert (finished.status, finished.finished_at) == ("succeeded", now)
    assert [receipt.seq for receipt in stored] == [0]


async def test_two_ends_of_a_run_in_one_transaction_stay_updates_applied_in_order(
    run_engine: AsyncEngine, through: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    updated = EndsUpdated(monkeypatch)
    now = datetime.now(UTC)
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        writer.start_run(_run_row("run-2"))
        first = writer.end_run(
            {"run_id": "run-2", "status": "failed", "call_count": 2, "finished_at": now}
        )
        # A None call count keeps the stored one: the first end's.
        second = writer.end_run(
            {"run_id": "run-2", "status": "cancelled", "call_count": None, "finished_at": now}
        )
        assert first is second
        await second
    assert updated.run_ids == ["run-2", "run-2"]
    async with create_session_factory(run_engine)() as session:
        stored = await RunRepository(session).get("run-2")
    assert stored is not None
    assert (stored.status, stored.call_count) == ("cancelled", 2)


def _end(status: str = "succeeded") -> dict[str, object]:
    return {"run_id": "run-1", "status": status, "call_count": 1, "finished_at": datetime.now(UTC)}


async def test_a_run_end_joins_the_open_transaction_its_receipts_wait_on(
    run_engine: AsyncEngine,
    through: dict[str, Any],
) -> None:
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        receipt = writer.submit(succeeded_receipt(0, {"n": 0}))
        end = writer.end_run_with([receipt], _end())
        assert end is receipt  # one transaction: the end commits with the receipt or not at all
        await receipt
    async with create_session_factory(run_engine)() as session:
        finished = await RunRepository(session).get("run-1")
    assert finished is not None
    assert (finished.status, finished.call_count) == ("succeeded", 1)


async def test_a_run_end_joins_its_last_receipts_behind_an_earlier_transaction(
    run_engine: AsyncEngine,
) -> None:
    commits = CommitCounter(run_engine)
    async with running_writer(run_engine, max_batch=1) as writer:
        first = writer.submit(succeeded_receipt(0, {"n": 0}))
        second = writer.submit(succeeded_receipt(1, {"n": 1}))  # the first group is full
        assert first is not second
        # With a key's answer, the end still waits until every receipt committed.
        assert writer.end_run_with([first, second], _end(), {"caller": "c", "key": "k"}) is None
        # The first receipt's transaction comes first: the end commits with the second.
        end = writer.end_run_with([first, second], _end())
        assert end is second
        await asyncio.gather(first, second)
        assert commits.count == 2  # no transaction of the end's own
    async with create_session_factory(run_engine)() as session:
        finished = await RunRepository(session).get("run-1")
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert finished is not None
    assert (finished.status, finished.call_count) == ("succeeded", 1)
    assert [receipt.seq for receipt in stored] == [0, 1]


async def test_a_run_end_behind_a_transaction_that_failed_is_left_out(
    run_engine: AsyncEngine,
    through: dict[str, Any],
) -> None:
    async with running_writer(run_engine, **through, max_batch=1) as writer:
        await writer.submit(succeeded_receipt(0, {"n": 0}))
        duplicate = writer.submit(succeeded_receipt(0, {"n": 0}))  # refused by the database
        last = writer.submit(succeeded_receipt(1, {"n": 1}))
        end = writer.end_run_with([duplicate, last], _end())
        assert end is last
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            await duplicate
        await end  # its receipt committed, without the end
    async with create_session_factory(run_engine)() as session:
        unfinished = await RunRepository(session).get("run-1")
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert unfinished is not None
    assert (unfinished.status, unfinished.finished_at) == ("running", None)
    assert [receipt.seq for receipt in stored] == [0, 1]


async def test_a_run_end_is_not_promised_when_a_receipt_failed(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        failed.set_exception(OSError("disk full"))
        assert writer.end_run_with([failed], _end()) is None
        receipt = writer.submit(succeeded_receipt(0, {"n": 0}))
        await receipt
        # Every receipt committed: the end takes a transaction of its own.
        end = writer.end_run_with([receipt], _end("failed"))
        assert end is not None
        assert end is not receipt
        await end
    async with create_session_factory(run_engine)() as session:
        finished = await RunRepository(session).get("run-1")
    assert finished is not None
    assert finished.status == "failed"


async def test_a_closing_writer_promises_no_run_end(run_engine: AsyncEngine) -> None:
    writer = GroupCommitWriter(create_session_factory(run_engine))
    writer.start()
    await writer.aclose()
    assert writer.end_run_with([], _end()) is None


def _run_row(run_id: str) -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "id": run_id,
        "kind": "sequential",
        "owner": "o",
        "status": "running",
        "contract_hash": HASH,
        "instance_id": "i",
        "call_count": 0,
        "created_at": now,
        "started_at": now,
    }


LINGER_S = 0.123


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_lone_run_does_not_wait_for_the_linger(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    # An hour's linger: had the start waited for it, the test would hang.
    async with running_writer(run_engine, **through, linger_s=3600) as writer:
        await asyncio.wait_for(writer.start_run(_run_row("lone")), timeout=60)
        receipt = writer.submit(succeeded_receipt(0, {"n": 0}))
        await asyncio.wait_for(receipt, timeout=60)
        ended = writer.end_run({**_end(), "run_id": "lone"})
        await asyncio.wait_for(ended, timeout=60)


async def test_the_linger_waits_while_another_run_is_open(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(
        run_engine, **through, linger_s=0.5, linger_min_open_runs=2
    ) as writer:
        await writer.start_run(_run_row("first"))
        second = writer.start_run(_run_row("second"))
        await _turns(50)
        assert not second.done()  # two runs open: rows that may join are awaited
        await second
        ended = writer.end_run({**_end(), "run_id": "first"})
        await _turns(50)
        assert not ended.done()  # "second" is still open
        await ended
        # One run open now: its end commits without lingering.
        await asyncio.wait_for(writer.end_run({**_end(), "run_id": "second"}), timeout=60)


async def test_the_linger_waits_only_from_its_number_of_open_runs(
    run_engine: AsyncEngine, through: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    lingers: list[float] = []
    sleep = asyncio.sleep

    async def noted(delay: float, *args: Any) -> Any:
        if delay == LINGER_S:
            lingers.append(delay)
            delay = 0  # noted, not waited for
        return await sleep(delay, *args)

    monkeypatch.setattr(asyncio, "sleep", noted)
    async with running_writer(
        run_engine, **through, linger_s=LINGER_S, linger_min_open_runs=3
    ) as writer:
        await asyncio.gather(writer.start_run(_run_row("a")), writer.start_run(_run_row("b")))
        await writer.submit(succeeded_receipt(0, {"n": 0}))
        assert lingers == []  # two runs open, one short of the linger's company
        await writer.start_run(_run_row("c"))
        await writer.submit(succeeded_receipt(1, {"n": 1}))
        assert lingers == [LINGER_S] * 2  # three open (its start, the receipt): company awaited


async def test_a_start_that_failed_to_commit_leaves_no_run_open(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        await writer.start_run(_run_row("open"))
        unknown_contract = {**_run_row("refused"), "contract_hash": "not-a-snapshot"}
        with pytest.raises(DBAPIError, match=r"FOREIGN KEY|foreign key"):
            await writer.start_run(unknown_contract)
    assert writer.open_runs == {"open"}


class _ScriptedWal:
    """A WAL keeper whose `catch_up` waits until the test lets it finish."""

    def __init__(self, *, long: bool) -> None:
        self.wal_is_long = long
        self.catch_ups = 0
        self.commits_noted = 0
        self.finish = asyncio.Event()

    async def catch_up(self) -> None:
        self.catch_ups += 1
        await self.finish.wait()
        self.wal_is_long = False

    def note_commit(self) -> None:
        self.commits_noted += 1


async def test_a_long_wal_holds_the_next_batch_until_a_checkpoint_caught_up(
    run_engine: AsyncEngine,
) -> None:
    wal = _ScriptedWal(long=True)
    commits = CommitCounter(run_engine)
    waits = value("toolloop_receipt_wal_wait_seconds_count")
    async with running_writer(run_engine, linger_s=0, wal=wal) as writer:
        first = writer.submit(succeeded_receipt(0, {"n": 0}))
        await _turns(50)
        assert wal.catch_ups == 1
        assert not first.done()
        assert commits.count == 0
        second = writer.submit(succeeded_receipt(1, {"n": 1}))  # joins the held batch
        wal.finish.set()
        await asyncio.wait_for(asyncio.gather(first, second), timeout=60)
        assert first is second
        assert commits.count == 1
        await asyncio.wait_for(writer.submit(succeeded_receipt(2, {"n": 2})), timeout=60)
    assert wal.catch_ups == 1  # no longer long: later batches do not wait
    assert value("toolloop_receipt_wal_wait_seconds_count") == waits + 1


async def test_each_committed_batch_is_noted_to_the_checkpointer_and_a_failed_one_not(
    run_engine: AsyncEngine,
) -> None:
    wal = _ScriptedWal(long=False)
    commits = CommitCounter(run_engine)
    async with running_writer(run_engine, linger_s=0, wal=wal) as writer:
        await asyncio.wait_for(writer.submit(succeeded_receipt(0, {"n": 0})), timeout=60)
        await asyncio.wait_for(writer.submit(succeeded_receipt(1, {"n": 1})), timeout=60)
        assert wal.commits_noted == commits.count == 2
        refused = {**_run_row("refused"), "contract_hash": "not-a-snapshot"}
        with pytest.raises(DBAPIError, match=r"FOREIGN KEY|foreign key"):
            await writer.start_run(refused)
    assert wal.commits_noted == 2


async def test_a_short_wal_never_holds_a_batch(run_engine: AsyncEngine) -> None:
    wal = _ScriptedWal(long=False)
    waits = value("toolloop_receipt_wal_wait_seconds_count")
    async with running_writer(run_engine, linger_s=0, wal=wal) as writer:
        await asyncio.wait_for(writer.submit(succeeded_receipt(0, {"n": 0})), timeout=60)
    assert wal.catch_ups == 0
    assert value("toolloop_receipt_wal_wait_seconds_count") == waits


async def test_rows_of_a_run_whose_start_failed_are_left_out_of_later_transactions(
    run_engine: AsyncEngine, through: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # A run that went on without waiting for its start (a plan of read tools): once
    # the start failed, its receipts, their cache entries and its end must not reach
    # a later transaction, where the foreign key would fail every other run's rows.
    refused = {**_run_row("refused"), "contract_hash": "not-a-snapshot"}
    now = datetime.now(UTC)
    orphan = succeeded_receipt(0, {"n": 0}, receipt_id="orphan")._replace(run_id="refused")
    entry = CachedOutput("sha256:" + "c" * 64, HASH, "t", {"n": 0}, "orphan", now, None)
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        with pytest.raises(DBAPIError, match=r"FOREIGN KEY|foreign key"):
            await writer.start_run(refused)
        later = [
            writer.submit(orphan, entry),
            writer.submit(succeeded_receipt(0, {"n": 1})),
            writer.end_run({**_end(), "run_id": "refused"}),
        ]
        await asyncio.gather(*later)  # the other run's receipt committed
    async with create_session_factory(run_engine)() as session:
        assert [r.id for r in await ReceiptRepository(session).list_for_run("run-1")] == ["r0"]
        assert await ReceiptRepository(session).list_for_run("refused") == []
        assert await RunRepository(session).get("refused") is None
        assert await CacheRepository(session).get(entry.fingerprint, HASH, now) is None
    assert "left out 1 receipts of runs whose start could not be recorded" in caplog.text


async def test_runs_whose_start_failed_are_remembered_up_to_a_bound(
    run_engine: AsyncEngine, through: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_queue, "MAX_UNSTARTED_RUNS", 2)
    async with running_writer(run_engine, **through) as writer:
        for run_id in ("u1", "u2", "u3"):
            with pytest.raises(DBAPIError):
                await writer.start_run({**_run_row(run_id), "contract_hash": "none"})
    assert list(writer.unstarted_runs) == ["u2", "u3"]


@pytest.mark.postgres
async def test_a_batch_of_one_run_s_receipts_goes_to_postgresql_by_copy_from_fewer_rows(
    postgres_run_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_engine = postgres_run_engine
    copied: list[tuple[str, int]] = []
    real_copy = postgres_driver.copy_rows

    async def recorded(driver: Any, layout: Any, encoded: Any) -> None:
        copied.append((layout.copy_sql.split()[1], len(encoded)))
        await real_copy(driver, layout, encoded)

    monkeypatch.setattr(postgres_driver, "copy_rows", recorded)
    async with create_session_factory(run_engine).begin() as session:
        await RunRepository(session).create(
            id="run-2", kind="sequential", owner="o", contract_hash=HASH, instance_id="i"
        )
    least = postgres_connection.ONE_RUN_COPY_MIN_ROWS
    assert least < postgres_encoding.COPY_MIN_ROWS
    async with running_writer(run_engine) as writer:
        # Each list is queued at once: one transaction each.
        fewer = [writer.submit(succeeded_receipt(seq, {})) for seq in range(least - 1)]
        await asyncio.gather(*fewer)
        assert copied == []
        one_run = [writer.submit(succeeded_receipt(seq, {})) for seq in range(least, 2 * least)]
        await asyncio.gather(*one_run)
        assert copied == [('"receipts"', least)]
        two_runs = [
            writer.submit(
                succeeded_receipt(seq, {})._replace(receipt_id=f"r{seq}-{run_id}", run_id=run_id)
            )
            for seq in range(2 * least, 3 * least)
            for run_id in ("run-1", "run-2")
        ]
        await asyncio.gather(*two_runs)
    assert copied == [('"receipts"', least)]
    async with create_session_factory(run_engine)() as session:
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert len(stored) == least - 1 + least + least
