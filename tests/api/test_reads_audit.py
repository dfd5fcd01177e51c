from __future__ import annotations

from datetime import timedelta

import httpx
from fastapi import FastAPI

from app.api.schemas.runs import AuditEventOut
from app.store.repositories.audit import AuditRepository
from tests.api.test_reads_seed import T0, page_through, seed_run


async def test_a_plan_run_s_audit_events_in_write_order(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = {
        "owner": "text-worker",
        "calls": [{"call_key": "1", "tool": "word_count", "args": {"text": "a b"}}],
    }
    run_id = (await client.post("/plans/sequential", json=plan)).json()["plan_id"]
    await client.post("/plans/sequential", json=plan)
    await app.state.runtime.writer.flush()

    events = await page_through(client, f"/runs/{run_id}/audit", limit=500)

    assert events[0]["kind"] == "plan.accepted"
    assert {"call.started", "call.finished"} <= {event["kind"] for event in events}
    assert {event["run_id"] for event in events} == {run_id}
    ids = [event["id"] for event in events]
    assert ids == sorted(ids)
    for event in events:
        AuditEventOut.model_validate(event)
        assert event["at"].endswith("+00:00")


async def test_audit_pages_by_id_each_event_exactly_once(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await seed_run(app, "audited")
    await seed_run(app, "other")
    rows = [
        {
            "run_id": "audited" if number % 3 else "other",
            # Write order, not time, decides the order.
            "at": T0 - timedelta(seconds=number),
            "kind": "call.finished",
            "caller": None,
            "tool": "word_count",
            "call_key": str(number),
            "item_key": None,
            "detail": {"number": number},
        }
        for number in range(30)
    ]
    async with app.state.runtime.sessions.begin() as session:
        await AuditRepository(session).add_many(rows)

    expected = [number for number in range(30) if number % 3]
    for limit in (1, 4, 20, 1000):
        events = await page_through(client, "/runs/audited/audit", limit=limit)
        assert [event["detail"]["number"] for event in events] == expected

    exact = (await client.get("/runs/audited/audit", params={"limit": 20})).json()
    assert exact["next_cursor"] is None
    short = (await client.get("/runs/audited/audit", params={"limit": 19})).json()
    assert short["next_cursor"] is not None
    default = (await client.get("/runs/audited/audit")).json()
    assert (len(default["items"]), default["next_cursor"]) == (20, None)
