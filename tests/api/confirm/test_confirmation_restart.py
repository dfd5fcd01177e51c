"""A paused plan survives a restart; an approval then continues it in the new process."""

from __future__ import annotations

from pathlib import Path

from tests.api.confirm import tools
from tests.api.confirm.registry import REGISTRY
from tests.api.confirm.support import (
    confirm_settings,
    decide,
    launch,
    parallel,
    step,
    stored_confirmations,
)
from tests.support.app import running, settled, stored_run


async def test_an_approval_after_a_restart_finishes_the_run(
    tmp_path: Path, database_url: str
) -> None:
    settings = confirm_settings(tmp_path, database_url)
    async with running(settings) as (_, client):
        body = (
            await client.post(
                "/plans/parallel",
                json=parallel(("x", [step("x1"), launch("x2"), step("x3")]), ("y", [step("y1")])),
            )
        ).json()
    assert body["status"] == "pending"
    run_id = body["plan_id"]

    async with running(settings) as (app, client):
        waiting = (await stored_run(app, run_id)).status
        decision = await decide(client, run_id, body["pending"][0]["confirmation_id"], True)
        await settled(app, run_id)
        run = (await client.get(f"/runs/{run_id}")).json()
        receipts = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]

    assert waiting == "pending"  # the startup sweep leaves a waiting run alone
    assert decision.status_code == 202
    assert run["status"] == "succeeded"
    assert [(r["call_key"], r["status"]) for r in receipts] == [
        ("x1", "succeeded"),
        ("x2", "succeeded"),
        ("x3", "succeeded"),
        ("y1", "succeeded"),
    ]
    assert tools.calls == {"x1": 1, "x2": 1, "x3": 1, "y1": 1}


async def test_an_approval_under_a_changed_contract_is_refused_and_ends_the_plan(
    tmp_path: Path, database_url: str
) -> None:
    settings = confirm_settings(tmp_path, database_url)
    async with running(settings) as (_, client):
        body = (
            await client.post("/plans/parallel", json=parallel(("x", [step("x1"), launch("x2")])))
        ).json()
    run_id = body["plan_id"]
    changed = tmp_path / "changed.yml"
    changed.write_text(REGISTRY.replace("Count a call by label.", "Count a call, by label."))

    async with running(settings.model_copy(update={"registries": [changed]})) as (app, client):
        response = await decide(client, run_id, body["pending"][0]["confirmation_id"], True)
        run = await stored_run(app, run_id)
        (kept,) = await stored_confirmations(app, run_id)

    assert response.status_code == 409
    assert response.json()["type"] == "urn:toolloop:problem:contract-changed"
    assert (run.status, kept.status, kept.args) == ("failed", "refused", None)
    assert tools.calls == {"x1": 1}
