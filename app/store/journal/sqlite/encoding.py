"""A batch as SQLite's statements (`app.store.journal.sqlite.statements`): one
`executemany` of plain tuples per table, run in aiosqlite's thread, on the event
loop's thread, or in the writer process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from app.foundation.serialization import dumps
from app.store.journal.batch import Batch
from app.store.journal.events import audit_event_values
from app.store.journal.rows import (
    RECEIPT_COLUMNS,
    RenderedTimes,
    claim_sets,
    completion_values,
    encode,
    layout_of,
    release_values,
    sqlite_time,
)
from app.store.journal.sqlite.statements import SqliteClaims, SqliteStatement
from app.store.models import AuditEvent, IdempotencyKey, Receipt, Run

# A run's end; a None `call_count` keeps the stored count.
FINISH = (
    'UPDATE "runs" SET "status" = ?, "outcome" = ?, '
    '"call_count" = coalesce(?, "call_count"), "finished_at" = ? WHERE "id" = ?'
)
# A claimed key's final response; a None `run_id` keeps the stored one.
COMPLETE = (
    'UPDATE "idempotency_keys" SET "state" = ?, "response_status" = ?, '
    '"response_body" = ?, "run_id" = coalesce(?, "run_id") WHERE "caller" = ? AND "key" = ?'
)
_STARTED_AT = RECEIPT_COLUMNS.index("started_at")
_FINISHED_AT = RECEIPT_COLUMNS.index("finished_at")
RELEASE = 'DELETE FROM "idempotency_keys" WHERE "caller" = ? AND "key" = ? AND "run_id" = ?'


def statements(batch: Batch, claimed: set[str]) -> list[SqliteStatement]:
    """The batch's statements, in order (the claims' runs go to `claimed`); its
    datetimes are rendered once, into `batch.rendered`."""
    rendered = batch.rendered
    found: list[SqliteStatement] = []
    if batch.claims:
        found.append(_claims(batch.claims, claimed, rendered))
    if batch.runs:
        runs = layout_of(Run)
        found.append((runs.insert_sql, encode(runs, batch.runs, rendered)))
    receipts = layout_of(Receipt)
    if batch.receipts:
        found.append((receipts.insert_sql, encode(receipts, batch.receipts, rendered)))
    if batch.encoded:
        created = (sqlite_time(batch.created_at, rendered),)
        encoded = batch.encoded
        if not isinstance(encoded[0][_STARTED_AT], str):  # kept as PostgreSQL takes them
            encoded = [_rendered(values, rendered) for values in encoded]
        found.append((receipts.insert_sql, [values + created for values in encoded]))
    if batch.audit or batch.audit_rows or batch.replaced_audit:
        audit = layout_of(AuditEvent)
        values = audit_event_values(batch.audit, rendered)
        values.extend(encode(audit, batch.audit_rows, rendered))
        values.extend(encode(audit, batch.replaced_audit, rendered))
        found.append((audit.insert_sql, values))
    if batch.ends:
        found.append((FINISH, _ends(batch.ends, rendered)))
    if batch.completions:
        found.append((COMPLETE, completion_values(batch.completions)))
    if batch.releases:
        found.append((RELEASE, release_values(batch.releases)))
    return found


def _rendered(values: tuple[Any, ...], rendered: RenderedTimes) -> tuple[Any, ...]:
    """A receipt's driver tuple with its datetimes as SQLite stores them."""
    items = list(values)
    for index in (_STARTED_AT, _FINISHED_AT):
        if items[index] is not None:
            items[index] = sqlite_time(items[index], rendered)
    return tuple(items)


def _claims(
    claims: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    claimed: set[str],
    rendered: RenderedTimes,
) -> SqliteClaims:
    key_rows = [claim[0] for claim in claims]
    run_rows = [claim[1] for claim in claims]
    return SqliteClaims(
        encode(layout_of(IdempotencyKey), key_rows, rendered),
        encode(layout_of(Run), run_rows, rendered),
        [row["id"] for row in run_rows],
        claimed,
        _claim_sql(),
        layout_of(Run).insert_sql,
    )


@cache
def _claim_sql() -> str:
    insert = layout_of(IdempotencyKey).insert_sql
    return f'{insert} {claim_sets("idempotency_keys")} RETURNING "run_id"'


def _ends(ends: Sequence[Mapping[str, Any]], rendered: RenderedTimes) -> list[tuple[Any, ...]]:
    encoded = []
    for end in ends:
        outcome = end.get("outcome")
        encoded.append(
            (
                end["status"],
                None if outcome is None else dumps(outcome),
                end.get("call_count"),
                sqlite_time(end["finished_at"], rendered),
                end["run_id"],
            )
        )
    return encoded
