"""Cancelling the task that runs a plan: running calls are cancelled, the rest skipped."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.engine.receipt import ErrorKind, Status
from tests.engine import engine_tools
from tests.engine.harness import tool
from tests.support.waiting import wait_for


async def test_cancelling_a_sequential_plan(make_harness: Any) -> None:
    engine_tools.STATE.started = asyncio.Event()
    harness = make_harness({"h": tool("hang"), "e": tool("echo")})

    running = asyncio.create_task(harness.sequential([("1", "h", {}), ("2", "e", {})]))
    await engine_tools.STATE.started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    cancelled, skipped = harness.receipts.receipts
    assert cancelled.status is Status.FAILED
    assert cancelled.error is not None
    assert cancelled.error.kind is ErrorKind.CANCELLED
    assert cancelled.error.outcome_unknown is True  # non_idempotent by default
    assert cancelled.attempts == 1
    assert skipped.status is Status.SKIPPED
    assert skipped.error is not None
    assert skipped.error.kind is ErrorKind.CANCELLED
    assert engine_tools.STATE.cancelled == ["1"]
    assert "echo" not in engine_tools.STATE.calls


async def test_cancelling_a_parallel_plan_gives_every_call_a_receipt(make_harness: Any) -> None:
    harness = make_harness({"h": tool("hang", effect="read")})

    running = asyncio.create_task(
        harness.parallel(
            [(f"lane{i}", [("1", "h", {}), ("2", "h", {})]) for i in range(4)],
            max_concurrency=2,
        )
    )
    await wait_for(lambda: engine_tools.STATE.calls.get("h") == 2, every_s=0)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    receipts = sorted(harness.receipts.receipts, key=lambda r: r.seq)
    assert [r.seq for r in receipts] == list(range(8))
    assert [(r.item_key, r.call_key, r.status) for r in receipts] == [
        ("lane0", "1", Status.FAILED),
        ("lane0", "2", Status.SKIPPED),
        ("lane1", "1", Status.FAILED),
        ("lane1", "2", Status.SKIPPED),
        *[(f"lane{i}", key, Status.SKIPPED) for i in (2, 3) for key in ("1", "2")],
    ]
    assert {r.error.kind for r in receipts if r.error} == {ErrorKind.CANCELLED}
    assert receipts[0].error is not None
    assert receipts[0].error.outcome_unknown is False  # effect read
    assert sorted(engine_tools.STATE.cancelled) == ["1", "1"]


async def test_cancelling_while_a_sync_tool_runs(make_harness: Any) -> None:
    state = engine_tools.STATE
    harness = make_harness({"b": tool("block")})

    running = asyncio.create_task(harness.sequential([("1", "b", {})]))
    assert await asyncio.to_thread(state.thread_entered.wait, 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    state.release.set()

    (receipt,) = harness.receipts.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.CANCELLED
    assert "cannot be stopped" in receipt.error.message


async def test_a_call_waiting_for_admission_is_skipped(make_harness: Any) -> None:
    engine_tools.STATE.started = asyncio.Event()
    harness = make_harness({"h": tool("hang", max_concurrency=1, effect="read")})

    holder = asyncio.create_task(harness.sequential([("1", "h", {})]))
    await engine_tools.STATE.started.wait()
    waiter = asyncio.create_task(harness.sequential([("1", "h", {})]))
    await wait_for(lambda: harness.events(), every_s=0)  # the holder's started event
    for _ in range(5):
        await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder

    by_status = {r.status: r for r in harness.receipts.receipts}
    assert set(by_status) == {Status.SKIPPED, Status.FAILED}
    skipped = by_status[Status.SKIPPED]
    assert skipped.attempts == 0
    assert skipped.error is not None
    assert skipped.error.kind is ErrorKind.CANCELLED
    assert skipped.admission_wait_ms > 0
    assert engine_tools.STATE.calls["h"] == 1


async def test_an_outer_timeout_still_raises_timeout_error(make_harness: Any) -> None:
    harness = make_harness({"h": tool("hang", timeout_s=30)})

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.02):
            await harness.sequential([("1", "h", {})])

    (receipt,) = harness.receipts.receipts
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.CANCELLED
