"""Confirmations are counted by event: requested, then approved, rejected or expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.api.confirm.support import (
    confirm_settings,
    decide,
    launch,
    sequential,
)
from tests.observability.metrics_reading import value
from tests.support.app import running, settled


async def test_confirmations_are_counted_by_event(tmp_path: Path, sqlite_url: str) -> None:
    before = {
        event: value("toolloop_confirmations_total", event=event)
        for event in ("requested", "approved", "rejected", "expired")
    }
    async with running(confirm_settings(tmp_path, sqlite_url)) as (app, client):
        runs = [
            (await client.post("/plans/sequential", json=sequential(launch(key)))).json()
            for key in ("a", "b", "c")
        ]
        for body, approve in zip(runs[:2], (True, False), strict=True):
            await decide(client, body["plan_id"], body["pending"][0]["confirmation_id"], approve)
            await settled(app, body["plan_id"])
        await app.state.runtime.confirmations.expire(datetime.now(UTC) + timedelta(days=2))
        await settled(app, runs[2]["plan_id"])

    after = {
        event: value("toolloop_confirmations_total", event=event) - count
        for event, count in before.items()
    }
    assert after == {"requested": 3, "approved": 1, "rejected": 1, "expired": 1}
