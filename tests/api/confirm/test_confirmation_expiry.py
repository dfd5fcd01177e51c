"""Confirmations nobody decides expire after `TOOLLOOP_CONFIRMATION_TTL_S`, as rejections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.api.confirm import tools
from tests.api.confirm.support import (
    confirm_settings,
    launch,
    sequential,
    step,
    stored_confirmations,
)
from tests.support.app import running, settled, stored_audit, stored_run
from tests.support.waiting import wait_for


async def test_an_expired_confirmation_is_a_rejection_and_is_audited(
    tmp_path: Path, database_url: str
) -> None:
    settings = confirm_settings(
        tmp_path, database_url, confirmation_ttl_s=60.0, confirmation_expiry_interval_s=3600.0
    )
    async with running(settings) as (app, client):
        body = (
            await client.post("/plans/sequential", json=sequential(launch("b"), step("c")))
        ).json()
        run_id = body["plan_id"]
        expiry = app.state.runtime.confirmations

        not_yet = await expiry.expire(datetime.now(UTC))
        later = await expiry.expire(datetime.now(UTC) + timedelta(seconds=61))
        await settled(app, run_id)
        run = await stored_run(app, run_id)
        receipts = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
        (kept,) = await stored_confirmations(app, run_id)
        expired = [e for e in await stored_audit(app, run_id) if e.kind == "confirmation.expired"]
        listed = (await client.get("/confirmations", params={"status": "expired"})).json()

    assert (not_yet, later) == (0, 1)
    assert run.status == "failed"
    assert [(r["call_key"], r["status"]) for r in receipts] == [("b", "denied"), ("c", "skipped")]
    assert receipts[0]["error"]["kind"] == "confirmation"
    assert (kept.status, kept.args) == ("expired", None)
    (event,) = expired
    assert event.detail["decision"] == "expired"
    assert [i["confirmation_id"] for i in listed["items"]] == [kept.id]
    assert tools.calls == {}


async def test_the_periodic_sweep_expires_what_waits_longer_than_the_ttl(
    tmp_path: Path, sqlite_url: str
) -> None:
    settings = confirm_settings(
        tmp_path, sqlite_url, confirmation_ttl_s=0.001, confirmation_expiry_interval_s=0.01
    )
    async with running(settings) as (_, client):
        body = (await client.post("/plans/sequential", json=sequential(launch("b")))).json()
        run_id = body["plan_id"]

        async def ended() -> str | None:
            status = (await client.get(f"/runs/{run_id}")).json()["status"]
            return None if status in ("pending", "running") else str(status)

        status = await wait_for(ended, "the sweep ended the run")

    assert body["status"] == "pending"
    assert status == "failed"
