"""The rows the writer inserts: one transaction's audit events (`audit_event_rows`), a
run's sharing one row, and receipts encoded straight into SQLite's driver tuples
(`receipt_values`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from app.engine.ports import AuditEvent
from app.engine.receipt import CallError, ErrorKind, Receipt, Status
from app.foundation.redaction import Redactor
from app.store.journal.batch import Batch
from app.store.journal.events import audit_event_rows, audit_event_values, audit_row
from app.store.journal.postgres.connection import steps
from app.store.journal.postgres.encoding import Encoded
from app.store.journal.records import receipt_row, receipt_values
from app.store.journal.rows import (
    AUDIT_COLUMNS,
    RECEIPT_COLUMNS,
    encode,
    layout_of,
    sqlite_time,
)
from app.store.models import AuditEvent as AuditTable
from app.store.models import Receipt as ReceiptTable
from app.store.repositories.audit import (
    CALL_PAIR_KIND,
    EVENTS_PER_ROW,
    EVENTS_ROW_KIND,
    event_id_of_two_per_row,
    expand,
)
from tests.store.journal.test_writer_audit import finished, retried, run_event, started
from tests.writer_support import RUN_ID, succeeded_receipt

SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
MAX_OUTPUT_BYTES = 1024


def _as_read(event: AuditEvent | dict[str, Any]) -> tuple[Any, ...]:
    """What reading the event back from its own row gives, but its id."""
    row = event if isinstance(event, dict) else audit_row(event)
    return (
        row["run_id"],
        row["at"].astimezone(UTC),
        row["kind"],
        row["caller"],
        row["tool"],
        row["call_key"],
        row["item_key"],
        dict(row["detail"]),
    )


def _read_back(row_id: int, row: dict[str, Any]) -> list[tuple[Any, ...]]:
    # Through JSON, as the store keeps the row's detail.
    stored = {**row, "detail": orjson.loads(orjson.dumps(row["detail"]))}
    return [
        (e.run_id, e.at, e.kind, e.caller, e.tool, e.call_key, e.item_key, e.detail)
        for e in expand(row_id, **stored)
    ]


def _with_parent(event: AuditEvent, parent: str) -> AuditEvent:
    return event._replace(detail={**event.detail, "parent_receipt_id": parent})


def test_a_run_s_events_share_one_row_that_expands_back_into_exactly_them() -> None:
    accepted = {**run_event("plan.accepted"), "detail": {"n": [1, 2], "text": "ünïcode"}}
    # Another zone than UTC, and whole seconds.
    elsewhere = started(4, at=datetime(2026, 11, 30, 14, 0, 0, tzinfo=timezone(timedelta(hours=2))))
    events: list[AuditEvent | dict[str, Any]] = [
        accepted,
        started(1),
        finished(1),
        started(2),
        retried(2),
        finished(2),
        _with_parent(started(3), "r1"),
        _with_parent(finished(3), "r1"),
        elsewhere,
        run_event("router.model_turn"),
        finished(4),
    ]

    (row,) = audit_event_rows(events)

    assert (row["kind"], row["run_id"], row["caller"]) == (EVENTS_ROW_KIND, RUN_ID, "caller-a")
    assert row["at"] == accepted["at"]
    assert _read_back(7, row) == [_as_read(event) for event in events]
    assert [event.id for event in expand(7, **row)] == [
        7 * EVENTS_PER_ROW + place for place in range(len(events))
    ]


def test_a_call_s_two_events_side_by_side_take_the_short_forms() -> None:
    extra = started(5)._replace(detail={**started(5).detail, "note": "x"})
    numbered = started(6)._replace(detail={**started(6).detail, "seq": True})
    # Equal to its start's seq (1 == True), but it would read back as an int.
    numbered_end = finished(1)._replace(detail={**finished(1).detail, "seq": True})
    # The same call key as the start before it, but another receipt, or another parent.
    other_receipt = finished(8)._replace(detail={**finished(8).detail, "receipt_id": "r8b"})
    other_parent = _with_parent(finished(9), "r1")
    events = [
        started(1),
        finished(1),  # short: right after its own start
        started(2),
        retried(2),
        finished(2),  # not right after its start
        started(3),
        finished(4),  # another call's
        extra,  # a start with more detail
        finished(5),
        numbered,  # a seq that would read back as another type
        finished(6),
        started(1),
        numbered_end,
        started(8),
        other_receipt,
        started(9),
        other_parent,
    ]

    (row,) = audit_event_rows(events)

    forms = [entry[0] for entry in row["detail"]]
    assert forms == [1, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0]
    assert _read_back(1, row) == [_as_read(event) for event in events]


def test_each_run_s_events_share_a_row_that_stands_at_its_first_event() -> None:
    events = [
        started(1),
        started(1, run_id="run-b"),
        finished(1),
        run_event("plan.accepted", run_id="run-c"),
        finished(1, run_id="run-b"),
        started(2),
    ]

    rows = audit_event_rows(events)

    assert [(row["run_id"], row["kind"]) for row in rows] == [
        (RUN_ID, EVENTS_ROW_KIND),
        ("run-b", EVENTS_ROW_KIND),
        ("run-c", "plan.accepted"),
    ]
    assert _read_back(1, rows[0]) == [_as_read(e) for e in (events[0], events[2], events[5])]
    assert _read_back(2, rows[1]) == [_as_read(e) for e in (events[1], events[4])]
    assert rows[2] is events[3]


def test_an_event_that_cannot_share_a_row_ends_its_run_s_row_and_keeps_its_place() -> None:
    naive_end = finished(1, at=datetime(2026, 11, 30, 12, 0, 1))
    widened = {**run_event("evidence.noted"), "extra": 1}
    stranger = finished(3)._replace(caller="someone-else")
    events = [
        started(1),
        started(1, run_id="run-b"),
        naive_end,
        started(2),
        finished(2),
        widened,
        finished(1, run_id="run-b"),
        started(3),
        stranger,
        started(4),
        finished(4),
    ]

    rows = audit_event_rows(events)

    assert [row["run_id"] for row in rows] == [RUN_ID, "run-b", *[RUN_ID] * 6]
    assert rows[0] == audit_row(started(1))  # alone before the naive time: its own row
    assert _read_back(1, rows[1]) == [_as_read(e) for e in (events[1], events[6])]
    assert rows[2] == audit_row(naive_end)
    assert _read_back(3, rows[3]) == [_as_read(e) for e in (started(2), finished(2))]
    assert rows[4] is widened
    # Then started(3) alone, stranger alone (another caller), started(4) with finished(4).
    assert rows[5:7] == [audit_row(started(3)), audit_row(stranger)]
    assert _read_back(6, rows[7]) == [_as_read(e) for e in (started(4), finished(4))]


def test_a_full_row_starts_another() -> None:
    events = [started(n) for n in range(EVENTS_PER_ROW + 2)]

    rows = audit_event_rows(events)

    assert [len(row["detail"]) for row in rows] == [EVENTS_PER_ROW, 2]
    assert [event for row in rows for event in _read_back(1, row)] == [
        _as_read(event) for event in events
    ]


def test_a_shared_row_s_details_are_plain_dicts_even_from_read_only_mappings() -> None:
    first = retried(1)._replace(detail=MappingProxyType(dict(retried(1).detail)))
    then = finished(1)._replace(detail=MappingProxyType(dict(finished(1).detail)))
    accepted = {**run_event("plan.accepted"), "detail": MappingProxyType({"a": 1})}

    (row,) = audit_event_rows([accepted, first, then])

    # As the store writes it: orjson refuses a mappingproxy.
    assert _read_back(1, row) == [_as_read(event) for event in (accepted, first, then)]


def test_an_event_alone_is_its_own_row() -> None:
    assert audit_event_rows([]) == []
    assert audit_event_rows([started(1)]) == [audit_row(started(1))]
    accepted = run_event("plan.accepted")
    assert audit_event_rows([accepted, started(1, run_id="run-b")]) == [
        accepted,
        audit_row(started(1, run_id="run-b")),
    ]


def test_rows_an_earlier_version_wrote_read_back_with_ids_counted_per_row() -> None:
    pair = {
        **audit_row(started(1)),
        "kind": CALL_PAIR_KIND,
        "detail": {
            "started": dict(started(1).detail),
            "finished": dict(finished(1).detail),
            "finished_at_us": (finished(1).at - datetime(1970, 1, 1, tzinfo=UTC))
            // timedelta(microseconds=1),
        },
    }

    assert _read_back(5, pair) == [_as_read(started(1)), _as_read(finished(1))]
    assert [event.id for event in expand(5, **pair)] == [5 * EVENTS_PER_ROW, 5 * EVENTS_PER_ROW + 1]
    assert [event.id for event in expand(6, **audit_row(started(2)))] == [6 * EVENTS_PER_ROW]
    # That version's ids: the row's id times two, plus one for a pair's second event.
    assert [event_id_of_two_per_row(n) for n in (10, 11, 12)] == [
        5 * EVENTS_PER_ROW,
        5 * EVENTS_PER_ROW + 1,
        6 * EVENTS_PER_ROW,
    ]


def _varied_receipts() -> list[Receipt]:
    """Receipts covering every kind of value a receipt column takes."""
    plain = succeeded_receipt(0, {"text": "hello"})
    plain = plain._replace(finished_at=plain.started_at + timedelta(microseconds=1500))
    shared_time = datetime(2026, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    return [
        plain,
        succeeded_receipt(1, {"auth": f"Bearer {SECRET}", "n": [1.5, None, True, 1e300]}),
        plain._replace(
            receipt_id="r2",
            seq=2,
            status=Status.FAILED,
            output=None,
            error=CallError(ErrorKind.TIMEOUT, f"tab\there {SECRET}", outcome_unknown=True),
            attempts=3,
        ),
        plain._replace(
            receipt_id="r3",
            seq=3,
            control=MappingProxyType({"continue": False, "tags": ["a", "b"]}),
            item_key="lane-a",
            parallel_batch_id="batch-1",
            cache_hit=True,
            cache_source_receipt_id="source",
            parent_receipt_id="parent",
            admission_wait_ms=1.25,
        ),
        plain._replace(receipt_id="r4", seq=4, output={"big": "x" * (2 * MAX_OUTPUT_BYTES)}),
        plain._replace(
            receipt_id="r5", seq=5, started_at=shared_time, finished_at=shared_time, output=[]
        ),
        succeeded_receipt(6, {"password": "hunter2", "ünïcode": '"quoted"'})._replace(
            redactor=Redactor(["password"])
        ),
        plain._replace(receipt_id="r7", seq=7, status=Status.SKIPPED, output="just a string"),
    ]


def test_receipt_values_are_the_bulk_insert_s_driver_rows_column_for_column() -> None:
    receipts = _varied_receipts()
    created_at = datetime.now(UTC)
    rows = [
        {**receipt_row(receipt, MAX_OUTPUT_BYTES), "created_at": created_at} for receipt in receipts
    ]
    rendered: dict[int, tuple[datetime, str]] = {}
    values = [
        (*receipt_values(receipt, MAX_OUTPUT_BYTES, rendered), sqlite_time(created_at, rendered))
        for receipt in receipts
    ]

    assert values == encode(layout_of(ReceiptTable), rows, {})
    assert SECRET not in repr(values)
    assert "hunter2" not in repr(values)
    assert [row[11] for row in values] == [False, False, False, False, True, False, False, False]


def test_receipt_values_for_postgresql_are_the_bulk_insert_s_copy_rows_column_for_column() -> None:
    receipts = _varied_receipts()
    created_at = datetime.now(UTC)
    rows = [
        {**receipt_row(receipt, MAX_OUTPUT_BYTES), "created_at": created_at} for receipt in receipts
    ]
    values = [receipt_values(receipt, MAX_OUTPUT_BYTES, None) for receipt in receipts]

    direct = Encoded(layout_of(ReceiptTable), values, created_at)
    assert direct.copied() == encode(layout_of(ReceiptTable), rows)
    assert SECRET not in repr(values)
    assert "hunter2" not in repr(values)


@pytest.mark.parametrize("field", ["started_at", "finished_at"])
def test_receipt_values_for_postgresql_refuse_a_naive_time(field: str) -> None:
    receipt = _varied_receipts()[0]._replace(**{field: datetime(2026, 1, 1, 12, 0)})
    with pytest.raises(ValueError, match="naive datetime 2026-01-01T12:00:00 cannot be stored"):
        receipt_values(receipt, MAX_OUTPUT_BYTES, None)


def test_receipts_for_postgresql_refuse_a_naive_creation_time() -> None:
    values = receipt_values(_varied_receipts()[0], MAX_OUTPUT_BYTES, None)
    with pytest.raises(ValueError, match="naive datetime 2026-01-01T00:00:00 cannot be stored"):
        steps(Batch(encoded=[values], created_at=datetime(2026, 1, 1)), set())


def test_the_driver_tuples_hold_every_column_of_their_tables() -> None:
    assert layout_of(ReceiptTable).columns == RECEIPT_COLUMNS
    assert set(RECEIPT_COLUMNS) == {column.name for column in ReceiptTable.__table__.columns}
    assert layout_of(AuditTable).columns == AUDIT_COLUMNS
    audit_columns = {column.name for column in AuditTable.__table__.columns}
    assert set(AUDIT_COLUMNS) == audit_columns - {"id"}  # the database's


def _varied_events() -> list[AuditEvent | dict[str, Any]]:
    accepted = {**run_event("plan.accepted"), "detail": {"n": [1, 2], "text": "ünïcode"}}
    read_only = finished(4)._replace(detail=MappingProxyType(dict(finished(4).detail)))
    return [
        accepted,
        started(1),
        finished(1),
        started(2),
        retried(2),
        finished(2),
        started(3),
        started(4),
        run_event("router.model_turn"),
        finished(3),
        read_only,
        started(9, run_id="run-b"),
        finished(5)._replace(caller="someone-else"),
        finished(6)._replace(caller="someone-else"),
        run_event("plan.finished"),
    ]


def test_audit_event_values_are_the_bulk_insert_s_driver_rows_of_audit_event_rows() -> None:
    events = _varied_events()
    rows = audit_event_rows(events)
    values = audit_event_values(events, {})

    kinds = [EVENTS_ROW_KIND, "call.started", EVENTS_ROW_KIND, "plan.finished"]
    assert [row["kind"] for row in rows] == kinds
    assert values == encode(layout_of(AuditTable), rows, {})


def test_audit_event_values_for_postgresql_are_the_bulk_insert_s_copy_rows() -> None:
    events = _varied_events()
    values = audit_event_values(events, None)

    assert values == encode(layout_of(AuditTable), audit_event_rows(events))
    assert all(isinstance(row[1], datetime) and row[1].tzinfo is not None for row in values)


@pytest.mark.parametrize("rendered", [{}, None], ids=["sqlite", "postgresql"])
def test_an_audit_event_with_a_naive_time_is_refused_either_way(
    rendered: dict[int, tuple[datetime, str]] | None,
) -> None:
    events = [started(1), finished(1, at=datetime(2026, 11, 30, 12, 0, 1)), started(2)]
    events.append(events[1]._replace(detail={"receipt_id": "r9"}))

    with pytest.raises(ValueError, match="naive datetime"):
        audit_event_values(events, rendered)
    with pytest.raises(ValueError, match="naive datetime"):
        audit_event_values([events[1]], rendered)  # an event alone: its own row
    with pytest.raises(ValueError, match="naive datetime"):
        encode(layout_of(AuditTable), audit_event_rows(events), rendered)
