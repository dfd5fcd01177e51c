"""Sync callables and admission: a timed-out call's thread keeps its tool's slot until
it really ends, and a call that never got a worker thread times out "not started"."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from app.engine.ports import AuditKind
from app.engine.receipt import ErrorKind, Status
from tests.engine import thread_tools
from tests.engine.harness import tool
from tests.support.waiting import wait_for

TOOLS_MODULE = "tests.engine.thread_tools"
SLEEP_S = 0.2
TIMEOUT_S = 0.02


def thread_tool(function: str, **options: Any) -> dict[str, Any]:
    return tool(function, callable=f"{TOOLS_MODULE}:{function}", **options)


@pytest.fixture(autouse=True)
def _fresh_threads() -> Iterator[None]:
    thread_tools.reset()
    yield
    thread_tools.INSIDE.release.set()


async def _until_threads_left(count: int) -> None:
    await wait_for(lambda: thread_tools.INSIDE.left >= count, "the tool's threads ended")


async def test_a_timed_out_sync_call_keeps_its_slot_until_its_thread_ends(
    make_harness: Any,
) -> None:
    harness = make_harness(
        {"held": thread_tool("sleep_inside", timeout_s=TIMEOUT_S, max_concurrency=1)},
        worker_threads=8,
    )
    lanes = [(str(n), [("1", "held", {"seconds": SLEEP_S})]) for n in range(4)]

    outcome = await harness.parallel(lanes, max_concurrency=4)
    await _until_threads_left(4)

    assert [lane.receipts[0].status for lane in outcome.lanes] == [Status.TIMED_OUT] * 4
    assert thread_tools.INSIDE.entered == 4
    assert thread_tools.INSIDE.peak == 1


async def test_a_sync_call_that_never_got_a_worker_thread_times_out_not_started(
    make_harness: Any,
) -> None:
    harness = make_harness(
        {
            "hold": thread_tool("hold_the_thread", timeout_s=60),
            "late": thread_tool("never_expected", timeout_s=TIMEOUT_S),
        },
        worker_threads=1,
    )
    holding = asyncio.create_task(harness.sequential([("1", "hold", {})]))
    await wait_for(thread_tools.INSIDE.holding.is_set, "the thread is held")

    outcome = await harness.sequential([("1", "late", {})])
    thread_tools.INSIDE.release.set()
    await holding

    (receipt,) = outcome.receipts
    assert receipt.status is Status.TIMED_OUT
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.TIMEOUT
    assert receipt.error.message.startswith("not started: no worker thread was free")
    assert receipt.error.outcome_unknown is False
    # It never ran, not even once the thread was free again.
    await harness.sequential([("1", "hold", {})])
    assert thread_tools.INSIDE.entered == 0


async def test_a_sync_call_cancelled_while_waiting_for_a_thread_is_not_started(
    make_harness: Any,
) -> None:
    harness = make_harness(
        {
            "hold": thread_tool("hold_the_thread", timeout_s=60),
            "late": thread_tool("never_expected", timeout_s=60),
        },
        worker_threads=1,
    )
    holding = asyncio.create_task(harness.sequential([("1", "hold", {})]))
    await wait_for(thread_tools.INSIDE.holding.is_set, "the thread is held")
    waiting = asyncio.create_task(harness.sequential([("1", "late", {})]))
    await wait_for(
        lambda: any(event.tool == "late" for event in harness.events(AuditKind.CALL_STARTED)),
        "the late call started",
    )

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    thread_tools.INSIDE.release.set()
    await holding
    await harness.sequential([("1", "hold", {})])

    (receipt,) = [r for r in harness.receipts.receipts if r.tool == "late"]
    assert receipt.status is Status.SKIPPED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.CANCELLED
    assert receipt.error.message.startswith("not started")
    assert receipt.error.outcome_unknown is False
    assert thread_tools.INSIDE.entered == 0
