"""`audit_event_rows`: one transaction's audit events as the rows the writer inserts."""

from __future__ import annotations

from datetime import datetime
from types import MappingProxyType

import orjson

from app.service.receipt_rows import audit_event_rows, audit_row
from app.store.repositories.audit import CALL_PAIR_KIND, expand
from tests.service.test_writer_audit import finished, retried, run_event, started


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
