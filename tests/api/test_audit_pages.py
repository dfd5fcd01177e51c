"""`GET /runs/{id}/audit` over a run's events that share rows."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI

from app.engine.ports import AuditEvent, AuditKind
from tests.api.test_reads_seed import page_through


def _call_event(kind: AuditKind, run_id: str, at: datetime) -> AuditEvent:
    detail = {"receipt_id": "long", "seq": 99, "parent_receipt_id": None}
    if kind is AuditKind.CALL_FINISHED:
        detail |= {"status": "succeeded", "attempts": 1, "duration_ms": 1.0, "error": None}
    return AuditEvent(kind, at, run_id, None, "word_count", "long", "z", detail)


async def test_every_page_size_pages_a_parallel_run_s_events_once_each(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = {
        "owner": "text-worker",
        "max_concurrency": 3,
        "lanes": [
            {
                "item_key": key,
                # Arguments of its own in each lane: no lane's call is another's cache hit.
                "calls": [
                    {"call_key": "1", "tool": "word_count", "args": {"text": f"a b {key}"}},
                    {"call_key": "2", "tool": "word_count", "args": {"text": f"c {key}"}},
                ],
            }
            for key in "abc"
        ],
    }
    response = await client.post("/plans/parallel", json=plan)
    assert response.status_code == 200, response.text
    run_id = response.json()["plan_id"]
    writer = app.state.runtime.writer
    # A long call of the same run: its start committed before its finish (two rows).
    now = datetime.now(UTC)
    writer.emit(_call_event(AuditKind.CALL_STARTED, run_id, now))
    await writer.flush()
    writer.emit(_call_event(AuditKind.CALL_FINISHED, run_id, now + timedelta(seconds=1)))
    await writer.flush()

    everything = await page_through(client, f"/runs/{run_id}/audit", limit=1000)

    ids = [event["id"] for event in everything]
    assert ids == sorted(set(ids))
    calls = [event for event in everything if event["kind"].startswith("call.")]
    assert len(calls) == 2 * 7
    assert {event["kind"] for event in everything} <= {
        "plan.accepted",
        "call.started",
        "call.finished",
    }
    # Each call's started comes before its finished.
    for receipt_id in {event["detail"]["receipt_id"] for event in calls}:
        own = [event["kind"] for event in calls if event["detail"]["receipt_id"] == receipt_id]
        assert own == ["call.started", "call.finished"]
    # Shared rows: events whose ids are one apart.
    assert any(b == a + 1 for a, b in itertools.pairwise(ids))
    for limit in range(1, len(everything) + 1):
        assert await page_through(client, f"/runs/{run_id}/audit", limit=limit) == everything
