"""Audit rows for the store from the engine's events and the service's own rows.

A run's audit events written in one transaction share a row (`audit_event_rows`).
Every audit row's `detail` is redacted here, whoever emitted it (the engine,
the service, the router): the built-in patterns, as receipts are. The row's
JSON is written anyway; most hold no pattern's literal, and only the others
are redacted and written again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from app.engine.ports import AuditEvent, AuditKind
from app.foundation.chain import CHAIN_COLUMNS
from app.foundation.redaction import DEFAULT_REDACTOR, may_hold_secret
from app.foundation.serialization import dumps
from app.store.journal.rows import (
    AUDIT_COLUMNS,
    RenderedTimes,
    aware,
    encode,
    layout_of,
    sqlite_time,
)
from app.store.models import AuditEvent as AuditEventRow
from app.store.repositories.audit import (
    ANY_EVENT,
    CALL_FINISHED_ENTRY,
    CALL_STARTED_ENTRY,
    EPOCH,
    EVENTS_PER_ROW,
    EVENTS_ROW_KIND,
    FINISHED_DETAIL,
    MICROSECOND,
    STARTED_DETAIL,
)

# A service row's keys, when it may share a row (its chain columns are the journal's).
_AUDIT_KEYS = frozenset(AUDIT_COLUMNS) - CHAIN_COLUMNS


def _detail_json(detail: Any) -> str:
    """`detail` as stored: its JSON, redacted."""
    text = dumps(detail)
    if not may_hold_secret(text):
        return text
    return dumps(DEFAULT_REDACTOR.redact(detail))


def _redacted_row(row: dict[str, Any]) -> dict[str, Any]:
    """An audit row with its `detail` redacted (a copy, when that changes it)."""
    detail = row.get("detail")
    redacted = DEFAULT_REDACTOR.redact(detail)
    return row if redacted is detail else {**row, "detail": redacted}


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

    A run's events share one row (`EVENTS_ROW_KIND`, in write order), which takes
    its first event's place: the run's later events are read earlier than they
    were written, past other runs' events, never past an event of their own run.
    An event that cannot share a row (its time naive, left to the insert to
    refuse; a service row with other columns) is its own row and ends its run's
    shared row, as does an event of another caller, or a full row: the run's
    events after it start a row of their own. An event alone is its own row.
    """
    rows: list[dict[str, Any]] = []
    for item in _grouped(events):
        if isinstance(item, list):
            row = _shared_row(item) if len(item) > 1 else _own_row(item[0])
        else:
            row = _own_row(item)
        rows.append(_redacted_row(row))
    return rows


def stored_audit_rows(events: Sequence[AuditEvent | dict[str, Any]]) -> list[dict[str, Any]]:
    """`audit_event_rows(events)`, each `detail` redacted only when its JSON may hold
    a secret (as `audit_event_values` does): the rows as they will be stored."""
    rows: list[dict[str, Any]] = []
    for item in _grouped(events):
        if isinstance(item, list):
            row = _shared_row(item) if len(item) > 1 else _own_row(item[0])
        else:
            row = _own_row(item)
        detail = row.get("detail")
        if may_hold_secret(dumps(detail)):
            row = {**row, "detail": DEFAULT_REDACTOR.redact(detail)}
        rows.append(row)
    return rows


def audit_event_values(
    events: Sequence[AuditEvent | dict[str, Any]], rendered: RenderedTimes | None
) -> list[tuple[Any, ...]]:
    """`audit_event_rows(events)` as SQLite's driver takes them or, with `rendered`
    None, PostgreSQL's, column for
    column (`AUDIT_COLUMNS`), with no row in between for the engine's events.
    PostgreSQL's datetimes stay datetimes, and a naive one is refused here, as the
    bulk insert would refuse it."""
    values: list[tuple[Any, ...]] = []
    for item in _grouped(events):
        if isinstance(item, list):
            if len(item) > 1:
                run_id, at, caller = _head(item[0])
                entries = _detail_json(_shared_row_entries(item))
                values.append(
                    (
                        run_id,
                        _stored_time(at, rendered),
                        EVENTS_ROW_KIND,
                        caller,
                        None,
                        None,
                        None,
                        entries,
                        None,
                        None,
                    )
                )
                continue
            event = item[0]
        else:
            event = item
        if isinstance(event, dict):
            values.append(encode(layout_of(AuditEventRow), [_redacted_row(event)], rendered)[0])
            continue
        values.append(
            (
                event.run_id,
                _stored_time(event.at, rendered),
                _KIND_TEXT[event.kind],
                event.caller,
                event.tool,
                event.call_key,
                event.item_key,
                _detail_json(dict(event.detail)),
                None,
                None,
            )
        )
    return values


