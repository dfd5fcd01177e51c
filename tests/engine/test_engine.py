"""The Engine's own API: one-off calls for the router, run checks, durability failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.engine import CallRejected
from app.engine.errors import ReceiptWriteFailed
from app.engine.plan import Lane, ParallelPlan, PlannedCall, SequentialPlan
from app.engine.ports import CachedOutput
from app.engine.receipt import Receipt, Status
from app.engine.run import RunKind
from app.foundation.canonical import fingerprint
from tests.engine import engine_tools
from tests.engine.harness import OWNER, tool


async def test_run_call_allocates_sequence_numbers_in_an_open_run(make_harness: Any) -> None:
    harness = make_harness({"e": tool("aecho"), "who": tool("awhoami")})
    run = harness.engine.open_run(harness.identity(), deadline_s=60, first_seq=5)

    first = await harness.engine.run_call(run, "e", {"x": 1}, call_key="a")
    second = await harness.engine.run_call(run, "who", {}, call_key="b")

    assert (first.seq, second.seq) == (5, 6)
    assert first.output["args"] == {"x": 1}
    assert second.output["kind"] == RunKind.ROUTER.value
    assert second.idempotency_key == f"{run.identity.run_id}:6"


async def test_run_call_takes_a_checked_fingerprint_instead_of_checking_again(
    make_harness: Any,
) -> None:
    harness = make_harness({"e": tool("aecho")})
    run = harness.engine.open_run(harness.identity())
    checked = fingerprint("e", {"x": 1})

    handed = await harness.engine.run_call(
        run, "e", {"x": 1}, call_key="a", checked_fingerprint=checked
    )
    computed = await harness.engine.run_call(run, "e", {"x": 1}, call_key="b")

    assert handed.status is Status.SUCCEEDED
    assert handed.fingerprint == computed.fingerprint == checked
    # The handed value is used as given: the engine neither validates nor hashes again.
    marked = await harness.engine.run_call(
        run, "e", {"x": 2}, call_key="c", checked_fingerprint="f"
    )
    assert marked.fingerprint == "f"


@pytest.mark.parametrize(
    ("tool_id", "reason"),
    [("nowhere", "unknown tool"), ("outsider", "belongs to owner 'other'")],
)
async def test_run_call_refuses_tools_the_owner_may_not_call(
    make_harness: Any, tool_id: str, reason: str
) -> None:
    harness = make_harness({"e": tool("aecho")}, other_tools={"outsider": tool("aecho")})
    run = harness.engine.open_run(harness.identity())

    with pytest.raises(CallRejected, match=reason):
        await harness.engine.run_call(run, tool_id, {}, call_key="a")

    assert harness.receipts.receipts == []


class FailingSink:
    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_exception(OSError("disk full"))
        return future


async def test_a_receipt_that_cannot_be_stored_fails_the_run(make_harness: Any) -> None:
    harness = make_harness({"e": tool("aecho")}, hooks=["record_evidence"], receipts=FailingSink())

    with pytest.raises(ReceiptWriteFailed, match="disk full"):
        await harness.sequential([("1", "e", {})])
    await harness.engine.drain()

    assert engine_tools.STATE.evidence == []


async def test_a_sync_tool_cannot_dispatch_after_its_attempt_ended(make_harness: Any) -> None:
    state = engine_tools.STATE
    harness = make_harness({"late": tool("late_dispatch", timeout_s=0.02), "e": tool("aecho")})

    outcome = await harness.sequential([("1", "late", {"target": "e"})])
    assert outcome.receipts[0].status is Status.TIMED_OUT
    state.release.set()
    assert await asyncio.to_thread(state.thread_finished.wait, 10)

    assert state.contexts == [
        {"rejected": "dispatch to 'e' rejected: the parent call is no longer running"}
    ]
    assert len(harness.receipts.receipts) == 1


async def test_dispatch_sync_on_the_event_loop_is_refused(make_harness: Any) -> None:
    harness = make_harness({"p": tool("parent_sync_on_loop"), "e": tool("aecho")})

    outcome = await harness.sequential([("1", "p", {})])

    (receipt,) = outcome.receipts
    assert receipt.error is not None
    assert "would block the event loop" in receipt.error.message


class HeldSink:
    """Every receipt waits on one future, resolved by the test."""

    def __init__(self) -> None:
        self.held: asyncio.Future[None] | None = None

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        if self.held is None:
            self.held = asyncio.get_running_loop().create_future()
        return self.held


async def test_a_settled_run_gives_its_outcome_before_its_receipts_are_durable(
    make_harness: Any,
) -> None:
    sink = HeldSink()
    harness = make_harness({"e": tool("aecho")}, receipts=sink)
    run = harness.identity()
    plan = SequentialPlan(OWNER, (PlannedCall("a", "e", {"x": 1}),), run.context)

    settled = await harness.engine.settle_sequential(run, plan, [{"x": 1}])

    assert (settled.outcome.status, len(settled.outcome.receipts)) == ("succeeded", 1)
    assert settled.receipts == (sink.held,)
    assert settled.start is None
    assert sink.held is not None
    assert not sink.held.done()
    sink.held.set_result(None)  # what the sink's commit would do
    assert await settled.durable() is settled.outcome


async def test_a_settled_parallel_run_gives_its_outcome_too(make_harness: Any) -> None:
    harness = make_harness({"e": tool("aecho")})
    run = harness.identity()
    plan = ParallelPlan(OWNER, 2, (Lane("i1", (PlannedCall("a", "e", {"x": 1}),)),), run.context)

    settled = await harness.engine.settle_parallel(run, plan, [[{"x": 1}]])

    assert [len(lane.receipts) for lane in settled.outcome.lanes] == [1]
    assert len(settled.receipts) == 1
    assert await settled.durable() is settled.outcome


async def test_a_settled_run_holds_its_pending_start_apart_and_names_it_when_it_failed(
    make_harness: Any,
) -> None:
    harness = make_harness({"look": tool("aecho", effect="read")})
    run = harness.identity()
    plan = SequentialPlan(OWNER, (PlannedCall("a", "look", {"x": 1}),), run.context)
    start: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    settled = await harness.engine.settle_sequential(run, plan, [{"x": 1}], started=start)

    assert settled.outcome.status == "succeeded"  # a read does not wait for the start
    assert settled.start is start
    assert start not in settled.receipts
    start.set_exception(OSError("the disk is full"))
    with pytest.raises(ReceiptWriteFailed, match="the run's start could not be stored"):
        await settled.durable()


class TurnMarkingSink:
    """Receipts durable at once; each submit marks its seq once the loop turned once,
    and again once it turned twice."""

    def __init__(self) -> None:
        self.submitted: list[int] = []
        self.turned: set[int] = set()
        self.turned_twice: set[int] = set()

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self.submitted.append(receipt.seq)

        def turned(seq: int) -> None:
            self.turned.add(seq)
            loop.call_soon(self.turned_twice.add, seq)

        loop.call_soon(turned, receipt.seq)
        durable = loop.create_future()
        durable.set_result(None)
        return durable


@pytest.mark.parametrize("kind", ["sequential", "parallel"])
async def test_a_run_settles_before_the_sink_takes_its_last_receipt(
    make_harness: Any, kind: str
) -> None:
    # What the caller queues then (a run's end) can join the last receipt's
    # transaction: the writer lets the loop turn once before it takes one. A
    # sequential run settles in the step of its last receipt; a parallel one, whose
    # last receipt comes from a worker task, one turn later.
    sink = TurnMarkingSink()
    harness = make_harness({"s": tool("sleep_then_echo")}, receipts=sink)
    run = harness.identity()
    calls = [PlannedCall(f"c{n}", "s", {"delay_s": delay, "tag": f"t{n}"}) for n, delay in
             enumerate([0.03, 0, 0.01])]  # fmt: skip

    if kind == "sequential":
        plan: Any = SequentialPlan(OWNER, tuple(calls), run.context)
        args: Any = [call.args for call in calls]
        settled: Any = await harness.engine.settle_sequential(run, plan, args)
        last = sink.submitted[-1]
        assert last not in sink.turned
    else:
        lanes = tuple(Lane(f"i{n}", (call,)) for n, call in enumerate(calls))
        plan = ParallelPlan(OWNER, 3, lanes, run.context)
        args = [[call.args] for call in calls]
        settled = await harness.engine.settle_parallel(run, plan, args)
        last = sink.submitted[-1]
        assert last not in sink.turned_twice
        assert [lane.item_key for lane in settled.outcome.lanes] == ["i0", "i1", "i2"]
        assert last == 0  # the first lane, the slowest, ended last

    assert len(sink.submitted) == 3


async def test_a_cancelled_run_settles_nothing(make_harness: Any) -> None:
    harness = make_harness({"hang": tool("hang")})
    run = harness.identity()
    plan = SequentialPlan(OWNER, (PlannedCall("a", "hang", {}),), run.context)
    seen: list[object] = []

    async def settle() -> None:
        seen.append(await harness.engine.settle_sequential(run, plan, [{}]))

    engine_tools.STATE.started = asyncio.Event()
    task = asyncio.create_task(settle())
    await engine_tools.STATE.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert seen == []
