"""Sequential plans: order, stop after a failure, receipts for every call."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.receipt import ErrorKind, Status
from tests.engine import engine_tools
from tests.engine.harness import tool


async def test_calls_run_in_order_and_every_receipt_is_stored(make_harness: Any) -> None:
    harness = make_harness({"e": tool("echo"), "a": tool("aecho")})

    outcome = await harness.sequential(
        [("c1", "e", {"i": 1}), ("c2", "a", {"i": 2}), ("c3", "e", {"i": 3})]
    )

    assert outcome.status == "succeeded"
    assert [r.call_key for r in outcome.receipts] == ["c1", "c2", "c3"]
    assert [r.seq for r in outcome.receipts] == [0, 1, 2]
    assert [r.output["args"]["i"] for r in outcome.receipts] == [1, 2, 3]
    assert all(r.item_key is None and r.parallel_batch_id is None for r in outcome.receipts)
    stored = harness.receipts.stored(outcome.run_id)
    assert [s["receipt_id"] for s in stored] == [r.receipt_id for r in outcome.receipts]


async def test_a_failed_call_stops_the_calls_after_it(make_harness: Any) -> None:
    harness = make_harness({"e": tool("echo"), "f": tool("fail")})

    outcome = await harness.sequential(
        [("c1", "e", {}), ("c2", "f", {"message": "no"}), ("c3", "e", {}), ("c4", "e", {})]
    )

    assert outcome.status == "failed"
    statuses = [r.status for r in outcome.receipts]
    assert statuses == [Status.SUCCEEDED, Status.FAILED, Status.SKIPPED, Status.SKIPPED]
    skipped = outcome.receipts[2]
    assert skipped.error is not None
    assert skipped.error.kind is ErrorKind.CANCELLED
    assert "'c2'" in skipped.error.message
    assert skipped.attempts == 0
    assert skipped.fingerprint.startswith("sha256:")
    assert engine_tools.STATE.calls["echo"] == 1
    assert [r.seq for r in harness.receipts.receipts] == [0, 1, 2, 3]


async def test_receipt_response_has_the_wire_shape(make_harness: Any) -> None:
    harness = make_harness({"e": tool("echo")})

    outcome = await harness.sequential([("c1", "e", {"x": 1})])

    body = outcome.to_response()
    assert body["kind"] == "sequential"
    assert body["status"] == "succeeded"
    assert body["contract_hash"] == harness.contract.hash
    (receipt,) = body["receipts"]
    assert {
        "receipt_id",
        "plan_id",
        "call_key",
        "item_key",
        "parallel_batch_id",
        "tool",
        "status",
        "output",
        "error",
        "attempts",
        "cache_hit",
        "fingerprint",
        "started_at",
        "finished_at",
        "duration_ms",
    } <= set(receipt)
    assert receipt["plan_id"] == outcome.run_id
    assert receipt["status"] == "succeeded"
    assert receipt["error"] is None
    assert receipt["idempotency_key"] == f"{outcome.run_id}:0"


async def test_a_run_admitted_against_another_contract_is_refused(make_harness: Any) -> None:
    harness = make_harness({"e": tool("echo")})
    run = harness.identity()
    stale = type(run)(run.run_id, run.owner, run.caller, run.context, "sha256:other")

    with pytest.raises(ValueError, match="contract"):
        await harness.sequential([("c1", "e", {})], run=stale)
