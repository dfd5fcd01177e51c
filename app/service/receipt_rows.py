"""Rows for the store from the engine's receipts and audit events (always the redacted copy)."""

from __future__ import annotations

from typing import Any

from app.engine.ports import AuditEvent
from app.engine.receipt import Receipt


def receipt_row(receipt: Receipt) -> dict[str, Any]:
    stored = receipt.to_stored()
    return {
        "id": receipt.receipt_id,
        "run_id": receipt.run_id,
        "seq": receipt.seq,
        "call_key": receipt.call_key,
        "item_key": receipt.item_key,
        "parallel_batch_id": receipt.parallel_batch_id,
        "tool": receipt.tool,
        "owner": receipt.owner,
        "status": receipt.status.value,
        "output": stored["output"],
        "error": stored["error"],
        "attempts": receipt.attempts,
        "cache_hit": receipt.cache_hit,
        "cache_source_receipt_id": receipt.cache_source_receipt_id,
        "fingerprint": receipt.fingerprint,
        "idempotency_key": receipt.idempotency_key,
        "parent_receipt_id": receipt.parent_receipt_id,
        "control": stored["control"],
        "admission_wait_ms": receipt.admission_wait_ms,
        "started_at": receipt.started_at,
        "finished_at": receipt.finished_at,
        "duration_ms": receipt.duration_ms,
    }


def audit_row(event: AuditEvent) -> dict[str, Any]:
    return {
        "run_id": event.run_id,
        "at": event.at,
        "kind": event.kind.value,
        "caller": event.caller,
        "tool": event.tool,
        "call_key": event.call_key,
        "item_key": event.item_key,
        "detail": dict(event.detail),
    }
