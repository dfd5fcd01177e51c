"""`GET /confirmations` and who may decide: the `confirmations:decide` scope."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from app.api.auth import create_key
from tests.api.confirm.support import (
    confirm_settings,
    decide,
    launch,
    sequential,
    step,
)
from tests.support.app import running

SECRET = "sk-abcdefghijklmnopqrstuvwxyz"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def start(client: httpx.AsyncClient, key: str, *calls: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/plans/sequential", json=sequential(*calls), headers=bearer(key))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_the_listing_shows_waiting_calls_redacted_filtered_and_paged(
    tmp_path: Path, database_url: str
) -> None:
    async with running(confirm_settings(tmp_path, database_url)) as (_, client):
        first = (
            await client.post(
                "/plans/sequential", json=sequential(step("a"), launch("b", secret=SECRET))
            )
        ).json()
        second = (await client.post("/plans/sequential", json=sequential(launch("c")))).json()
        await decide(client, second["plan_id"], second["pending"][0]["confirmation_id"], False)

        pending = (await client.get("/confirmations", params={"status": "pending"})).json()
        rejected = (await client.get("/confirmations", params={"status": "rejected"})).json()
        page_one = (await client.get("/confirmations", params={"limit": 1})).json()
        page_two = (
            await client.get(
                "/confirmations", params={"limit": 1, "cursor": page_one["next_cursor"]}
            )
        ).json()
        bad_status = await client.get("/confirmations", params={"status": "maybe"})

    (item,) = pending["items"]
    assert pending["next_cursor"] is None
    assert item["confirmation_id"] == first["pending"][0]["confirmation_id"]
    assert (item["run_id"], item["kind"], item["call_key"], item["item_key"], item["tool"]) == (
        first["plan_id"],
        "sequential",
        "b",
        None,
        "launch",
    )
    assert item["args_digest"] == first["pending"][0]["args_digest"]
    assert item["args"] == {"label": "b", "secret": "[REDACTED]"}
    assert item["status"] == "pending"
    assert item["requested_at"]
    assert [i["call_key"] for i in rejected["items"]] == ["c"]
    assert rejected["items"][0]["args"] is None  # dropped once decided
    assert [i["call_key"] for i in page_one["items"] + page_two["items"]] == ["c", "b"]
    assert page_two["next_cursor"] is None
    assert bad_status.status_code == 422


async def test_readers_see_their_own_runs_and_deciders_see_every_run(
    tmp_path: Path, sqlite_url: str
) -> None:
    keys = tmp_path / "keys.yml"
    alice = create_key(keys, "alice", ["plans:execute", "runs:read"])
    bob = create_key(keys, "bob", ["plans:execute", "runs:read"])
    decider = create_key(keys, "decider", ["confirmations:decide"])
    operator = create_key(keys, "operator", ["runs:read:all"])
    settings = confirm_settings(tmp_path, sqlite_url, api_keys=keys)

    async with running(settings) as (_, client):
        alices = await start(client, alice, launch("a1"))
        await start(client, bob, launch("b1"))

        def listed(key: str) -> Any:
            return client.get("/confirmations", headers=bearer(key))

        by_alice = (await listed(alice)).json()["items"]
        by_decider = (await listed(decider)).json()["items"]
        by_operator = (await listed(operator)).json()["items"]
        path = f"/runs/{alices['plan_id']}/confirmations/{alices['pending'][0]['confirmation_id']}"
        alice_decides = await client.post(path, json={"approve": True}, headers=bearer(alice))
        operator_decides = await client.post(path, json={"approve": True}, headers=bearer(operator))
        decided = await client.post(path, json={"approve": False}, headers=bearer(decider))
        audit = (
            await client.get(f"/runs/{alices['plan_id']}/audit", headers=bearer(operator))
        ).json()["items"]

    assert [i["call_key"] for i in by_alice] == ["a1"]
    assert sorted(i["call_key"] for i in by_decider) == ["a1", "b1"]
    assert sorted(i["call_key"] for i in by_operator) == ["a1", "b1"]
    assert alice_decides.status_code == 403  # her own run: deciding is another scope
    assert operator_decides.status_code == 403
    assert decided.status_code == 202
    (event,) = [e for e in audit if e["kind"] == "confirmation.decided"]
    assert event["caller"] == "decider"
    assert event["detail"]["decided_by"] == "decider"
    assert event["detail"]["decision"] == "rejected"
