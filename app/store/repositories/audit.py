"""Audit events: stored one per row, except a call's `call.started` and
`call.finished` written in one transaction, which share a row.

Such a row (kind `CALL_PAIR_KIND`, never shown as such) holds the started
event's time in `at`, and in `detail` both events' details and the finished
event's time (`{"started": ..., "finished": ..., "finished_at_us": ...}`);
its caller, tool and keys are the two events' own (they are equal). Reads
expand it back into the two events. An event's id is its row's id times two,
plus one for the finished half of a shared row: ids grow with the write order,
and a page can end between the two halves of a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select

from app.store.models import AuditEvent
from app.store.repositories.base import Repository
from app.store.repositories.bulk import insert_rows

CALL_PAIR_KIND = "call.started+finished"
CALL_STARTED = "call.started"
CALL_FINISHED = "call.finished"
# The finished event's time: exact integer microseconds since the epoch (UTC), which
# cost half of what an ISO text does to write and to read.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


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


def call_pair_detail(
    started: dict[str, Any], finished: dict[str, Any], finished_at: datetime
) -> dict[str, Any]:
    """The `detail` of a call's shared row, from its two events' details and the
    finished event's time (aware); the row's other columns are the started event's."""
    return {
        "started": started,
        "finished": finished,
        "finished_at_us": (finished_at - _EPOCH) // _MICROSECOND,
    }


def expand(
    id_: int,
    run_id: str | None,
    at: datetime,
    kind: str,
    caller: str | None,
    tool: str | None,
    call_key: str | None,
    item_key: str | None,
    detail: dict[str, Any],
) -> tuple[StoredAuditEvent, ...]:
    """The events one stored row holds, in write order."""
    if kind != CALL_PAIR_KIND:
        return (
            StoredAuditEvent(id_ * 2, run_id, at, kind, caller, tool, call_key, item_key, detail),
        )
    finished_at = _EPOCH + timedelta(microseconds=detail["finished_at_us"])
    return (
        StoredAuditEvent(
            id_ * 2, run_id, at, CALL_STARTED, caller, tool, call_key, item_key, detail["started"]
        ),
        StoredAuditEvent(
            id_ * 2 + 1,
            run_id,
            finished_at,
            CALL_FINISHED,
            caller,
            tool,
            call_key,
            item_key,
            detail["finished"],
        ),
    )


class AuditRepository(Repository):
    async def add_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append events in one executemany; keys are `AuditEvent` column names."""
        if rows:
            await self.session.execute(insert(AuditEvent), list(rows))

    async def add_bulk(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append events as `add_many` does, through the driver's bulk path
        (`app.store.repositories.bulk`); ids are assigned in row order."""
        await insert_rows(self.session, AuditEvent, rows)

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
            # From the row holding event `after_id` when that is the first half of a pair.
            statement = statement.where(AuditEvent.id > (after_id - 1) // 2)
        # The first row may hold no event after `after_id`: one row more than events.
        statement = statement.order_by(AuditEvent.id).limit(None if limit is None else limit + 1)
        events: list[StoredAuditEvent] = []
        for row in (await self.session.execute(statement)).all():
            events.extend(expand(*row))
        if after_id is not None:
            events = [event for event in events if event.id > after_id]
        return events if limit is None else events[:limit]
