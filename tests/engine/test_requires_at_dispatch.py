"""`requires` checked again when a call is about to start: plan calls, dispatched calls."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from app.engine.plan import Lane, ParallelPlan, PlannedCall, SequentialPlan
from app.engine.ports import AuditKind
from app.engine.receipt import ErrorKind, Status
from app.engine.resume import ResumePoint
from app.engine.sequential import SequentialOutcome
from tests.engine import requires_tools
from tests.engine.harness import OWNER, Call, Harness, tool

MODULE = "tests.engine.requires_tools"
AFTER_FETCH_IN_RUN = "it requires a successful 'fetch' call earlier in this run"
AFTER_FETCH_IN_LANE = "it requires a successful 'fetch' call earlier in its lane"
ONCE = "it may run at most 1 time(s) per run"


def tools() -> dict[str, Any]:
    return {
        "fetch": tool("aecho", callable=f"{MODULE}:fetch"),
        "publish": tool("aecho", callable=f"{MODULE}:publish", requires={"after": ["fetch"]}),
        "once": tool("aecho", callable=f"{MODULE}:publish", requires={"max_per_run": 1}),
        "router": tool("aecho", callable=f"{MODULE}:dispatch_each"),
    }


@pytest.fixture(autouse=True)
def _fresh_runs() -> Iterator[None]:
    requires_tools.RAN.clear()
    yield
    requires_tools.RAN.clear()


def route(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """Arguments of the `router` tool: dispatch these (tool, args) in turn."""
    return {"calls": [{"tool": name, "args": args} for name, args in calls]}


def planned(calls: Sequence[Call]) -> tuple[PlannedCall, ...]:
    return tuple(PlannedCall(key, name, args) for key, name, args in calls)


async def unchecked_sequential(harness: Harness, calls: Sequence[Call]) -> SequentialOutcome:
    """Run a plan the engine gets without preflight: only its own check stands."""
    plan = SequentialPlan(owner=OWNER, calls=planned(calls))
    return await harness.engine.run_sequential(
        harness.identity(), plan, [dict(args) for _, _, args in calls]
    )


async def test_a_call_whose_requirement_does_not_hold_is_skipped_not_run(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())

    outcome = await unchecked_sequential(
        harness, [("p", "publish", {}), ("f", "fetch", {}), ("q", "publish", {})]
    )

    blocked, fetched, after = outcome.receipts
    assert blocked.status is Status.SKIPPED
    assert blocked.error is not None
    assert blocked.error.kind is ErrorKind.REQUIRES
    assert blocked.error.message == f"not started: {AFTER_FETCH_IN_RUN}"
    # The chain stops at a call that did not succeed, as for any other.
    assert (fetched.status, after.status) == (Status.SKIPPED, Status.SKIPPED)
    assert outcome.status == "failed"
    assert requires_tools.RAN == []
    stored = harness.receipts.stored(outcome.run_id)
    assert stored[0]["status"] == "skipped"
    assert stored[0]["error"]["kind"] == "requires"


async def test_a_lane_call_needs_the_requirement_met_in_its_own_lane(make_harness: Any) -> None:
    harness = make_harness(tools())
    plan = ParallelPlan(
        owner=OWNER,
        max_concurrency=1,
        lanes=(
            Lane("a", planned([("f", "fetch", {}), ("p", "publish", {})])),
            Lane("b", planned([("p", "publish", {})])),
        ),
    )

    outcome = await harness.engine.run_parallel(harness.identity(), plan, [[{}, {}], [{}]])

    assert [r.status for r in outcome.lanes[0].receipts] == [Status.SUCCEEDED] * 2
    (blocked,) = outcome.lanes[1].receipts
    assert blocked.status is Status.SKIPPED
    assert blocked.error is not None
    assert blocked.error.message == f"not started: {AFTER_FETCH_IN_LANE}"
    assert requires_tools.RAN == ["fetch", "publish"]


async def test_a_dispatch_after_a_failed_required_call_is_rejected(make_harness: Any) -> None:
    harness = make_harness(tools())

    outcome = await harness.sequential(
        [("r", "router", route(("fetch", {"ok": False}), ("publish", {"n": 1})))]
    )

    (receipt,) = outcome.receipts
    assert receipt.output["results"] == [
        "failed",
        f"rejected: dispatch to 'publish' rejected: {AFTER_FETCH_IN_RUN}",
    ]
    assert [child.tool for child in outcome.dispatched] == ["fetch"]
    assert requires_tools.RAN == ["fetch"]
    rejected = harness.events(AuditKind.DISPATCH_REJECTED)
    assert [event.detail["reasons"] for event in rejected] == [[AFTER_FETCH_IN_RUN]]


async def test_a_dispatch_after_a_successful_required_call_runs(make_harness: Any) -> None:
    harness = make_harness(tools())

    outcome = await harness.sequential(
        [
            ("f", "fetch", {}),
            ("r", "router", route(("publish", {"n": 1}))),
            ("s", "router", route(("fetch", {}), ("publish", {"n": 2}))),
        ]
    )

    assert [r.output["results"] for r in outcome.receipts[1:]] == [
        ["succeeded"],
        ["succeeded", "succeeded"],
    ]
    assert requires_tools.RAN == ["fetch", "publish", "fetch", "publish"]


async def test_a_dispatch_in_a_lane_does_not_see_another_lanes_success(
    make_harness: Any,
) -> None:
    harness = make_harness(tools())

    outcome = await harness.parallel(
        [
            ("a", [("f", "fetch", {})]),
            ("b", [("r", "router", route(("publish", {})))]),
            ("c", [("f", "fetch", {}), ("r", "router", route(("publish", {})))]),
        ],
        max_concurrency=1,
    )

    assert outcome.lanes[1].receipts[0].output["results"] == [
        f"rejected: dispatch to 'publish' rejected: {AFTER_FETCH_IN_LANE}"
    ]
    assert outcome.lanes[2].receipts[1].output["results"] == ["succeeded"]


async def test_a_dispatched_call_counts_toward_max_per_run(make_harness: Any) -> None:
    harness = make_harness(tools())

    outcome = await harness.sequential(
        [("r", "router", route(("once", {}), ("once", {}))), ("o", "once", {})]
    )

    routed, own = outcome.receipts
    assert routed.output["results"] == [
        "succeeded",
        f"rejected: dispatch to 'once' rejected: {ONCE}",
    ]
    assert own.status is Status.SKIPPED
    assert own.error is not None
    assert (own.error.kind, own.error.message) == (ErrorKind.REQUIRES, f"not started: {ONCE}")
    assert requires_tools.RAN == ["publish"]


async def test_max_per_run_holds_across_lanes_at_dispatch(make_harness: Any) -> None:
    harness = make_harness(tools())

    outcome = await harness.parallel(
        [
            ("a", [("r", "router", route(("once", {})))]),
            ("b", [("o", "once", {})]),
            ("c", [("r", "router", route(("once", {})))]),
        ],
        max_concurrency=3,
    )

    # The lanes run concurrently: whichever starts `once` first takes its one run.
    assert requires_tools.RAN == ["publish"]
    own = outcome.lanes[1].receipts[0]
    routed = [outcome.lanes[i].receipts[0].output["results"][0] for i in (0, 2)]
    outcomes = [own.status.value, *routed]
    assert outcomes.count("succeeded") == 1
    assert (
        outcomes.count(f"rejected: dispatch to 'once' rejected: {ONCE}")
        + (own.status is Status.SKIPPED)
        == 2
    )


async def test_a_resumed_run_counts_the_calls_it_completed_before(make_harness: Any) -> None:
    harness = make_harness(tools())
    calls = [("f", "fetch", {}), ("o", "once", {}), ("p", "publish", {})]
    first = await harness.sequential(calls[:1])
    run = harness.identity()
    plan = SequentialPlan(owner=OWNER, calls=planned(calls))
    resume = ResumePoint(done=[first.receipts], next_seq=len(calls))

    outcome = await harness.engine.run_sequential(run, plan, [{}, {}, {}], resume=resume)

    assert [r.status for r in outcome.receipts] == [Status.SUCCEEDED] * 3
    done = ResumePoint(done=[outcome.receipts[:2]], next_seq=len(calls))
    again = await harness.engine.run_sequential(
        harness.identity(),
        SequentialPlan(owner=OWNER, calls=planned([*calls[:2], ("o2", "once", {})])),
        [{}, {}, {}],
        resume=done,
    )
    assert again.receipts[2].status is Status.SKIPPED
    assert again.receipts[2].error is not None
    assert again.receipts[2].error.message == f"not started: {ONCE}"
