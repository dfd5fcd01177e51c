"""Parallel plans: independent lanes, input order whatever the completion order."""

from __future__ import annotations

import random
from typing import Any

from app.engine.receipt import Status
from tests.engine import engine_tools
from tests.engine.harness import tool


async def test_results_are_in_input_order_whatever_the_completion_order(
    make_harness: Any,
) -> None:
    harness = make_harness({"s": tool("sleep_then_echo")})
    rng = random.Random(1234)
    delays = [rng.uniform(0.0, 0.02) for _ in range(24)]
    lanes = [
        (
            f"item-{i}",
            [
                ("first", "s", {"delay_s": delays[i], "tag": f"{i}/first"}),
                ("second", "s", {"delay_s": delays[-1 - i], "tag": f"{i}/second"}),
            ],
        )
        for i in range(12)
    ]

    outcome = await harness.parallel(lanes, max_concurrency=12)

    assert [lane.item_key for lane in outcome.lanes] == [f"item-{i}" for i in range(12)]
    for i, lane in enumerate(outcome.lanes):
        assert [r.call_key for r in lane.receipts] == ["first", "second"]
        assert [r.output["tag"] for r in lane.receipts] == [f"{i}/first", f"{i}/second"]
        assert all(r.item_key == f"item-{i}" for r in lane.receipts)
        assert all(r.parallel_batch_id == outcome.parallel_batch_id for r in lane.receipts)
    all_receipts = [r for lane in outcome.lanes for r in lane.receipts]
    assert [r.seq for r in all_receipts] == list(range(24))
    input_order = [r.output["tag"] for r in all_receipts]
    assert engine_tools.STATE.completions != input_order
    assert sorted(engine_tools.STATE.completions) == sorted(input_order)
    stored = harness.receipts.stored(outcome.run_id)
    assert [s["receipt_id"] for s in stored] == [r.receipt_id for r in all_receipts]


async def test_a_failure_stops_its_lane_while_other_lanes_continue(make_harness: Any) -> None:
    harness = make_harness({"e": tool("aecho"), "f": tool("fail")})

    outcome = await harness.parallel(
        [
            ("a", [("1", "f", {"message": "x"}), ("2", "e", {})]),
            ("b", [("1", "e", {}), ("2", "e", {})]),
            ("c", [("1", "e", {}), ("2", "f", {"message": "y"}), ("3", "e", {})]),
        ],
        max_concurrency=3,
    )

    a, b, c = outcome.lanes
    assert [r.status for r in a.receipts] == [Status.FAILED, Status.SKIPPED]
    assert [r.status for r in b.receipts] == [Status.SUCCEEDED, Status.SUCCEEDED]
    assert [r.status for r in c.receipts] == [Status.SUCCEEDED, Status.FAILED, Status.SKIPPED]
    assert (a.status, b.status, c.status) == ("failed", "succeeded", "failed")
    assert outcome.status == "failed"
    body = outcome.to_response()
    assert [lane["status"] for lane in body["lanes"]] == ["failed", "succeeded", "failed"]
    assert body["parallel_batch_id"] == outcome.parallel_batch_id


async def test_many_lanes_use_a_bounded_number_of_workers(make_harness: Any) -> None:
    harness = make_harness({"t": tool("task_count", effect="read")})

    outcome = await harness.parallel(
        [(f"l{i}", [("1", "t", {})]) for i in range(500)], max_concurrency=7
    )

    assert len(outcome.lanes) == 500
    assert outcome.status == "succeeded"
    # Seven workers plus the test's own task: never a task per lane.
    assert engine_tools.STATE.max_in_flight["tasks"] <= 8
