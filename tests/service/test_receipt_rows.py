"""The rows the writer inserts: one transaction's audit events (`audit_event_rows`), and
receipts encoded straight into SQLite's driver tuples (`receipt_values`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType

import orjson
import pytest

from app.engine.receipt import CallError, ErrorKind, Receipt, Status
from app.engine.redaction import Redactor
from app.service.receipt_rows import (
    AUDIT_COLUMNS,
    RECEIPT_COLUMNS,
    audit_event_rows,
    audit_event_values,
    audit_row,
    receipt_row,
    receipt_values,
)
from app.store.repositories.audit import CALL_PAIR_KIND, expand
from app.store.repositories.bulk import BulkWrite, audit_columns, receipt_columns, sqlite_time
from tests.service.test_writer_audit import finished, retried, run_event, started
from tests.writer_support import succeeded_receipt

SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
MAX_OUTPUT_BYTES = 1024


def test_a_pair_row_holds_both_events_and_expands_back_into_them() -> None:
    events = [started(1), finished(1)]

    (row,) = audit_event_rows(events)

    assert row["kind"] == CALL_PAIR_KIND
    assert row["detail"]["started"] == events[0].detail
    assert row["detail"]["finished"] == events[1].detail
    stored = expand(1, **row)
    assert [(event.kind, event.at, event.detail) for event in stored] == [
        (event.kind.value, event.at, dict(event.detail)) for event in events
    ]


def test_rows_the_service_wrote_stay_as_they_are_and_keep_their_place() -> None:
    accepted, model_turn = run_event("plan.accepted"), run_event("router.model_turn")
    events = [accepted, started(1), finished(1), started(2), model_turn, finished(2)]

    rows = audit_event_rows(events)

    assert rows[0] is accepted
    assert rows[1]["kind"] == CALL_PAIR_KIND
    # An event of the run between a call's two keeps them apart.
    kinds = [row["kind"] for row in rows[2:]]
    assert kinds == ["call.started", "router.model_turn", "call.finished"]
    assert rows[3] is model_turn


def test_a_service_row_of_one_call_keeps_only_that_calls_events_apart() -> None:
    of_call_2 = {**run_event("evidence.noted"), "detail": {"receipt_id": "r2"}}
    events = [started(1), started(2), of_call_2, finished(1), finished(2)]

    rows = audit_event_rows(events)

    assert [row["kind"] for row in rows] == [
        "call.started",
        "evidence.noted",
        CALL_PAIR_KIND,
        "call.finished",
    ]
    assert rows[0]["detail"]["receipt_id"] == "r2"


def test_events_that_cannot_share_a_row_are_written_as_their_own_rows() -> None:
    naive_end = finished(1, at=datetime(2026, 11, 30, 12, 0, 1))
    events = [started(1), naive_end, started(2), retried(2), finished(2), finished(3)]

    rows = audit_event_rows(events)

    assert rows == [audit_row(event) for event in events]


def test_a_pair_rows_details_are_plain_dicts_even_from_read_only_mappings() -> None:
    first = started(1)._replace(detail=MappingProxyType(dict(started(1).detail)))
    then = finished(1)._replace(detail=MappingProxyType(dict(finished(1).detail)))

    (row,) = audit_event_rows([first, then])

    # As the store writes it: orjson refuses a mappingproxy.
    assert orjson.loads(orjson.dumps(row["detail"])) == {
        "started": dict(first.detail),
        "finished": dict(then.detail),
        "finished_at_us": row["detail"]["finished_at_us"],
    }


def test_a_start_alone_is_its_own_row() -> None:
    assert audit_event_rows([]) == []
    assert audit_event_rows([started(1)]) == [audit_row(started(1))]


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

    direct = BulkWrite().add_encoded_receipts(values)._sqlite_statements({})
    through_rows = BulkWrite().add_receipts(rows)._sqlite_statements({})

    assert direct == through_rows
    assert SECRET not in repr(values)
    assert "hunter2" not in repr(values)
    assert [row[11] for row in values] == [False, False, False, False, True, False, False, False]


def test_receipt_values_follow_the_receipts_table_s_columns() -> None:
    assert receipt_columns() == RECEIPT_COLUMNS
    assert audit_columns() == AUDIT_COLUMNS


def test_audit_event_values_are_the_bulk_insert_s_driver_rows_of_audit_event_rows() -> None:
    accepted = {**run_event("plan.accepted"), "detail": {"n": [1, 2], "text": "ünïcode"}}
    read_only = finished(4)._replace(detail=MappingProxyType(dict(finished(4).detail)))
    events = [
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
        finished(5),
    ]

    rows = audit_event_rows(events)
    values = audit_event_values(events, {})

    assert any(row["kind"] == CALL_PAIR_KIND for row in rows)
    direct = BulkWrite().add_encoded_audit(values)._sqlite_statements({})
    through_rows = BulkWrite().add_audit(rows)._sqlite_statements({})
    assert direct == through_rows


def test_an_audit_event_with_a_naive_time_is_refused_either_way() -> None:
    events = [started(1), finished(1, at=datetime(2026, 11, 30, 12, 0, 1)), started(2)]
    events.append(events[1]._replace(detail={"receipt_id": "r9"}))

    with pytest.raises(ValueError, match="naive datetime"):
        audit_event_values(events, {})
    with pytest.raises(ValueError, match="naive datetime"):
        BulkWrite().add_audit(audit_event_rows(events))._sqlite_statements({})
