"""Rows for the store from the engine's receipts, cache entries and audit events.

Receipts are always the redacted copy, with outputs over the size cap
truncated (`stored_output`); the engine only caches outputs that redaction
leaves unchanged and that fit under the cap. A call's `call.started` and
`call.finished` written in one transaction share a row (`pair_call_events`).
"""

from __future__ import annotations

from typing import Any

from app.engine.ports import AuditEvent, CachedOutput
from app.engine.receipt import Receipt
from app.service.stored_output import DEFAULT_MAX_STORED_OUTPUT_BYTES, stored_output
from app.store.repositories.audit import CALL_FINISHED, CALL_STARTED, call_pair_row


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


def pair_call_events(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The audit rows of one transaction, each call's `call.started` and
    `call.finished` found in them merged into one row (`call_pair_row`).

    The shared row takes the finished event's place, so the started event is
    read later than it was written: past other calls' events and other runs'
    events, never past an event of its own call or one of its run as a whole.
    A call with such an event between the two (its retry or timeout; a router
    decision, a run event) keeps its two rows, as does a call whose started
    event was written in an earlier transaction.
    """
    out: list[dict[str, Any]] = []
    # run_id -> {receipt_id: position in `out` of its call.started}
    pending: dict[Any, dict[str, int]] = {}
    merged = False
    for row in rows:
        kind = row["kind"]
        if kind == CALL_STARTED:
            receipt_id = row["detail"].get("receipt_id")
            if type(receipt_id) is str:
                pending.setdefault(row["run_id"], {})[receipt_id] = len(out)
        elif kind == CALL_FINISHED:
            started = pending.get(row["run_id"])
            if started:
                at = started.pop(row["detail"].get("receipt_id"), None)
                if at is not None:
                    pair = call_pair_row(out[at], row)
                    if pair is not None:
                        out[at] = _MOVED
                        out.append(pair)
                        merged = True
                        continue
        else:
            # An event of one call keeps that call's events apart; any other
            # event of the run (no receipt id), every call of the run in flight.
            detail = row.get("detail")
            receipt_id = detail.get("receipt_id") if isinstance(detail, dict) else None
            if type(receipt_id) is str:
                started = pending.get(row.get("run_id"))
                if started:
                    started.pop(receipt_id, None)
            else:
                pending.pop(row.get("run_id"), None)
        out.append(row)
    return [row for row in out if row is not _MOVED] if merged else rows


_MOVED: dict[str, Any] = {}  # the place a merged call.started left
