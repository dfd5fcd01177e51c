"""Rejected plans leave an audit trace on SQLite and PostgreSQL: no request string
raw, and a bounded number of rows per caller."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from app.service.rejection_audit import FULL_ROWS_PER_WINDOW
from app.settings import Settings
from app.store.repositories.audit import AuditRepository, StoredAuditEvent
from tests.hostile.unstorable_registry import REGISTRY
from tests.support.app import AppFactory

HOSTILE = "\x1b[2J<script>" + "x" * 300


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


async def _rejection_rows(app: FastAPI) -> list[StoredAuditEvent]:
    runtime = app.state.runtime
    await runtime.writer.flush()
    async with runtime.sessions() as session:
        events = await AuditRepository(session).list_for_run(None)
    return [event for event in events if event.kind.startswith("plan.rejected")]


def _hostile_plan() -> dict[str, Any]:
    return {
        "owner": HOSTILE,
        "calls": [{"call_key": HOSTILE, "tool": HOSTILE, "args": {HOSTILE: HOSTILE}}],
    }


async def test_a_rejected_plan_is_audited_without_its_strings(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    response = await client.post("/plans/sequential", json=_hostile_plan())
    assert response.status_code == 422

    (row,) = await _rejection_rows(app)

    assert row.kind == "plan.rejected"
    detail = row.detail
    assert detail["plan_kind"] == "sequential"
    assert detail["owner_chars"] == len(HOSTILE)
    assert "owner" not in detail
    assert detail["problem_count"] == len(response.json()["errors"])
    stored = orjson.dumps(detail).decode()
    assert "\x1b" not in stored
    assert "x" * 200 not in stored
    assert all("message" not in problem for problem in detail["problems"])


async def test_a_caller_s_rejections_are_counted_past_the_first_rows(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    for _ in range(FULL_ROWS_PER_WINDOW + 5):
        response = await client.post("/plans/sequential", json=_hostile_plan())
        assert response.status_code == 422

    assert len(await _rejection_rows(app)) == FULL_ROWS_PER_WINDOW
    app.state.runtime.plans.close()
    rows = await _rejection_rows(app)

    assert [row.kind for row in rows] == [
        *["plan.rejected"] * FULL_ROWS_PER_WINDOW,
        "plan.rejected.suppressed",
    ]
    assert rows[-1].detail["suppressed"] == 5
