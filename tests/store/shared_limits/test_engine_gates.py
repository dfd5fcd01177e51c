"""The engine's gates on the PostgreSQL store: two engines (two processes' worth)
hold a tool's limit together, a plan still narrows it, and a call that cannot get
a slot before its run's deadline or is cancelled while waiting holds nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from app.engine.receipt import ErrorKind, Status
from tests.engine import engine_tools
from tests.engine.harness import Harness, build_harness, tool, write_contract
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


@pytest.fixture
async def make_engine(
    tmp_path: Path, open_limits: Callable[..., Any]
) -> AsyncIterator[Callable[..., Any]]:
    engine_tools.reset()
    made: list[Harness] = []

    async def make(tools: dict[str, Any]) -> tuple[Harness, Any]:
        limits = await open_limits(poll_s=0.05)
        contract = write_contract(tmp_path, tools, name=f"registry{len(made)}.yml")
        harness = build_harness(contract, shared_limits=limits)
        made.append(harness)
        return harness, limits

    yield make
    for harness in made:
        await harness.engine.aclose()


def lanes(count: int, tool_id: str, delay_s: float) -> list[Any]:
    return [(f"lane{i}", [("1", tool_id, {"delay_s": delay_s})]) for i in range(count)]


async def test_two_engines_hold_one_limit_and_a_plan_narrows_it(
    make_engine: Callable[..., Any],
) -> None:
    tools = {"c": tool("counted", max_concurrency=3, effect="read")}
    (first, _), (second, _) = await make_engine(tools), await make_engine(tools)

    outcomes = await asyncio.gather(
        first.parallel(lanes(6, "c", 0.02), max_concurrency=6),
        second.parallel(lanes(6, "c", 0.02), max_concurrency=6),
    )

    assert engine_tools.STATE.max_in_flight["c"] == 3
    receipts = [r for outcome in outcomes for lane in outcome.lanes for r in lane.receipts]
    assert {r.status for r in receipts} == {Status.SUCCEEDED}

    engine_tools.reset()
    await first.parallel(lanes(6, "c", 0.02), max_concurrency=2)
    assert engine_tools.STATE.max_in_flight["c"] == 2


async def test_a_call_that_gets_no_slot_before_the_deadline_holds_nothing(
    make_engine: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    tools = {"c": tool("counted", max_concurrency=1, effect="read")}
    (holder, _), (late, late_limits) = await make_engine(tools), await make_engine(tools)
    holding = asyncio.create_task(holder.sequential([("1", "c", {"delay_s": 3600})]))
    await wait_for(lambda: engine_tools.STATE.in_flight.get("c") == 1, "the holder runs")

    outcome = await late.sequential([("1", "c", {"delay_s": 0})], deadline_s=0.3)

    [receipt] = outcome.receipts
    assert receipt.status is Status.SKIPPED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.DEADLINE
    assert late_limits.held.get("c", 0) == 0
    assert advisory_locks() == 1
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding
    await wait_for(lambda: advisory_locks() == 0, "the holder's slot is given back")


async def test_a_run_cancelled_while_waiting_for_a_slot_holds_nothing(
    make_engine: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    tools = {"c": tool("counted", max_concurrency=1, rate_limit={"per_second": 100, "burst": 1})}
    (holder, _), (waiter, waiter_limits) = await make_engine(tools), await make_engine(tools)
    holding = asyncio.create_task(holder.sequential([("1", "c", {"delay_s": 3600})]))
    await wait_for(lambda: engine_tools.STATE.in_flight.get("c") == 1, "the holder runs")
    waiting = asyncio.create_task(waiter.sequential([("1", "c", {"delay_s": 0})]))
    await wait_for(lambda: waiter_limits._wakeups.get("c") is not None, "the waiter waits")

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding

    await wait_for(lambda: advisory_locks() == 0, "no slot is locked")
    assert waiter_limits.held.get("c", 0) == 0


async def test_a_lone_engine_calls_a_limited_tool_again_with_no_statement(
    make_engine: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    tools = {"c": tool("counted", max_concurrency=2, effect="read")}
    engine, limits = await make_engine(tools)
    await engine.sequential([("1", "c", {"delay_s": 0})])
    await wait_for(lambda: not limits._tasks, "nothing left to send")
    sent = limits.statements

    for _ in range(20):
        outcome = await engine.sequential([("1", "c", {"delay_s": 0})])
        assert [r.status for r in outcome.receipts] == [Status.SUCCEEDED]

    assert limits.statements == sent
    assert limits.idle == {"c": 1}
    assert advisory_locks() == 1


async def test_an_engine_waiting_for_a_slot_gets_the_other_engines_idle_one(
    make_engine: Callable[..., Any], advisory_locks: Callable[[], int]
) -> None:
    tools = {"c": tool("counted", max_concurrency=1, effect="read")}
    (first, first_limits), (second, _) = await make_engine(tools), await make_engine(tools)
    await first.sequential([("1", "c", {"delay_s": 0})])
    assert first_limits.idle == {"c": 1}

    # The second polls every 0.05 s, but the slot is locked until the first unlocks it.
    outcome = await asyncio.wait_for(second.sequential([("1", "c", {"delay_s": 0})]), 60.0)

    assert [r.status for r in outcome.receipts] == [Status.SUCCEEDED]
    assert first_limits.idle.get("c", 0) == 0
    assert advisory_locks() == 1
