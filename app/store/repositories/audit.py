"""Audit events: stored one per row, except a run's events written in one
transaction, which share a row (up to `EVENTS_PER_ROW` of them).

Such a row (kind `EVENTS_ROW_KIND`, never shown as such) holds its first
event's time in `at`, the events' caller in `caller` (they are equal), and in
`detail` a list with one entry per event, in write order:

- `[0, kind, at_us, tool, call_key, item_key, detail]`: any event;
- `[1, at_us, tool, call_key, item_key, receipt_id, seq, parent_receipt_id]`:
  a `call.started` whose detail is those three, in that order;
- `[2, at_us, status, attempts, duration_ms, error]`: a `call.finished` that
  follows its own `call.started` (the entry before it, of form 1): its tool,
  keys and first three details are that entry's, then these four.

`at_us` is exact integer microseconds since the epoch (UTC). Reads expand a
row back into its events. An event's id is its row's id times
`EVENTS_PER_ROW`, plus its place in the row: ids grow with the write order
within a run, and a page can end inside a row.

Rows an earlier version wrote stay readable: one event per row, or a call's
`call.started` and `call.finished` in one row of kind `CALL_PAIR_KIND` (its
`detail` is `{"started": ..., "finished": ..., "finished_at_us": ...}`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, or_, select

from app.store.models import AuditEvent, Run
from app.store.repositories.base import Repository

EVENTS_ROW_KIND = "events"
# Enough for a plan's call events to share rows by the dozen, and a page of a
# long run never reads more than one row's worth past what it shows.
EVENTS_PER_ROW = 64
# The entries of an `EVENTS_ROW_KIND` row (module docstring).
ANY_EVENT, CALL_STARTED_ENTRY, CALL_FINISHED_ENTRY = 0, 1, 2
STARTED_DETAIL = ("receipt_id", "seq", "parent_receipt_id")
FINISHED_DETAIL = (*STARTED_DETAIL, "status", "attempts", "duration_ms", "error")
CALL_PAIR_KIND = "call.started+finished"
CALL_STARTED = "call.started"
CALL_FINISHED = "call.finished"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
# A shared row's `at` is its first event's time; its later events come within one
# transaction of it.
_SHARED_ROW_SPAN = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class StoredAuditEvent:
    """One audit event as written; `id` is the event's (see the module docstring)."""

    id: int
    run_id: str | None
    at: datetime
    kind: str
    caller: str | None
    tool: str | None
    call_key: str | None
    item_key: str | None
    detail: dict[str, Any]


def event_id_of_two_per_row(earlier_id: int) -> int:
    """The id an event has now, from the id an earlier version gave it (its row's id
    times two, plus one for the second event of a row)."""
    return earlier_id // 2 * EVENTS_PER_ROW + earlier_id % 2


def expand(
    id_: int,
    run_id: str | None,
    at: datetime,
    kind: str,
    caller: str | None,
    tool: str | None,
    call_key: str | None,
    item_key: str | None,
    detail: Any,
) -> list[StoredAuditEvent]:
    """The events one stored row holds, in write order."""
    base = id_ * EVENTS_PER_ROW
    if kind == EVENTS_ROW_KIND:
        return _shared_row_events(base, run_id, caller, detail)
    if kind != CALL_PAIR_KIND:
        return [StoredAuditEvent(base, run_id, at, kind, caller, tool, call_key, item_key, detail)]
    finished_at = EPOCH + detail["finished_at_us"] * MICROSECOND
    return [
        StoredAuditEvent(
            base, run_id, at, CALL_STARTED, caller, tool, call_key, item_key, detail["started"]
        ),
        StoredAuditEvent(
            base + 1,
            run_id,
            finished_at,
            CALL_FINISHED,
            caller,
            tool,
            call_key,
            item_key,
            detail["finished"],
        ),
    ]


