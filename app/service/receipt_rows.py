"""Rows for the store from the engine's receipts, cache entries and audit events.

Receipts are always the redacted copy, with outputs over the size cap
truncated (`stored_output`); the engine only caches outputs that redaction
leaves unchanged and that fit under the cap.
"""

from __future__ import annotations

from typing import Any

from app.engine.ports import AuditEvent, CachedOutput
from app.engine.receipt import Receipt
from app.service.stored_output import DEFAULT_MAX_STORED_OUTPUT_BYTES, stored_output


def receipt_row(
    receipt: Receipt, max_output_bytes: int = DEFAULT_MAX_STORED_OUTPUT_BYTES
) -> dict[str, Any]:
    output, error, control = receipt.redacted_parts()
    stored = stored_output(output, max_output_bytes)
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
        "output": stored.value,
        "output_digest": stored.digest,
        "output_truncated": stored.truncated,
        "error": error,
        "attempts": receipt.attempts,
        "cache_hit": receipt.cache_hit,
        "cache_source_receipt_id": receipt.cache_source_receipt_id,
        "fingerprint": receipt.fingerprint,
        "idempotency_key": receipt.idempotency_key,
        "parent_receipt_id": receipt.parent_receipt_id,
        "control": None if control is None else dict(control),
        "admission_wait_ms": receipt.admission_wait_ms,
        "started_at": receipt.started_at,
        "finished_at": receipt.finished_at,
        "duration_ms": receipt.duration_ms,
    }


def cache_entry_row(entry: CachedOutput) -> dict[str, Any]:
    return {
        "fingerprint": entry.fingerprint,
        "definition_hash": entry.definition_hash,
        "tool": entry.tool,
        "output": entry.output,
        "source_receipt_id": entry.source_receipt_id,
        "created_at": entry.created_at,
        "expires_at": entry.expires_at,
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
