"""The pipeline's one-frame common path and the rare branches beside it."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from app.engine.context import ExecutionContext
from app.engine.pipeline import CallPipeline
from app.engine.ports import AuditEvent, AuditKind
from app.engine.receipt import ErrorKind, Receipt, Status
from app.engine.watchdog import Deadlines
from tests.engine import engine_tools
from tests.engine.harness import tool


async def test_receipts_and_audit_events_are_built_whole(make_harness: Any) -> None:
    harness = make_harness({"n": tool("noop")})

    outcome = await harness.sequential([("1", "n", {}), ("2", "n", {})])

    first, second = outcome.receipts
    for receipt in (first, second):
        assert len(receipt) == len(Receipt._fields)
        assert receipt.status is Status.SUCCEEDED
        assert receipt.idempotency_key == f"{receipt.run_id}:{receipt.seq}"
        assert receipt.admission_wait_ms == 0.0
        assert receipt.duration_ms >= 0.0
        assert receipt.finished_at >= receipt.started_at
        assert len(receipt.receipt_id) == 32
        int(receipt.receipt_id, 16)
    assert first.receipt_id != second.receipt_id
    for event in harness.events():
        assert isinstance(event, AuditEvent)
        assert len(event) == len(AuditEvent._fields)
    started, finished = (
        harness.events(AuditKind.CALL_STARTED),
        harness.events(AuditKind.CALL_FINISHED),
    )
    assert [event.detail["receipt_id"] for event in started] == [
        first.receipt_id,
        second.receipt_id,
    ]
    assert finished[0].detail == {
        "receipt_id": first.receipt_id,
        "seq": first.seq,
        "parent_receipt_id": None,
        "status": "succeeded",
        "attempts": 1,
        "duration_ms": first.duration_ms,
        "error": None,
    }
    assert type(finished[0].detail["status"]) is str


async def test_a_callable_raising_cancelled_error_itself_fails_only_its_call(
    make_harness: Any,
) -> None:
    harness = make_harness({"c": tool("raise_cancelled", effect="read"), "n": tool("noop")})

    outcome = await harness.sequential([("1", "c", {})])
    after = await harness.sequential([("1", "n", {})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.EXCEPTION
    assert receipt.error.message == "CancelledError raised by the callable"
    assert after.receipts[0].status is Status.SUCCEEDED


async def test_system_exit_from_a_callable_is_its_failure(make_harness: Any) -> None:
    harness = make_harness({"x": tool("raise_exit")})

    outcome = await harness.sequential([("1", "x", {})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.message == "SystemExit: the tool tried to exit"


async def test_a_call_the_callable_refuses_at_once_fails_inside_the_watchdog(
    make_harness: Any,
) -> None:
    harness = make_harness({"n": tool("noop")})  # input schema {} admits any arguments

    outcome = await harness.sequential([("1", "n", {"unexpected": 1})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.EXCEPTION
    assert "unexpected keyword argument" in receipt.error.message
    assert receipt.attempts == 1


@pytest.mark.parametrize(
    "limits",
    [
        {"max_concurrency": 2},
        {"rate_limit": {"per_second": 1000.0, "burst": 100}},
        {"max_concurrency": 2, "rate_limit": {"per_second": 1000.0, "burst": 100}},
        # One token at a time: every call after the first waits for the bucket.
        {"rate_limit": {"per_second": 1000.0, "burst": 1}},
    ],
)
async def test_every_kind_of_gate_admits_and_releases(make_harness: Any, limits: Any) -> None:
    harness = make_harness({"c": tool("counted", effect="read", **limits)})

    outcome = await harness.parallel(
        [
            (f"lane{i}", [("1", "c", {"delay_s": 0.0}), ("2", "c", {"delay_s": 0.0})])
            for i in range(6)
        ],
        max_concurrency=6,
    )

    receipts = [receipt for lane in outcome.lanes for receipt in lane.receipts]
    assert all(receipt.status is Status.SUCCEEDED for receipt in receipts)
    if limits.get("rate_limit", {}).get("burst") == 1:
        assert any(receipt.admission_wait_ms > 0 for receipt in receipts)  # it waited
    if "max_concurrency" in limits:
        assert engine_tools.STATE.max_in_flight["c"] <= 2
        slots = harness.engine._pipeline._specs["c"].gate.slots
        assert slots.free == 2  # every slot given back


async def test_the_execution_context_is_read_only(make_harness: Any) -> None:
    harness = make_harness({"w": tool("awhoami")})
    outcome = await harness.sequential([("1", "w", {})])
    assert outcome.receipts[0].output["attempt"] == 1
    context = ExecutionContext.__new__(ExecutionContext)
    with pytest.raises(AttributeError):
        context.attempt = 2  # type: ignore[misc]


async def test_the_deadline_clock_is_the_loop_clock() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    before = loop.time()
    now = deadlines.now()
    assert before <= now <= loop.time()

    class OwnClock(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return 42.0

    other = OwnClock()
    try:
        assert Deadlines(other).now() == 42.0
    finally:
        other.close()


def test_the_call_coroutine_stays_a_small_object() -> None:
    # Above 512 bytes CPython allocates an object with malloc instead of its own
    # small-object allocator, a cost `execute` would pay once per call.
    pipeline: Any = None
    coroutine = CallPipeline.execute(pipeline, None, None, {}, 0, "k", None, [])  # type: ignore[arg-type]
    try:
        assert sys.getsizeof(coroutine) <= 512
    finally:
        coroutine.close()


def test_duration_rounding_matches_round_half_to_even() -> None:
    # `_settle` rounds microseconds with _ROUNDER instead of round(): same results.
    from app.engine.pipeline import _ROUNDER

    samples = [i / 2 for i in range(20_000)] + [k + 0.5 for k in range(0, 10**9, 999_983)]
    samples += [0.49999999999999994, 1e-300, 2.0**50 + 0.5, 123456.789]
    for micros in samples:
        assert (micros + _ROUNDER - _ROUNDER) / 1000.0 == round(micros) / 1000.0, micros
