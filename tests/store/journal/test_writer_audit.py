"""A run's audit events written in one transaction share a row, read back as they were written."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.engine.ports import AuditEvent, AuditKind
from app.service.runs.reads import audit_view
from app.store.database import create_session_factory
from app.store.journal.events import audit_row
from app.store.journal.writer import GroupCommitWriter
from app.store.models import AuditEvent as AuditRow
from app.store.repositories import audit as audit_repository
from app.store.repositories.audit import (
    EVENTS_PER_ROW,
    AuditRepository,
    StoredAuditEvent,
    expand,
)
from tests.writer_support import RUN_ID

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)


def started(number: int, *, run_id: str = RUN_ID, at: datetime | None = None) -> AuditEvent:
    return AuditEvent(
        AuditKind.CALL_STARTED,
        at or T0 + timedelta(milliseconds=number),
        run_id,
        "caller-a",
        "t",
        f"c{number}",
        f"lane-{number % 2}",
        {"receipt_id": f"r{number}", "seq": number, "parent_receipt_id": None},
    )


def finished(number: int, *, run_id: str = RUN_ID, at: datetime | None = None) -> AuditEvent:
    return AuditEvent(
        AuditKind.CALL_FINISHED,
        at or T0 + timedelta(milliseconds=number, microseconds=700),
        run_id,
        "caller-a",
        "t",
        f"c{number}",
        f"lane-{number % 2}",
        {
            "receipt_id": f"r{number}",
            "seq": number,
            "parent_receipt_id": None,
            "status": "failed" if number % 3 == 0 else "succeeded",
            "attempts": 1,
            "duration_ms": 0.7,
            "error": {"kind": "exception", "message": "boom"} if number % 3 == 0 else None,
        },
    )


def retried(number: int) -> AuditEvent:
    return AuditEvent(
        AuditKind.CALL_RETRIED,
        T0 + timedelta(milliseconds=number, microseconds=300),
        RUN_ID,
        "caller-a",
        "t",
        f"c{number}",
        f"lane-{number % 2}",
        {"receipt_id": f"r{number}", "seq": number, "parent_receipt_id": None},
    )


def run_event(kind: str, run_id: str = RUN_ID) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "at": T0,
        "kind": kind,
        "caller": "caller-a",
        "tool": None,
        "call_key": None,
        "item_key": None,
        "detail": {"note": kind},
    }


async def write(
    run_engine: AsyncEngine, *transactions: Sequence[AuditEvent | dict[str, Any]]
) -> None:
    """Each sequence of events queued at once, hence in one transaction."""
    writer = GroupCommitWriter(create_session_factory(run_engine))
    writer.start()
    try:
        for events in transactions:
            for event in events:
                if isinstance(event, dict):
                    writer.emit_row(event)
                else:
                    writer.emit(event)
            await writer.flush()
    finally:
        await writer.aclose()


async def stored_rows(run_engine: AsyncEngine) -> int:
    async with create_session_factory(run_engine)() as session:
        return int(await session.scalar(select(func.count()).select_from(AuditRow)) or 0)


async def read(run_engine: AsyncEngine, run_id: str = RUN_ID) -> list[StoredAuditEvent]:
    async with create_session_factory(run_engine)() as session:
        return await AuditRepository(session).list_for_run(run_id)


def views(events: Sequence[StoredAuditEvent]) -> list[dict[str, Any]]:
    """What the API shows of each event, but its id."""
    return [{k: v for k, v in audit_view(event).items() if k != "id"} for event in events]


def labels(events: Sequence[StoredAuditEvent]) -> list[str]:
    return [
        f"{event.kind.removeprefix('call.')} {event.detail.get('receipt_id')}" for event in events
    ]


async def test_a_run_s_events_of_one_transaction_are_one_row_read_back_as_exactly_them(
    run_engine: AsyncEngine,
) -> None:
    # Another zone than UTC, and whole seconds (no microseconds in the ISO text).
    events: list[AuditEvent | dict[str, Any]] = [
        run_event("plan.accepted"),
        started(1, at=datetime(2026, 11, 30, 14, 0, 0, tzinfo=timezone(timedelta(hours=2)))),
        finished(1, at=datetime(2026, 11, 30, 14, 0, 1, tzinfo=timezone(timedelta(hours=2)))),
        started(2),
        retried(2),
        finished(2),
        started(3),
        finished(3),
    ]
    await write(run_engine, events)
    # The same events one to a row, as an earlier version stored them (another run).
    async with create_session_factory(run_engine).begin() as session:
        await AuditRepository(session).add_many(
            [
                {**(event if isinstance(event, dict) else audit_row(event)), "run_id": "reference"}
                for event in events
            ]
        )

    assert await stored_rows(run_engine) == 1 + len(events)
    shared, reference = await read(run_engine), await read(run_engine, "reference")
    assert views(shared) == [{**view, "run_id": RUN_ID} for view in views(reference)]
    row_id = shared[0].id // EVENTS_PER_ROW
    assert [event.id for event in shared] == [
        row_id * EVENTS_PER_ROW + place for place in range(len(events))
    ]
    assert [event.id // EVENTS_PER_ROW for event in reference] == list(
        range(row_id + 1, row_id + 1 + len(events))
    )


async def test_a_long_call_whose_start_committed_first_keeps_its_two_rows(
    run_engine: AsyncEngine,
) -> None:
    await write(run_engine, [started(1)], [finished(1)])

    assert await stored_rows(run_engine) == 2
    events = await read(run_engine)
    assert labels(events) == ["started r1", "finished r1"]
    assert views(events) == [
        {**audit_row(event), "at": event.at.isoformat()} for event in (started(1), finished(1))
    ]
    assert events[1].id - events[0].id == EVENTS_PER_ROW  # two rows


async def test_a_call_that_finishes_the_turn_after_it_started_is_one_row(
    run_engine: AsyncEngine,
) -> None:
    # A lone run: no linger. The writer, woken by the start, gives the loop one
    # turn before it takes the transaction, and a quick call's end falls in it.
    writer = GroupCommitWriter(create_session_factory(run_engine))
    writer.start()
    try:
        writer.emit(started(1))
        await asyncio.sleep(0)
        writer.emit(finished(1))
        await writer.flush()
    finally:
        await writer.aclose()

    assert await stored_rows(run_engine) == 1
    assert labels(await read(run_engine)) == ["started r1", "finished r1"]


async def test_parallel_calls_and_other_runs_are_read_in_the_order_written(
    run_engine: AsyncEngine,
) -> None:
    await write(
        run_engine,
        [
            started(1),
            started(2),
            started(1, run_id="another-run"),
            started(3),
            finished(2),
            run_event("plan.accepted", run_id="a-third-run"),
            finished(1),
            finished(1, run_id="another-run"),
            finished(3),
        ],
    )

    # One row for each run.
    assert await stored_rows(run_engine) == 3
    events = await read(run_engine)
    assert labels(events) == [
        "started r1",
        "started r2",
        "started r3",
        "finished r2",
        "finished r1",
        "finished r3",
    ]
    assert labels(await read(run_engine, "another-run")) == ["started r1", "finished r1"]
    ids = [event.id for event in events]
    assert ids == sorted(set(ids))


async def test_events_of_another_caller_in_a_run_are_rows_of_their_own(
    run_engine: AsyncEngine,
) -> None:
    odd = finished(1)._replace(caller="someone-else")
    await write(run_engine, [started(1), odd, started(2), finished(2)])

    assert await stored_rows(run_engine) == 3
    events = await read(run_engine)
    assert [event.caller for event in events] == [
        "caller-a",
        "someone-else",
        "caller-a",
        "caller-a",
    ]
    assert labels(events) == ["started r1", "finished r1", "started r2", "finished r2"]


async def test_a_run_s_events_beyond_a_full_row_go_on_in_the_next(run_engine: AsyncEngine) -> None:
    events = [event for n in range(EVENTS_PER_ROW // 2 + 1) for event in (started(n), finished(n))]
    await write(run_engine, events)

    assert await stored_rows(run_engine) == 2
    stored = await read(run_engine)
    assert labels(stored) == [
        f"{event.kind.value.removeprefix('call.')} {event.detail['receipt_id']}" for event in events
    ]
    assert [event.id % EVENTS_PER_ROW for event in stored[EVENTS_PER_ROW - 1 :]] == [
        EVENTS_PER_ROW - 1,
        0,
        1,
    ]


async def test_every_page_size_reads_every_event_once_across_shared_rows(
    run_engine: AsyncEngine,
) -> None:
    await write(
        run_engine,
        [run_event("plan.accepted"), started(1), started(2), started(3), finished(2)],
        [finished(1), started(4), retried(4), finished(4), started(5), finished(5)],
        [finished(3)],
        [run_event("plan.finished"), started(6), started(7)],
        [finished(7), finished(6)],
    )
    everything = await read(run_engine)
    assert labels(everything) == [
        "plan.accepted None",
        "started r1",
        "started r2",
        "started r3",
        "finished r2",
        "finished r1",
        "started r4",
        "retried r4",
        "finished r4",
        "started r5",
        "finished r5",
        "finished r3",
        "plan.finished None",
        "started r6",
        "started r7",
        "finished r7",
        "finished r6",
    ]
    ids = [event.id for event in everything]
    assert ids == sorted(set(ids))
    assert await stored_rows(run_engine) == 5

    async with create_session_factory(run_engine)() as session:
        audit = AuditRepository(session)
        for limit in range(1, len(everything) + 2):
            pages: list[StoredAuditEvent] = []
            after: int | None = None
            while True:
                page = await audit.list_for_run(RUN_ID, after_id=after, limit=limit)
                assert len(page) <= limit
                pages.extend(page)
                if len(page) < limit:
                    break
                after = page[-1].id
            assert pages == everything, limit
        # A cursor between two events (an id no event has) starts after it too.
        positions = {-1, ids[-1] + 1} | {n + d for n in ids for d in (-1, 0, 1)}
        for after in sorted(positions):
            assert await audit.list_for_run(RUN_ID, after_id=after) == [
                event for event in everything if event.id > after
            ]


async def test_a_page_reads_no_row_past_the_events_it_shows(
    run_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    full_row = [started(n) for n in range(EVENTS_PER_ROW)]
    await write(run_engine, full_row, full_row, full_row)
    expanded: list[int] = []

    def counting_expand(id_: int, *columns: Any) -> list[StoredAuditEvent]:
        expanded.append(id_)
        return expand(id_, *columns)

    monkeypatch.setattr(audit_repository, "expand", counting_expand)
    async with create_session_factory(run_engine)() as session:
        audit = AuditRepository(session)
        page = await audit.list_for_run(RUN_ID, limit=1)
        assert (len(page), len(expanded)) == (1, 1)
        # From the middle of the first row, across into the second.
        expanded.clear()
        page = await audit.list_for_run(RUN_ID, after_id=page[0].id, limit=EVENTS_PER_ROW)
        assert (len(page), len(expanded)) == (EVENTS_PER_ROW, 2)
        expanded.clear()
        assert len(await audit.list_for_run(RUN_ID)) == 3 * EVENTS_PER_ROW
        assert len(expanded) == 3
