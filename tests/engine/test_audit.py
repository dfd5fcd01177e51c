"""Audit events for each call: started, retried, timed out, finished, served from cache."""

from __future__ import annotations

from typing import Any

from app.engine.ports import AuditKind
from tests.engine.harness import tool


async def test_a_call_is_audited_with_the_run_identity(make_harness: Any) -> None:
    harness = make_harness({"e": tool("aecho")})
    run = harness.identity(caller="bob")

    outcome = await harness.parallel([("item", [("k", "e", {})])], max_concurrency=1, run=run)

    receipt = outcome.lanes[0].receipts[0]
    started, finished = harness.events()
    assert (started.kind, finished.kind) == (AuditKind.CALL_STARTED, AuditKind.CALL_FINISHED)
    for event in (started, finished):
        assert (event.run_id, event.caller, event.tool) == (run.run_id, "bob", "e")
        assert (event.call_key, event.item_key) == ("k", "item")
        assert event.detail["receipt_id"] == receipt.receipt_id
    assert started.at == receipt.started_at
    assert finished.at == receipt.finished_at
    assert finished.detail["status"] == "succeeded"
    assert finished.detail["attempts"] == 1


async def test_retries_and_timeouts_are_audited(make_harness: Any) -> None:
    harness = make_harness(
        {"h": tool("hang", timeout_s=0.01, effect="read", retry={"max_attempts": 2})}
    )

    await harness.sequential([("1", "h", {})])

    assert [event.kind for event in harness.events()] == [
        AuditKind.CALL_STARTED,
        AuditKind.CALL_TIMED_OUT,
        AuditKind.CALL_RETRIED,
        AuditKind.CALL_TIMED_OUT,
        AuditKind.CALL_FINISHED,
    ]
    retried = harness.events(AuditKind.CALL_RETRIED)[0]
    assert retried.detail["error"]["kind"] == "timeout"


async def test_skipped_calls_are_not_audited_as_started(make_harness: Any) -> None:
    harness = make_harness({"f": tool("fail"), "e": tool("echo")})

    await harness.sequential([("1", "f", {"message": "x"}), ("2", "e", {})])

    assert [(event.kind, event.call_key) for event in harness.events()] == [
        (AuditKind.CALL_STARTED, "1"),
        (AuditKind.CALL_FINISHED, "1"),
    ]
