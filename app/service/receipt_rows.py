"""Rows for the store from the engine's receipts, cache entries and audit events.

Receipts are always the redacted copy, with outputs over the size cap
truncated (`stored_output`); the engine only caches outputs that redaction
leaves unchanged and that fit under the cap. A call's `call.started` and
`call.finished` written in one transaction share a row (`audit_event_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from app.engine.ports import AuditEvent, AuditKind, CachedOutput
from app.engine.receipt import Receipt, Status
from app.service.stored_output import DEFAULT_MAX_STORED_OUTPUT_BYTES, stored_output
from app.store.repositories.audit import CALL_PAIR_KIND, call_pair_detail
from app.store.repositories.bulk import RenderedTimes, sqlite_audit_values, sqlite_time
from app.store.serialization import dumps


def receipt_row(
    receipt: Receipt, max_output_bytes: int = DEFAULT_MAX_STORED_OUTPUT_BYTES
) -> dict[str, Any]:
    output, written, error, control = receipt.redacted_parts_with_json()
    stored = stored_output(output, max_output_bytes, written)
    return {
        "id": receipt.receipt_id,
        "run_id": receipt.run_id,
        "seq": receipt.seq,
        "call_key": receipt.call_key,
        "item_key": receipt.item_key,
        "parallel_batch_id": receipt.parallel_batch_id,
        "tool": receipt.tool,
        "owner": receipt.owner,
        "status": _STATUS_TEXT[receipt.status],
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


def receipt_values(
    receipt: Receipt, max_output_bytes: int, rendered: RenderedTimes
) -> tuple[Any, ...]:
    """The receipt's row as SQLite's driver takes it (`BulkWrite.add_encoded_receipts`), but
    for its last column, `created_at`: what `receipt_row` and then the bulk insert's
    encoding make of the receipt, column for column (`RECEIPT_COLUMNS`), with no
    row in between (about half the cost)."""
    output, written, error, control = receipt.redacted_parts_with_json()
    stored = stored_output(output, max_output_bytes, written)
    value, text = stored.value, stored.json
    return (
        receipt.receipt_id,
        receipt.run_id,
        receipt.seq,
        receipt.call_key,
        receipt.item_key,
        receipt.parallel_batch_id,
        receipt.tool,
        receipt.owner,
        _STATUS_TEXT[receipt.status],
        None if value is None else dumps(value) if text is None else text.decode(),
        stored.digest,
        stored.truncated,
        None if error is None else dumps(error),
        receipt.attempts,
        receipt.cache_hit,
        receipt.cache_source_receipt_id,
        receipt.fingerprint,
        receipt.idempotency_key,
        receipt.parent_receipt_id,
        None if control is None else dumps(dict(control)),
        receipt.admission_wait_ms,
        sqlite_time(receipt.started_at, rendered),
        sqlite_time(receipt.finished_at, rendered),
        receipt.duration_ms,
    )


# The columns of `receipt_values`, then `created_at`: `bulk.receipt_columns()`, which
# the writer checks when it starts.
RECEIPT_COLUMNS = (
    *("id", "run_id", "seq", "call_key", "item_key", "parallel_batch_id", "tool", "owner"),
    *("status", "output", "output_digest", "output_truncated", "error", "attempts"),
    *("cache_hit", "cache_source_receipt_id", "fingerprint", "idempotency_key"),
    *("parent_receipt_id", "control", "admission_wait_ms", "started_at", "finished_at"),
    *("duration_ms", "created_at"),
)


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


def audit_event_rows(events: Sequence[AuditEvent | dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one transaction's audit events, in order: the engine's events
    (`AuditEvent`) and rows the service wrote itself (`AuditEvent` column names).

    A call's `call.started` and `call.finished` events found among them share one
    row (`CALL_PAIR_KIND`), which takes the finished event's place: the started
    event is read later than it was written, past other calls' events and other
    runs' events, never past an event of its own call or one of its run as a
    whole. A call with such an event between the two (its retry or timeout; a
    router decision, a run event) keeps its two rows, as does a call whose
    started event was written in an earlier transaction, or whose two events
    differ in their run, caller, tool or keys, or whose finished time is naive
    (left to the insert to refuse). The shared row is built from the two events
    directly: no row of either is built first.
    """
    rows: list[dict[str, Any]] = []
    for item in _in_order(events):
        kind = type(item)
        if kind is dict:
            rows.append(cast(dict[str, Any], item))
        elif kind is tuple:
            rows.append(_pair_row(*cast(_Pair, item)))
        else:
            rows.append(audit_row(cast(AuditEvent, item)))
    return rows


