"""A call's `call.started` and `call.finished` written in one transaction share a row."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.engine.ports import AuditEvent, AuditKind
from app.service.reads import audit_view
from app.service.receipt_rows import audit_row
from app.service.writer import GroupCommitWriter
from app.store.database import create_session_factory
from app.store.models import AuditEvent as AuditRow
from app.store.repositories.audit import AuditRepository, StoredAuditEvent
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


async def write(engine: AsyncEngine, *transactions: Sequence[AuditEvent | dict[str, Any]]) -> None:
    """Each sequence of events queued at once, hence in one transaction."""
    writer = GroupCommitWriter(create_session_factory(engine))
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


async def stored_rows(engine: AsyncEngine) -> int:
    async with create_session_factory(engine)() as session:
        return int(await session.scalar(select(func.count()).select_from(AuditRow)) or 0)


async def read(engine: AsyncEngine, run_id: str = RUN_ID) -> list[StoredAuditEvent]:
    async with create_session_factory(engine)() as session:
        return await AuditRepository(session).list_for_run(run_id)


def views(events: Sequence[StoredAuditEvent]) -> list[dict[str, Any]]:
    """What the API shows of each event, but its id."""
    return [{k: v for k, v in audit_view(event).items() if k != "id"} for event in events]


def labels(events: Sequence[StoredAuditEvent]) -> list[str]:
    return [
        f"{event.kind.removeprefix('call.')} {event.detail.get('receipt_id')}" for event in events
    ]


async def test_a_short_call_is_one_row_read_back_as_exactly_its_two_events(
    engine: AsyncEngine,
) -> None:
    # Another zone than UTC, and whole seconds (no microseconds in the ISO text).
    events = [
        started(1, at=datetime(2026, 11, 30, 14, 0, 0, tzinfo=timezone(timedelta(hours=2)))),
        finished(1, at=datetime(2026, 11, 30, 14, 0, 1, tzinfo=timezone(timedelta(hours=2)))),
        started(2),
        finished(2),
    ]
    await write(engine, events)
    # The same events as two rows each, as they were stored before (another run).
    async with create_session_factory(engine).begin() as session:
        await AuditRepository(session).add_many(
            [{**audit_row(event), "run_id": "reference"} for event in events]
        )

    assert await stored_rows(engine) == 2 + 4
    merged, reference = await read(engine), await read(engine, "reference")
    assert views(merged) == [{**view, "run_id": RUN_ID} for view in views(reference)]
    assert [event.at for event in merged] == [event.at for event in events]
    first_row = merged[0].id // 2
    assert [event.id for event in merged] == [
        first_row * 2,
        first_row * 2 + 1,
        first_row * 2 + 2,
        first_row * 2 + 3,
    ]


async def test_a_long_call_whose_start_committed_first_keeps_its_two_rows(
    engine: AsyncEngine,
) -> None:
    await write(engine, [started(1)], [finished(1)])

    assert await stored_rows(engine) == 2
    events = await read(engine)
    assert labels(events) == ["started r1", "finished r1"]
    assert views(events) == [
        {**audit_row(event), "at": event.at.isoformat()} for event in (started(1), finished(1))
    ]
    assert events[1].id - events[0].id == 2  # two rows: the second half of neither


async def test_a_call_that_finishes_the_turn_after_it_started_is_one_row(
    engine: AsyncEngine,
) -> None:
    # A lone run: no linger. The writer, woken by the start, gives the loop one
    # turn before it takes the transaction, and a quick call's end falls in it.
    writer = GroupCommitWriter(create_session_factory(engine))
    writer.start()
    try:
        writer.emit(started(1))
        await asyncio.sleep(0)
        writer.emit(finished(1))
        await writer.flush()
    finally:
        await writer.aclose()

    assert await stored_rows(engine) == 1
    assert labels(await read(engine)) == ["started r1", "finished r1"]


async def test_parallel_calls_read_each_start_just_before_its_finish(engine: AsyncEngine) -> None:
    await write(
        engine,
        [started(1), started(2), started(3), finished(2), finished(1), finished(3)],
    )

    assert await stored_rows(engine) == 3
    events = await read(engine)
    assert labels(events) == [
        "started r2",
        "finished r2",
        "started r1",
        "finished r1",
        "started r3",
        "finished r3",
    ]
    ids = [event.id for event in events]
    assert ids == sorted(set(ids))


async def test_a_call_with_another_event_of_its_run_in_between_keeps_its_two_rows(
    engine: AsyncEngine,
) -> None:
    await write(
        engine,
        [
            started(1),
            retried(1),
            finished(1),
            started(2),
            started(3),
            run_event("router.model_turn"),
            finished(2),
            finished(3),
            started(4),
            run_event("plan.accepted", run_id="another-run"),
            started(5, run_id="another-run"),
            finished(4),
            started(6),
            retried(8),
            finished(6),
        ],
    )

    # r1, r2, r3: two rows each, r1's retry and the run event; r4 and r6 share
    # one each (another call's retry is not r6's); the other run's rows are its own.
    assert await stored_rows(engine) == 6 + 1 + 1 + 1 + 2 + 1 + 1
    assert labels(await read(engine)) == [
        "started r1",
        "retried r1",
        "finished r1",
        "started r2",
        "started r3",
        "router.model_turn None",
        "finished r2",
        "finished r3",
        "started r4",
        "finished r4",
        "retried r8",
        "started r6",
        "finished r6",
    ]


async def test_events_of_a_call_that_differ_in_its_identity_are_not_paired(
    engine: AsyncEngine,
) -> None:
    odd = finished(1)._replace(caller="someone-else")
    await write(engine, [started(1), odd])

    assert await stored_rows(engine) == 2
    assert [event.caller for event in await read(engine)] == ["caller-a", "someone-else"]


async def test_every_page_size_reads_every_event_once_across_merged_halves(
    engine: AsyncEngine,
) -> None:
    await write(
        engine,
        [run_event("plan.accepted"), started(1), started(2), started(3), finished(2)],
        [finished(1), started(4), retried(4), finished(4), started(5), finished(5)],
        [finished(3), run_event("plan.finished"), started(6), started(7)],
        [finished(7), finished(6)],
    )
    everything = await read(engine)
    assert labels(everything) == [
        "plan.accepted None",
        "started r1",
        "started r3",
        "started r2",
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
    # Pages that end between the halves of a row, and cursors that name either half.
    assert any(b == a + 1 for a, b in itertools.pairwise(ids))

    async with create_session_factory(engine)() as session:
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
        for after in range(-1, ids[-1] + 2):
            assert await audit.list_for_run(RUN_ID, after_id=after) == [
                event for event in everything if event.id > after
            ]
