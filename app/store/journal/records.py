"""Rows for the store from the engine's receipts and cache entries.

Receipts are always the redacted copy, with outputs over the size cap
truncated (`stored_output`); the engine only caches outputs that redaction
leaves unchanged and that fit under the cap.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.engine.ports import CachedOutput
from app.engine.receipt import Receipt, Status
from app.foundation.serialization import dumps
from app.foundation.stored_output import DEFAULT_MAX_STORED_OUTPUT_BYTES, stored_output
from app.store.journal.rows import RenderedTimes, aware, sqlite_time


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
    receipt: Receipt, max_output_bytes: int, rendered: RenderedTimes | None
) -> tuple[Any, ...]:
    """The receipt's row as SQLite's driver takes it or, with `rendered` None,
    PostgreSQL's, but for its last column, `created_at`: what `receipt_row` and then
    `rows.encode` make of the receipt, column for column (`rows.RECEIPT_COLUMNS`),
    with no row in between (about half the cost). PostgreSQL's datetimes stay
    datetimes, and a naive one is refused here, as the encoding would refuse it."""
    # The row's own encodings first, then the lower layers' (redaction, the stored
    # copy, JSON): the receipt's walk to its row goes down the layers only.
    started_at: datetime | str
    finished_at: datetime | str
    if rendered is None:
        started_at, finished_at = aware(receipt.started_at), aware(receipt.finished_at)
    else:
        started_at = sqlite_time(receipt.started_at, rendered)
        finished_at = sqlite_time(receipt.finished_at, rendered)
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
        started_at,
        finished_at,
        receipt.duration_ms,
        None,  # chain_seq and chain_link: set when the batch is linked
        None,
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


# An enum member's `.value` goes through the enum's descriptor: four times a lookup here.
_STATUS_TEXT = {status: status.value for status in Status}
