"""Deciding a paused plan's calls: an approval continues the run in the background,
a rejection gives a `denied` receipt and skips the rest of its sequence or lane."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from app.store.repositories.router_runs import RouterRunRepository
from tests.api.confirm import tools
from tests.api.confirm.support import (
    decide,
    launch,
    parallel,
    sequential,
    step,
    stored_confirmations,
)
from tests.support.app import settled, stored_audit

# Every run these tests make leaves its hash chain intact (`tests.support.chain_check`).
pytestmark = pytest.mark.usefixtures("chains_intact")

SECRET = "sk-abcdefghijklmnopqrstuvwxyz"


async def test_an_approval_runs_the_call_and_the_rest_of_the_plan(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    body = (
        await client.post(
            "/plans/sequential",
            json=sequential(step("a"), launch("b", secret=SECRET), step("c")),
        )
    ).json()
    run_id = body["plan_id"]

    decision = await decide(client, run_id, body["pending"][0]["confirmation_id"], True, "ok")
    await settled(app, run_id)

    assert decision.status_code == 202
    assert decision.json() == {
        "run_id": run_id,
        "confirmation_id": body["pending"][0]["confirmation_id"],
        "decision": "approved",
        "run_status": "running",
    }
    assert tools.calls == {"a": 1, "b": 1, "c": 1}
    run = (await client.get(f"/runs/{run_id}")).json()
    assert run["status"] == "succeeded"
    receipts = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
    assert [(r["call_key"], r["status"]) for r in receipts] == [
        ("a", "succeeded"),
        ("b", "succeeded"),
        ("c", "succeeded"),
    ]
    assert receipts[0]["receipt_id"] == body["receipts"][0]["receipt_id"]
    (kept,) = await stored_confirmations(app, run_id)
    assert (kept.status, kept.args, kept.decided_by) == ("approved", None, None)
    kinds = [event.kind for event in await stored_audit(app, run_id)]
    assert "confirmation.requested" in kinds
    assert "confirmation.decided" in kinds

    again = await decide(client, run_id, kept.id, True)
    assert again.status_code == 409


async def test_a_rejection_denies_the_call_and_skips_the_rest_of_the_sequence(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    body = (
        await client.post("/plans/sequential", json=sequential(step("a"), launch("b"), step("c")))
    ).json()
    run_id = body["plan_id"]

    decision = await decide(client, run_id, body["pending"][0]["confirmation_id"], False, "no")
    await settled(app, run_id)

    assert decision.status_code == 202
    assert decision.json()["decision"] == "rejected"
    assert tools.calls == {"a": 1}
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "failed"
    receipts = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
    assert [(r["call_key"], r["status"]) for r in receipts] == [
        ("a", "succeeded"),
        ("b", "denied"),
        ("c", "skipped"),
    ]
    assert receipts[1]["error"]["kind"] == "confirmation"
    assert "no" in receipts[1]["error"]["message"]


async def test_a_parallel_plan_goes_on_only_after_its_last_decision(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    body = (
        await client.post(
            "/plans/parallel",
            json=parallel(
                ("x", [step("x1"), launch("x2"), step("x3")]),
                ("y", [step("y1")]),
                ("z", [launch("z1"), step("z2")]),
            ),
        )
    ).json()
    run_id = body["plan_id"]
    x2, z1 = (p["confirmation_id"] for p in body["pending"])

    first = await decide(client, run_id, x2, True)
    await settled(app, run_id)
    assert first.json()["run_status"] == "pending"
    assert tools.calls == {"x1": 1, "y1": 1}
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "pending"

    last = await decide(client, run_id, z1, False, "not this one")
    await settled(app, run_id)

    assert last.json()["run_status"] == "running"
    assert tools.calls == {"x1": 1, "x2": 1, "x3": 1, "y1": 1}
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "failed"
    receipts = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
    assert [(r["item_key"], r["call_key"], r["status"]) for r in receipts] == [
        ("x", "x1", "succeeded"),
        ("x", "x2", "succeeded"),
        ("x", "x3", "succeeded"),
        ("y", "y1", "succeeded"),
        ("z", "z1", "denied"),
        ("z", "z2", "skipped"),
    ]


async def test_an_unknown_run_or_confirmation_is_404(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = served
    body = (await client.post("/plans/sequential", json=sequential(launch("b")))).json()

    unknown_run = await decide(client, "nope", body["pending"][0]["confirmation_id"], True)
    unknown_confirmation = await decide(client, body["plan_id"], "nope", True)

    assert unknown_run.status_code == 404
    assert unknown_confirmation.status_code == 404
    assert unknown_run.headers["content-type"] == "application/problem+json"


async def test_a_waiting_plan_can_be_cancelled_and_then_not_decided(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    body = (await client.post("/plans/sequential", json=sequential(step("a"), launch("b")))).json()
    run_id = body["plan_id"]

    cancelled = await client.post(f"/runs/{run_id}/cancel")
    late = await decide(client, run_id, body["pending"][0]["confirmation_id"], True)

    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "cancelled"
    (kept,) = await stored_confirmations(app, run_id)
    assert (kept.status, kept.args) == ("refused", None)
    assert late.status_code == 409
    assert tools.calls == {"a": 1}


async def test_a_continued_plan_pauses_again_at_its_next_waiting_call(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    body = (
        await client.post(
            "/plans/sequential", json=sequential(launch("a"), step("b"), launch("c"), step("d"))
        )
    ).json()
    run_id = body["plan_id"]

    await decide(client, run_id, body["pending"][0]["confirmation_id"], True)
    await settled(app, run_id)
    paused_again = (await client.get("/confirmations", params={"status": "pending"})).json()
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "pending"
    assert tools.calls == {"a": 1, "b": 1}
    (second,) = paused_again["items"]
    assert second["call_key"] == "c"

    await decide(client, run_id, second["confirmation_id"], True)
    await settled(app, run_id)

    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "succeeded"
    assert tools.calls == {"a": 1, "b": 1, "c": 1, "d": 1}
    receipts = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
    assert [(r["call_key"], r["status"]) for r in receipts] == [
        ("a", "succeeded"),
        ("b", "succeeded"),
        ("c", "succeeded"),
        ("d", "succeeded"),
    ]


async def test_a_plan_of_reads_waits_too_with_its_start_recorded(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    body = (
        await client.post(
            "/plans/sequential",
            json=sequential(step("a"), {"call_key": "p", "tool": "peek", "args": {"label": "p"}}),
        )
    ).json()
    run_id = body["plan_id"]

    assert body["status"] == "pending"
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "pending"
    await decide(client, run_id, body["pending"][0]["confirmation_id"], True)
    await settled(app, run_id)

    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "succeeded"
    assert tools.calls == {"a": 1, "p": 1}


async def test_a_paused_plan_keeps_only_the_active_time_its_deadline_has_left(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    nap = {"call_key": "a", "tool": "nap", "args": {"label": "a", "seconds": 0.2}}
    plan = {**sequential(nap, launch("b"), step("c")), "deadline_s": 30}
    body = (await client.post("/plans/sequential", json=plan)).json()
    run_id = body["plan_id"]
    assert body["status"] == "pending"

    async with app.state.runtime.sessions() as session:
        checkpoint = await RouterRunRepository(session).checkpoint(run_id)
    assert checkpoint is not None
    # The nap ran under the deadline: the continuation gets what was left of it, not
    # 30 s afresh; the time spent waiting for the decision does not count.
    assert 0 < checkpoint["deadline_s"] <= 30 - 0.2

    await decide(client, run_id, body["pending"][0]["confirmation_id"], True)
    await settled(app, run_id)
    assert (await client.get(f"/runs/{run_id}")).json()["status"] == "succeeded"
    assert tools.calls == {"a": 1, "b": 1, "c": 1}
