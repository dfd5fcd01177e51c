from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.store.repositories import AuditRepository
from tests.store.factories import T0


async def test_events_come_back_in_write_order(session: AsyncSession) -> None:
    audit = AuditRepository(session)
    await audit.add_many(
        [
            {"run_id": "run-1", "at": T0, "kind": "run.started", "caller": "ops"},
            {"run_id": "run-2", "at": T0, "kind": "run.started", "detail": {}},
            {
                "run_id": "run-1",
                "at": T0 + timedelta(seconds=1),
                "kind": "call.finished",
                "tool": "transform",
                "call_key": "c1",
                "item_key": "a",
                "detail": {"status": "succeeded", "attempts": 1},
            },
            {"run_id": None, "at": T0, "kind": "service.started", "detail": {"pid": 1}},
        ]
    )
    await audit.add_many([{"run_id": "run-1", "at": T0, "kind": "run.finished", "detail": {}}])
    await session.commit()

    events = await audit.list_for_run("run-1")

    assert [event.kind for event in events] == ["run.started", "call.finished", "run.finished"]
    started, finished_call, _ = events
    assert (started.caller, started.detail) == ("ops", {})
    assert (finished_call.tool, finished_call.call_key, finished_call.item_key) == (
        "transform",
        "c1",
        "a",
    )
    assert finished_call.detail == {"status": "succeeded", "attempts": 1}
    assert finished_call.at == T0 + timedelta(seconds=1)
    after_first = await audit.list_for_run("run-1", after_id=started.id, limit=1)
    assert [event.kind for event in after_first] == ["call.finished"]
