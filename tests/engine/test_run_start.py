"""A run whose start is queued, not yet durable (`started`): what may run before it is."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.engine.errors import ReceiptWriteFailed
from app.engine.parallel import ParallelOutcome
from app.engine.plan import Lane, ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.ports import AuditKind
from app.engine.preflight import preflight_parallel, preflight_sequential
from app.engine.receipt import ErrorKind, Status
from app.engine.sequential import SequentialOutcome
from tests.engine import engine_tools
from tests.engine.harness import OWNER, Call, Harness, tool
from tests.support.waiting import wait_for

READ = {"effect": "read"}


class Start(asyncio.Future[None]):
    """The run's queued start; `awaited` is set once the run waits for it to be durable."""

    def __init__(self) -> None:
        super().__init__()
        self.awaited = asyncio.Event()

    def add_done_callback(self, fn: Any, *, context: Any = None) -> None:
        self.awaited.set()
        super().add_done_callback(fn, context=context)


def tools() -> dict[str, Any]:
    return {
        "look": tool("aecho", **READ),
        "look_sync": tool("echo", **READ),
        "write": tool("aecho"),  # effect: non_idempotent, the default
        "write_once": tool("aecho", effect="idempotent"),
        "parent": tool("parent_async", **READ),
        "slow": tool("sleep_then_echo", **READ),
    }


async def sequential(
    harness: Harness, calls: list[Call], started: asyncio.Future[None]
) -> SequentialOutcome:
    plan = SequentialPlan(
        owner=OWNER, calls=tuple(PlannedCall(key, name, args) for key, name, args in calls)
    )
    checked = preflight_sequential(plan, harness.contract, PlanLimits())
    assert checked.ok, checked.problems
    return await harness.engine.run_sequential(
        harness.identity(), plan, checked.admitted, started=started
    )


async def parallel(
    harness: Harness, lanes: list[tuple[str, list[Call]]], started: asyncio.Future[None]
) -> ParallelOutcome:
    plan = ParallelPlan(
        owner=OWNER,
        max_concurrency=4,
        lanes=tuple(
            Lane(item, tuple(PlannedCall(key, name, args) for key, name, args in calls))
            for item, calls in lanes
        ),
    )
    checked = preflight_parallel(plan, harness.contract, PlanLimits())
    assert checked.ok, checked.problems
    return await harness.engine.run_parallel(
        harness.identity(), plan, checked.admitted, started=started
    )


def calls_of(name: str) -> int:
    return engine_tools.STATE.calls.get(name, 0)


async def test_read_calls_run_before_the_start_is_durable_and_the_run_waits_for_it(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())
    started = Start()

    run = asyncio.create_task(
        sequential(harness, [("a", "look", {"n": 1}), ("b", "look_sync", {"n": 2})], started)
    )
    await wait_for(lambda: calls_of("aecho") == 1 and calls_of("echo") == 1, every_s=0)
    await started.awaited.wait()
    assert not run.done()  # every call ran; the start is not durable yet

    started.set_result(None)
    outcome = await run
    assert [r.status for r in outcome.receipts] == [Status.SUCCEEDED, Status.SUCCEEDED]


@pytest.mark.parametrize("name", ["write", "write_once"])
async def test_a_call_with_effects_waits_for_the_start(make_harness: Any, name: str) -> None:
    harness = make_harness(tools())
    started = Start()

    run = asyncio.create_task(
        sequential(harness, [("a", "look", {"n": 1}), ("b", name, {"n": 2})], started)
    )
    await wait_for(lambda: calls_of("aecho") == 1, every_s=0)
    await started.awaited.wait()
    assert calls_of("aecho") == 1  # the read call ran; the other waits
    assert [e.call_key for e in harness.events(AuditKind.CALL_STARTED)] == ["a"]

    started.set_result(None)
    outcome = await run
    assert calls_of("aecho") == 2
    assert [r.status for r in outcome.receipts] == [Status.SUCCEEDED, Status.SUCCEEDED]


async def test_once_the_start_is_durable_calls_with_effects_go_on_without_waiting(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())
    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    started.set_result(None)

    outcome = await sequential(harness, [("a", "write", {}), ("b", "write", {})], started)

    assert [r.status for r in outcome.receipts] == [Status.SUCCEEDED, Status.SUCCEEDED]


async def test_a_call_with_effects_dispatched_by_a_read_tool_waits_for_the_start(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())
    started = Start()

    run = asyncio.create_task(
        sequential(harness, [("p", "parent", {"target": "write", "args": {"n": 1}})], started)
    )
    await wait_for(lambda: len(harness.events(AuditKind.CALL_STARTED)) == 1, every_s=0)
    await started.awaited.wait()
    assert calls_of("aecho") == 0  # the parent runs; its child waits for the start

    started.set_result(None)
    outcome = await run
    (child,) = outcome.dispatched
    assert child.status is Status.SUCCEEDED
    assert calls_of("aecho") == 1


async def test_once_the_start_failed_no_call_starts_and_the_run_fails(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())
    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    started.set_exception(RuntimeError("database gone"))

    with pytest.raises(ReceiptWriteFailed, match="the run's start could not be stored"):
        await sequential(harness, [("a", "look", {}), ("b", "write", {})], started)

    assert calls_of("aecho") == 0
    assert harness.events(AuditKind.CALL_STARTED) == []


async def test_a_start_failing_while_read_calls_run_stops_the_calls_after_it(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())
    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    calls = [(key, "slow", {"delay_s": 0.001, "tag": key}) for key in "abcd"]

    run = asyncio.create_task(sequential(harness, calls, started))
    await wait_for(lambda: len(harness.events(AuditKind.CALL_STARTED)) == 1, every_s=0)
    started.set_exception(RuntimeError("database gone"))

    with pytest.raises(ReceiptWriteFailed, match="the run's start could not be stored"):
        await run
    assert engine_tools.STATE.completions == ["a"]  # running when the start failed
    by_key = {r.call_key: r for r in harness.receipts.receipts}
    assert by_key["a"].status is Status.SUCCEEDED
    assert by_key["b"].status is Status.SKIPPED
    assert by_key["b"].error is not None
    assert by_key["b"].error.message == "not started: the run's start could not be recorded"
    assert {by_key[key].status for key in "cd"} == {Status.SKIPPED}


async def test_a_parallel_run_whose_start_failed_runs_no_lane_and_fails_with_the_write_error(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())
    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    started.set_exception(RuntimeError("database gone"))

    with pytest.raises(ReceiptWriteFailed, match="the run's start could not be stored"):
        await parallel(
            harness,
            [("x", [("a", "look", {})]), ("y", [("b", "write", {})]), ("z", [("c", "look", {})])],
            started,
        )

    assert calls_of("aecho") == 0


async def test_a_skipped_call_says_the_start_could_not_be_recorded(make_harness: Any) -> None:
    harness = make_harness(tools())
    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    started.set_exception(RuntimeError("database gone"))
    run_state = harness.engine.open_run(harness.identity(), started=started)

    with pytest.raises(ReceiptWriteFailed):
        await harness.engine.run_call(run_state, "look", {}, call_key="a")

    (receipt,) = [r for r in harness.receipts.receipts if r.call_key == "a"]
    assert receipt.status is Status.SKIPPED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.INTERRUPTED
    assert receipt.error.message == "not started: the run's start could not be recorded"