def audit_event_values(
    events: Sequence[AuditEvent | dict[str, Any]], rendered: RenderedTimes
) -> list[tuple[Any, ...]]:
    """`audit_event_rows(events)` as SQLite's driver takes them (`BulkWrite.add_encoded_audit`),
    column for column (`AUDIT_COLUMNS`), with no row in between for the engine's events."""
    values: list[tuple[Any, ...]] = []
    for item in _in_order(events):
        kind = type(item)
        if kind is tuple:
            started, finished = cast(_Pair, item)
            values.append(
                (
                    started.run_id,
                    sqlite_time(started.at, rendered),
                    CALL_PAIR_KIND,
                    started.caller,
                    started.tool,
                    started.call_key,
                    started.item_key,
                    dumps(_pair_detail(started, finished)),
                )
            )
        elif kind is dict:
            values.append(sqlite_audit_values(cast(dict[str, Any], item), rendered))
        else:
            event = cast(AuditEvent, item)
            values.append(
                (
                    event.run_id,
                    sqlite_time(event.at, rendered),
                    _KIND_TEXT[event.kind],
                    event.caller,
                    event.tool,
                    event.call_key,
                    event.item_key,
                    dumps(dict(event.detail)),
                )
            )
    return values


# The columns of `audit_event_values`: `bulk.audit_columns()`, which the writer
# checks when it starts.
AUDIT_COLUMNS = ("run_id", "at", "kind", "caller", "tool", "call_key", "item_key", "detail")

# A call's two events that share a row.
_Pair = tuple[AuditEvent, AuditEvent]


def _in_order(
    events: Sequence[AuditEvent | dict[str, Any]],
) -> list[AuditEvent | dict[str, Any] | _Pair]:
    """The transaction's events in the order their rows are written, each call's two
    that share a row as one pair (`audit_event_rows`)."""
    out: list[AuditEvent | dict[str, Any] | _Pair] = []
    # run_id -> {receipt_id: position in `out` of its call.started}
    pending: dict[str | None, dict[str, int]] = {}
    merged = False
    receipt_id: Any
    for event in events:
        if isinstance(event, dict):
            detail = event.get("detail")
            receipt_id = detail.get("receipt_id") if isinstance(detail, dict) else None
            run_id = event.get("run_id")
        else:
            kind = event.kind
            receipt_id = event.detail.get("receipt_id")
            run_id = event.run_id
            if kind is _STARTED:
                if type(receipt_id) is str:
                    pending.setdefault(run_id, {})[receipt_id] = len(out)
                out.append(event)
                continue
            if kind is _FINISHED:
                started = pending.get(run_id)
                at = started.pop(receipt_id, None) if started else None
                if at is not None:
                    first = cast(AuditEvent, out[at])
                    # [2:7]: run_id, caller, tool, call_key, item_key.
                    if event.at.tzinfo is not None and first[2:7] == event[2:7]:
                        out[at] = _MOVED
                        out.append((first, event))
                        merged = True
                        continue
                out.append(event)
                continue
        # An event of one call keeps that call's events apart; any other event of
        # the run (no receipt id), every call of the run in flight.
        if type(receipt_id) is str:
            started = pending.get(run_id)
            if started:
                started.pop(receipt_id, None)
        else:
            pending.pop(run_id, None)
        out.append(event)
    return [item for item in out if item is not _MOVED] if merged else out


def _pair_detail(started: AuditEvent, finished: AuditEvent) -> dict[str, Any]:
    # The engine's details are dicts already, and nothing changes a row's detail.
    first, then = started.detail, finished.detail
    return call_pair_detail(
        first if type(first) is dict else dict(first),
        then if type(then) is dict else dict(then),
        finished.at,
    )


def _pair_row(started: AuditEvent, finished: AuditEvent) -> dict[str, Any]:
    return {
        "run_id": started.run_id,
        "at": started.at,
        "kind": CALL_PAIR_KIND,
        "caller": started.caller,
        "tool": started.tool,
        "call_key": started.call_key,
        "item_key": started.item_key,
        "detail": _pair_detail(started, finished),
    }


# An enum member's `.value` goes through the enum's descriptor: four times a lookup here.
_STATUS_TEXT = {status: status.value for status in Status}
_KIND_TEXT = {kind: kind.value for kind in AuditKind}
_STARTED = AuditKind.CALL_STARTED
_FINISHED = AuditKind.CALL_FINISHED
# The place a merged call.started left.
_MOVED = AuditEvent(_STARTED, datetime.min, None, None, None, None, None, {})
