from __future__ import annotations

from datetime import timedelta

import httpx
from fastapi import FastAPI

from app.api.pagination import MAX_AUDIT_ID, position_cursor
from app.api.runs import AUDIT_LISTING, EARLIER_AUDIT_LISTING
from app.api.schemas.runs import AuditEventOut
from app.store.repositories.audit import CALL_PAIR_KIND, EVENTS_PER_ROW, AuditRepository
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


async def test_a_cursor_an_earlier_version_issued_pages_on_from_the_same_event(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await seed_run(app, "audited")
    started = {"receipt_id": "r1", "seq": 0, "parent_receipt_id": None}
    finished = {**started, "status": "succeeded", "attempts": 1, "duration_ms": 1.0, "error": None}
    row = {"run_id": "audited", "at": T0, "caller": None, "tool": "word_count", "item_key": None}
    rows = [
        {**row, "kind": "plan.accepted", "call_key": None, "detail": {}},
        # A call's two events in one row, as that version wrote them.
        {
            **row,
            "kind": CALL_PAIR_KIND,
            "call_key": "1",
            "detail": {"started": started, "finished": finished, "finished_at_us": 1},
        },
        {**row, "kind": "plan.finished", "call_key": None, "detail": {}},
    ]
    async with app.state.runtime.sessions.begin() as session:
        await AuditRepository(session).add_many(rows)
    everything = await page_through(client, "/runs/audited/audit", limit=10)
    kinds = [event["kind"] for event in everything]
    assert kinds == ["plan.accepted", "call.started", "call.finished", "plan.finished"]
    first_row = everything[0]["id"] // EVENTS_PER_ROW

    # That version's ids: the row's id times two, plus one for a row's second event.
    for place, earlier_id in enumerate(
        [first_row * 2, (first_row + 1) * 2, (first_row + 1) * 2 + 1, (first_row + 2) * 2]
    ):
        cursor = position_cursor(EARLIER_AUDIT_LISTING, earlier_id)
        page = await client.get("/runs/audited/audit", params={"cursor": cursor})
        assert page.status_code == 200, page.text
        assert page.json()["items"] == everything[place + 1 :]
    # This version's cursors are of another listing, which an earlier version refuses.
    page = (await client.get("/runs/audited/audit", params={"limit": 1})).json()
    assert page["next_cursor"] == position_cursor(AUDIT_LISTING, everything[0]["id"])
    # The largest id that version could name pages to the end, not to an error.
    cursor = position_cursor(EARLIER_AUDIT_LISTING, MAX_AUDIT_ID)
    answer = await client.get("/runs/audited/audit", params={"cursor": cursor})
    assert (answer.status_code, answer.json()["items"]) == (200, [])
