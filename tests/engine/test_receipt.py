"""Receipts: the caller's copy is real, every stored copy is redacted."""

from __future__ import annotations

from typing import Any

from app.engine.ports import AuditKind
from app.engine.receipt import Status
from app.store.journal.events import audit_event_rows
from tests.engine.harness import tool

BEARER = "Bearer abcdefghijklmnopqrstuvwxyz"


async def test_stored_copy_is_redacted_and_the_response_is_real(make_harness: Any) -> None:
    harness = make_harness({"s": tool("secret", redact=["token"])})

    outcome = await harness.sequential([("1", "s", {"note": f"use {BEARER}"})])

    (receipt,) = outcome.receipts
    assert receipt.to_response()["output"] == {"token": "tok-123", "note": f"use {BEARER}"}
    (stored,) = harness.receipts.stored(outcome.run_id)
    assert stored["output"] == {"token": "[REDACTED]", "note": "use Bearer [REDACTED]"}
    assert stored["seq"] == 0
    assert stored["run_id"] == outcome.run_id
    assert stored["definition_hash"] == harness.contract.tools["s"].definition_hash


async def test_error_messages_are_redacted_in_receipts_and_audit(make_harness: Any) -> None:
    harness = make_harness({"l": tool("leak")})

    outcome = await harness.sequential([("1", "l", {"note": BEARER})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert BEARER in receipt.to_response()["error"]["message"]
    (stored,) = harness.receipts.stored(outcome.run_id)
    assert stored["error"]["message"] == "RuntimeError: upstream said: Bearer [REDACTED]"
    # Audit events are redacted where the writer makes their rows.
    (finished,) = harness.events(AuditKind.CALL_FINISHED)
    (row,) = audit_event_rows([finished])
    assert "abcdefghijklmnop" not in str(row["detail"])
    assert "[REDACTED]" in row["detail"]["error"]["message"]