def _stored_time(value: datetime, rendered: RenderedTimes | None) -> datetime | str:
    """As SQLite stores it (`sqlite_time`) or, with `rendered` None, the datetime itself,
    which must be aware."""
    return aware(value) if rendered is None else sqlite_time(value, rendered)


# A run's events that share a row, in write order.
_Group = list[AuditEvent | dict[str, Any]]


def _grouped(
    events: Sequence[AuditEvent | dict[str, Any]],
) -> list[AuditEvent | dict[str, Any] | _Group]:
    """The transaction's events in the order their rows are written, each run's
    events that share a row as one group (`audit_event_rows`)."""
    out: list[AuditEvent | dict[str, Any] | _Group] = []
    # run id -> (the caller of its open row, the row's events)
    open_groups: dict[str | None, tuple[str | None, _Group]] = {}
    for event in events:
        at: Any
        if isinstance(event, dict):
            run_id, caller, at = event.get("run_id"), event.get("caller"), event.get("at")
            shareable = (
                event.keys() == _AUDIT_KEYS
                and isinstance(at, datetime)
                and isinstance(event["detail"], Mapping)
            )
        else:
            run_id, caller, at = event.run_id, event.caller, event.at
            shareable = True
        if not shareable or at.tzinfo is None:
            open_groups.pop(run_id, None)
            out.append(event)
            continue
        opened = open_groups.get(run_id)
        if opened is None or opened[0] != caller or len(opened[1]) == EVENTS_PER_ROW:
            group: _Group = []
            open_groups[run_id] = (caller, group)
            out.append(group)
        else:
            group = opened[1]
        group.append(event)
    return out


def _head(event: AuditEvent | dict[str, Any]) -> tuple[str | None, datetime, str | None]:
    """The event's run id, time and caller: a shared row's, when it is the row's first."""
    if isinstance(event, dict):
        return event["run_id"], event["at"], event["caller"]
    return event.run_id, event.at, event.caller


def _shared_row_entries(group: _Group) -> list[list[Any]]:
    """The `detail` of a shared row: one entry per event (`app.store.repositories.audit`).

    A call's start is short (form 1) when its identity reads back as written, to
    the type; its finish right after it is short too (form 2) when it names the
    same call. (Written out rather than through helpers: this runs twice per call
    on the event loop, and the calls were a third of its cost.)"""
    entries: list[list[Any]] = []
    started: list[Any] | None = None  # the entry just before, when it is of form 1
    for event in group:
        if isinstance(event, dict):
            at_us = (event["at"] - EPOCH) // MICROSECOND
            entries.append(
                [
                    ANY_EVENT,
                    event["kind"],
                    at_us,
                    event["tool"],
                    event["call_key"],
                    event["item_key"],
                    dict(event["detail"]),
                ]
            )
            started = None
            continue
        kind, detail = event.kind, event.detail
        at_us = (event.at - EPOCH) // MICROSECOND
        if (kind is _STARTED and tuple(detail) == STARTED_DETAIL) or (
            kind is _FINISHED and started is not None and tuple(detail) == FINISHED_DETAIL
        ):
            receipt_id, seq, parent = (
                detail["receipt_id"],
                detail["seq"],
                detail["parent_receipt_id"],
            )
            if (
                type(receipt_id) is str
                and type(seq) is int
                and (parent is None or type(parent) is str)
            ):
                identity = [event.tool, event.call_key, event.item_key, receipt_id, seq, parent]
                if kind is _STARTED:
                    started = [CALL_STARTED_ENTRY, at_us, *identity]
                    entries.append(started)
                    continue
                if started is not None and started[2:] == identity:
                    entries.append(
                        [
                            CALL_FINISHED_ENTRY,
                            at_us,
                            detail["status"],
                            detail["attempts"],
                            detail["duration_ms"],
                            detail["error"],
                        ]
                    )
                    started = None
                    continue
        entries.append(
            [
                ANY_EVENT,
                _KIND_TEXT[kind],
                at_us,
                event.tool,
                event.call_key,
                event.item_key,
                detail if type(detail) is dict else dict(detail),
            ]
        )
        started = None
    return entries


def _own_row(event: AuditEvent | dict[str, Any]) -> dict[str, Any]:
    if isinstance(event, dict):
        return event
    return audit_row(event)


def _shared_row(group: _Group) -> dict[str, Any]:
    run_id, at, caller = _head(group[0])
    return {
        "run_id": run_id,
        "at": at,
        "kind": EVENTS_ROW_KIND,
        "caller": caller,
        "tool": None,
        "call_key": None,
        "item_key": None,
        "detail": _shared_row_entries(group),
    }


# An enum member's `.value` goes through the enum's descriptor: four times a lookup here.
_KIND_TEXT = {kind: kind.value for kind in AuditKind}
_STARTED = AuditKind.CALL_STARTED
_FINISHED = AuditKind.CALL_FINISHED
