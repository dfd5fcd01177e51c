"""The confirmation gate: a `requires_confirmation` tool runs only once its exact call
was approved, on every path the engine offers (plans, lanes, dispatch, run_call)."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.confirmation import ConfirmationDecision, args_digest
from app.engine.errors import CallRejected
from app.engine.plan import Lane, ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.preflight import preflight_parallel, preflight_sequential
from app.engine.receipt import ErrorKind, Status
from app.engine.run import RunKind
from tests.engine import engine_tools
from tests.engine.harness import OWNER, tool


def _tools() -> dict[str, Any]:
    return {
        "e": tool("echo"),
        "risky": tool("aecho", requires_confirmation=True),
        "parent": tool("parent_async"),
    }


def _sequential(calls: list[tuple[str, str, dict[str, Any]]]) -> SequentialPlan:
    return SequentialPlan(OWNER, tuple(PlannedCall(k, t, a) for k, t, a in calls))


async def _run_sequential(
    harness: Any,
    calls: list[tuple[str, str, dict[str, Any]]],
    decisions: dict[tuple[str | None, str], ConfirmationDecision] | None = None,
) -> Any:
    plan = _sequential(calls)
    checked = preflight_sequential(plan, harness.contract, PlanLimits())
    return await harness.engine.run_sequential(
        harness.identity(), plan, checked.admitted, decisions=decisions
    )


async def test_a_plan_stops_before_an_unconfirmed_call_and_lists_it(make_harness: Any) -> None:
    harness = make_harness(_tools())

    outcome = await _run_sequential(
        harness, [("c1", "e", {"i": 1}), ("c2", "risky", {"i": 2}), ("c3", "e", {"i": 3})]
    )

    assert outcome.status == "pending"
    assert [r.call_key for r in outcome.receipts] == ["c1"]
    (waiting,) = outcome.waiting
    assert (waiting.call_key, waiting.tool, waiting.seq) == ("c2", "risky", 1)
    assert waiting.args == {"i": 2}
    assert waiting.args_digest == args_digest({"i": 2})
    assert engine_tools.STATE.calls.get("aecho", 0) == 0
    body = outcome.to_response()
    assert body["status"] == "pending"
    assert body["pending"] == [
        {
            "confirmation_id": waiting.confirmation_id,
            "call_key": "c2",
            "item_key": None,
            "tool": "risky",
            "args_digest": waiting.args_digest,
        }
    ]
    assert [s["call_key"] for s in harness.receipts.stored(outcome.run_id)] == ["c1"]


async def test_an_approval_for_the_exact_arguments_lets_the_call_run(make_harness: Any) -> None:
    harness = make_harness(_tools())
    approved = {(None, "c2"): ConfirmationDecision(args_digest({"i": 2}), True)}

    outcome = await _run_sequential(
        harness, [("c1", "e", {}), ("c2", "risky", {"i": 2}), ("c3", "e", {})], approved
    )

    assert outcome.status == "succeeded"
    assert [r.status for r in outcome.receipts] == [Status.SUCCEEDED] * 3
    assert engine_tools.STATE.calls["aecho"] == 1


async def test_an_approval_for_other_arguments_does_not_count(make_harness: Any) -> None:
    harness = make_harness(_tools())
    approved = {(None, "c1"): ConfirmationDecision(args_digest({"i": 9}), True)}

    outcome = await _run_sequential(harness, [("c1", "risky", {"i": 2})], approved)

    assert outcome.status == "pending"
    assert outcome.receipts == ()
    assert engine_tools.STATE.calls.get("aecho", 0) == 0


async def test_a_rejection_is_a_denied_receipt_and_skips_the_rest(make_harness: Any) -> None:
    harness = make_harness(_tools())
    rejected = {(None, "c2"): ConfirmationDecision(args_digest({}), False, "not today")}

    outcome = await _run_sequential(
        harness, [("c1", "e", {}), ("c2", "risky", {}), ("c3", "e", {})], rejected
    )

    assert outcome.status == "failed"
    statuses = [r.status for r in outcome.receipts]
    assert statuses == [Status.SUCCEEDED, Status.DENIED, Status.SKIPPED]
    denied = outcome.receipts[1]
    assert denied.error is not None
    assert denied.error.kind is ErrorKind.CONFIRMATION
    assert "not today" in denied.error.message
    assert denied.attempts == 0
    assert engine_tools.STATE.calls.get("aecho", 0) == 0


async def test_a_waiting_lane_does_not_hold_up_the_others(make_harness: Any) -> None:
    harness = make_harness(_tools())
    plan = ParallelPlan(
        OWNER,
        4,
        (
            Lane("a", (PlannedCall("1", "e", {}), PlannedCall("2", "risky", {}))),
            Lane("b", (PlannedCall("1", "e", {}), PlannedCall("2", "e", {}))),
        ),
    )
    checked = preflight_parallel(plan, harness.contract, PlanLimits())

    outcome = await harness.engine.run_parallel(harness.identity(), plan, checked.admitted)

    assert outcome.status == "pending"
    assert [lane.status for lane in outcome.lanes] == ["pending", "succeeded"]
    assert len(outcome.lanes[0].receipts) == 1
    assert len(outcome.lanes[1].receipts) == 2
    (waiting,) = outcome.waiting
    assert (waiting.item_key, waiting.call_key, waiting.seq) == ("a", "2", 1)
    assert outcome.to_response()["pending"][0]["item_key"] == "a"


async def test_a_dispatch_to_a_tool_that_needs_confirmation_is_refused(
    make_harness: Any,
) -> None:
    harness = make_harness(_tools())

    outcome = await _run_sequential(
        harness, [("p", "parent", {"target": "risky", "args": {"x": 1}})]
    )

    (parent,) = outcome.receipts
    assert parent.status is Status.SUCCEEDED
    assert "requires a confirmation" in parent.output["rejected"]
    assert engine_tools.STATE.calls.get("aecho", 0) == 0


@pytest.mark.parametrize("confirmed", [None, ConfirmationDecision("sha256:other", True)])
async def test_run_call_refuses_an_unconfirmed_call(
    make_harness: Any, confirmed: ConfirmationDecision | None
) -> None:
    harness = make_harness(_tools())
    state = harness.engine.open_run(harness.identity(), RunKind.ROUTER)

    with pytest.raises(CallRejected, match="requires a confirmation"):
        await harness.engine.run_call(
            state, "risky", {"x": 1}, call_key="t0c0", confirmed=confirmed
        )

    assert engine_tools.STATE.calls.get("aecho", 0) == 0
    receipt = await harness.engine.run_call(
        state,
        "risky",
        {"x": 1},
        call_key="t0c1",
        confirmed=ConfirmationDecision(args_digest({"x": 1}), True),
    )
    assert receipt.status is Status.SUCCEEDED