def _shared_row_events(
    base: int, run_id: str | None, caller: str | None, entries: Sequence[Sequence[Any]]
) -> list[StoredAuditEvent]:
    events: list[StoredAuditEvent] = []
    for place, entry in enumerate(entries):
        form = entry[0]
        if form == CALL_STARTED_ENTRY:
            _, at_us, tool, call_key, item_key, *started = entry
            kind, detail = CALL_STARTED, dict(zip(STARTED_DETAIL, started, strict=True))
        elif form == CALL_FINISHED_ENTRY:
            _, at_us, *ending = entry
            _, _, tool, call_key, item_key, *started = entries[place - 1]
            kind = CALL_FINISHED
            detail = dict(zip(FINISHED_DETAIL, (*started, *ending), strict=True))
        else:
            _, kind, at_us, tool, call_key, item_key, detail = entry
        at = EPOCH + at_us * MICROSECOND
        events.append(
            StoredAuditEvent(
                base + place, run_id, at, kind, caller, tool, call_key, item_key, detail
            )
        )
    return events


class AuditRepository(Repository):
    async def add_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append events in one executemany; keys are `AuditEvent` column names."""
        if rows:
            await self.session.execute(insert(AuditEvent), list(rows))

    async def list_for_run(
        self, run_id: str | None, *, after_id: int | None = None, limit: int | None = None
    ) -> list[StoredAuditEvent]:
        """The run's events in the order they were written, shared rows expanded;
        `after_id` and `limit` count events (ids as in the module docstring)."""
        statement = select(
            AuditEvent.id,
            AuditEvent.run_id,
            AuditEvent.at,
            AuditEvent.kind,
            AuditEvent.caller,
            AuditEvent.tool,
            AuditEvent.call_key,
            AuditEvent.item_key,
            AuditEvent.detail,
        ).where(AuditEvent.run_id == run_id)
        if after_id is not None:
            # From the row holding event `after_id`.
            statement = statement.where(AuditEvent.id >= after_id // EVENTS_PER_ROW)
        # The first row may hold no event after `after_id`: one row more than events.
        statement = statement.order_by(AuditEvent.id).limit(None if limit is None else limit + 1)
        events: list[StoredAuditEvent] = []
        # Streamed, and left once the page is full: rows hold up to EVENTS_PER_ROW
        # events, and the rows past those a page shows are never read.
        rows = await self.session.stream(statement)
        try:
            async for row in rows:
                events.extend(
                    event for event in expand(*row) if after_id is None or event.id > after_id
                )
                if limit is not None and len(events) >= limit:
                    break
        finally:
            await rows.close()
        return events if limit is None else events[:limit]

    async def events_between(
        self,
        kinds: Sequence[str],
        *,
        since: datetime,
        until: datetime | None,
        after_row: int = 0,
        rows: int = 500,
    ) -> tuple[list[tuple[str, StoredAuditEvent]], int | None]:
        """Events of `kinds` at or after `since` and before `until`, each with its
        run's owner, from the rows after `after_row` (up to `rows` rows), in write
        order; and the last row read, when there may be more."""
        statement = (
            select(
                AuditEvent.id,
                AuditEvent.run_id,
                AuditEvent.at,
                AuditEvent.kind,
                AuditEvent.caller,
                AuditEvent.tool,
                AuditEvent.call_key,
                AuditEvent.item_key,
                AuditEvent.detail,
                Run.owner,
            )
            .join(Run, Run.id == AuditEvent.run_id)
            .where(
                AuditEvent.id > after_row,
                or_(AuditEvent.kind.in_(kinds), AuditEvent.kind == EVENTS_ROW_KIND),
                AuditEvent.at >= since - _SHARED_ROW_SPAN,
            )
            .order_by(AuditEvent.id)
            .limit(rows)
        )
        if until is not None:
            statement = statement.where(AuditEvent.at < until)
        found: list[tuple[str, StoredAuditEvent]] = []
        read = (await self.session.execute(statement)).all()
        for *row, owner in read:
            found.extend(
                (owner, event)
                for event in expand(*row)
                if event.kind in kinds and event.at >= since and (until is None or event.at < until)
            )
        return found, (read[-1][0] if len(read) == rows else None)
