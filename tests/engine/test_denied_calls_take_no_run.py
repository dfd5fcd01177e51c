"""A call denied at the confirmation gate never ran: it takes none of its tool's
`max_per_run`, on the per-call path, across lanes, and when a resumed run recalls it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.engine.confirmation import ConfirmationDecision, args_digest
from app.engine.plan import Lane, ParallelPlan, PlannedCall
from app.engine.receipt import ErrorKind, Status
from app.engine.run import RunKind
from tests.engine import requires_tools
from tests.engine.harness import OWNER, Harness, tool

MODULE = "tests.engine.requires_tools"


def tools() -> dict[str, Any]:
    return {
        "once": tool(
            "aecho",
            callable=f"{MODULE}:publish",
            requires={"max_per_run": 1},
            requires_confirmation=True,
        ),
    }


@pytest.fixture(autouse=True)
def _fresh_runs() -> Iterator[None]:
    requires_tools.RAN.clear()
    yield
    requires_tools.RAN.clear()


def _decision(args: dict[str, Any], approve: bool) -> ConfirmationDecision:
    return ConfirmationDecision(args_digest(args), approve, "" if approve else "not this one")


async def test_a_denied_call_leaves_the_runs_of_its_tool_to_the_next_call(
    make_harness: Any,
) -> None:
    harness: Harness = make_harness(tools())
    state = harness.engine.open_run(harness.identity(), RunKind.ROUTER)

    denied = await harness.engine.run_call(
        state, "once", {"n": 1}, call_key="t1c0", confirmed=_decision({"n": 1}, False)
    )
    approved = await harness.engine.run_call(
        state, "once", {"n": 2}, call_key="t2c0", confirmed=_decision({"n": 2}, True)
    )

    assert denied.status is Status.DENIED
    assert denied.error is not None
    assert denied.error.kind is ErrorKind.CONFIRMATION
    assert approved.status is Status.SUCCEEDED
    assert requires_tools.RAN == ["publish"]
    third = await harness.engine.run_call(
        state, "once", {"n": 3}, call_key="t3c0", confirmed=_decision({"n": 3}, True)
    )
    assert third.status is Status.SKIPPED  # the one run the tool has was taken by t2c0
    assert third.error is not None
    assert "at most 1 time(s) per run" in third.error.message


async def test_a_lane_whose_call_was_denied_leaves_the_run_to_another_lane(
    make_harness: Any,
) -> None:
    harness: Harness = make_harness(tools())
    plan = ParallelPlan(
        OWNER,
        2,
        (
            Lane("a", (PlannedCall("1", "once", {"n": 1}),)),
            Lane("b", (PlannedCall("1", "once", {"n": 2}),)),
        ),
    )
    decisions = {("a", "1"): _decision({"n": 1}, False), ("b", "1"): _decision({"n": 2}, True)}

    # Preflight counts every lane's call; the engine's own check is the one under test.
    outcome = await harness.engine.run_parallel(
        harness.identity(), plan, [[{"n": 1}], [{"n": 2}]], decisions=decisions
    )

    statuses = {lane.item_key: [r.status for r in lane.receipts] for lane in outcome.lanes}
    assert statuses == {"a": [Status.DENIED], "b": [Status.SUCCEEDED]}
    assert requires_tools.RAN == ["publish"]


async def test_a_denied_receipt_an_earlier_stretch_settled_takes_no_run(
    make_harness: Any,
) -> None:
    harness: Harness = make_harness(tools())
    run = harness.identity()
    first = harness.engine.open_run(run, RunKind.ROUTER)
    denied = await harness.engine.run_call(
        first, "once", {"n": 1}, call_key="t1c0", confirmed=_decision({"n": 1}, False)
    )

    resumed = harness.engine.open_run(run, RunKind.ROUTER, first_seq=1)
    harness.engine.recall(resumed, [denied])
    approved = await harness.engine.run_call(
        resumed, "once", {"n": 2}, call_key="t2c0", confirmed=_decision({"n": 2}, True)
    )

    assert approved.status is Status.SUCCEEDED
    assert requires_tools.RAN == ["publish"]
