"""Per-call timeouts, the run deadline, and sync callables that cannot be stopped."""

from __future__ import annotations

import asyncio
from typing import Any

from app.engine.ports import AuditKind
from app.engine.receipt import ErrorKind, Status
from app.engine.watchdog import effective_timeout
from tests.engine import engine_tools
from tests.engine.harness import tool


def test_effective_timeout_is_the_smaller_of_tool_timeout_and_remaining_deadline() -> None:
    assert effective_timeout(5.0, None, 100.0) == 5.0
    assert effective_timeout(5.0, 102.0, 100.0) == 2.0
    assert effective_timeout(1.0, 102.0, 100.0) == 1.0


async def test_async_tool_is_cancelled_at_its_timeout(make_harness: Any) -> None:
    harness = make_harness({"h": tool("hang", timeout_s=0.02, effect="read")})

    outcome = await harness.sequential([("1", "h", {})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.TIMED_OUT
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.TIMEOUT
    assert receipt.error.outcome_unknown is False
    assert receipt.output is None
    assert engine_tools.STATE.cancelled == ["1"]
    (timed_out,) = harness.events(AuditKind.CALL_TIMED_OUT)
    assert timed_out.detail["limit"] == "tool"
    assert timed_out.detail["timeout_s"] == 0.02


async def test_tool_raising_its_own_timeout_error_is_an_exception(make_harness: Any) -> None:
    harness = make_harness({"t": tool("own_timeout", timeout_s=30)})

    outcome = await harness.sequential([("1", "t", {})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.EXCEPTION
    assert receipt.error.message == "TimeoutError: the upstream socket timed out"


async def test_sync_tool_times_out_without_blocking_the_loop_and_its_late_result_is_dropped(
    make_harness: Any,
) -> None:
    state = engine_tools.STATE
    harness = make_harness({"b": tool("block", timeout_s=0.05, effect="read")})
    ticks_while_blocked = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks_while_blocked
        while not stop.is_set():
            if state.thread_entered.is_set() and not state.thread_finished.is_set():
                ticks_while_blocked += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    outcome = await harness.sequential([("1", "b", {})])
    stop.set()
    await ticking

    (receipt,) = outcome.receipts
    assert receipt.status is Status.TIMED_OUT
    assert receipt.error is not None
    assert "cannot be stopped" in receipt.error.message
    assert ticks_while_blocked > 0
    assert not state.thread_finished.is_set()

    state.release.set()
    assert await asyncio.to_thread(state.thread_finished.wait, 10)
    await harness.engine.drain()
    assert harness.receipts.receipts == [receipt]
    assert receipt.output is None


async def test_plan_deadline_cuts_a_call_short_and_skips_the_rest(make_harness: Any) -> None:
    harness = make_harness({"h": tool("hang", timeout_s=30), "e": tool("echo")})

    outcome = await harness.sequential([("1", "h", {}), ("2", "e", {})], deadline_s=0.05)

    first, second = outcome.receipts
    assert first.status is Status.TIMED_OUT
    assert first.error is not None
    assert first.error.kind is ErrorKind.DEADLINE
    assert "deadline" in first.error.message
    assert second.status is Status.SKIPPED
    assert second.error is not None
    assert second.error.kind is ErrorKind.DEADLINE
    assert engine_tools.STATE.calls.get("echo") is None
    (timed_out,) = harness.events(AuditKind.CALL_TIMED_OUT)
    assert timed_out.detail["limit"] == "deadline"
    assert timed_out.detail["timeout_s"] <= 0.05


async def test_lanes_that_cannot_start_before_the_deadline_are_skipped(
    make_harness: Any,
) -> None:
    harness = make_harness({"h": tool("hang", timeout_s=30, effect="read")})

    outcome = await harness.parallel(
        [(f"lane{i}", [("1", "h", {}), ("2", "h", {})]) for i in range(3)],
        max_concurrency=1,
        deadline_s=0.05,
    )

    first, *rest = outcome.lanes
    assert [r.status for r in first.receipts] == [Status.TIMED_OUT, Status.SKIPPED]
    for lane in rest:
        assert [r.status for r in lane.receipts] == [Status.SKIPPED, Status.SKIPPED]
        assert {r.error.kind for r in lane.receipts if r.error} == {ErrorKind.DEADLINE}
    assert engine_tools.STATE.calls == {"h": 1}
