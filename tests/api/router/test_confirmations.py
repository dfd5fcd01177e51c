"""requires_confirmation over HTTP: pending runs, decisions, resume after a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from app.store.models import RouterConfirmation
from app.store.repositories.router_runs import RouterRunRepository
from app.store.repositories.runs import RunRepository
from tests.router import router_tools
from tests.router.http_support import run_body
from tests.router.registry import REGISTRY, write_registry
from tests.support.app import running, settled, stored_audit, stored_receipts, stored_run
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text
from tests.support.waiting import wait_for

# Every run these tests make leaves its hash chain intact (`tests.support.chain_check`).
pytestmark = pytest.mark.usefixtures("chains_intact")

SECRET_TITLE = "launch sk-abcdefghijklmnopqrstuvwxyz"


async def start_pending(client: httpx.AsyncClient, model: FakeLLM) -> dict[str, Any]:
    model.script(openai_calls(("c1", "publish", {"title": SECRET_TITLE})))
    response = await client.post("/router/runs", json=run_body())
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["stopped_by"]) == ("pending", "confirmation")
    return body


async def decide(
    client: httpx.AsyncClient, body: dict[str, Any], approve: bool, reason: str = ""
) -> httpx.Response:
    confirmation = body["pending"][0]["confirmation_id"]
    return await client.post(
        f"/router/runs/{body['run_id']}/confirmations/{confirmation}",
        json={"approve": approve, "reason": reason},
    )


async def confirmations(app: FastAPI, run_id: str) -> list[RouterConfirmation]:
    async with app.state.runtime.sessions() as session:
        return await RouterRunRepository(session).confirmations(run_id)


async def test_a_pending_run_is_kept_with_only_its_arguments_in_the_clear(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)

    (pending,) = body["pending"]
    assert set(pending) == {
        "confirmation_id",
        "call_id",
        "call_key",
        "tool",
        "args_digest",
        "fingerprint",
        "contract_hash",
    }
    run = await stored_run(app, body["run_id"])
    assert (run.status, run.finished_at) == ("pending", None)
    assert run.outcome is not None
    assert run.outcome["pending"] == body["pending"]
    (kept,) = await confirmations(app, body["run_id"])
    assert kept.args == {"title": SECRET_TITLE}
    assert kept.status == "pending"
    async with app.state.runtime.sessions() as session:
        checkpoint = await RouterRunRepository(session).checkpoint(body["run_id"])
    assert checkpoint is not None
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in str(checkpoint)
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in str(run.outcome)
    events = await stored_audit(app, body["run_id"])
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in str([e.detail for e in events])
    assert "router.confirmation_requested" in [e.kind for e in events]
    assert router_tools.CALLS == []


async def test_an_approval_resumes_the_run_in_the_background(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)
    model.script(openai_text("published"), openai_text("It is published."))

    response = await decide(client, body, True, "ok")

    assert response.status_code == 202
    assert response.json() == {
        "run_id": body["run_id"],
        "confirmation_id": body["pending"][0]["confirmation_id"],
        "decision": "approved",
        "run_status": "running",
    }
    await settled(app, body["run_id"])
    run = await stored_run(app, body["run_id"])
    assert run.status == "done"
    assert run.outcome is not None
    assert run.outcome["text"] == "It is published."
    assert router_tools.CALLS == [("publish", {"title": SECRET_TITLE})]
    receipts = await stored_receipts(app, body["run_id"])
    assert [(r.tool, r.status) for r in receipts] == [("publish", "succeeded")]
    (kept,) = await confirmations(app, body["run_id"])
    assert (kept.status, kept.args, kept.reason) == ("approved", None, "ok")
    kinds = [e.kind for e in await stored_audit(app, body["run_id"])]
    assert "router.confirmation_decided" in kinds
    assert "router.run_resumed" in kinds


async def test_a_rejection_is_fed_back_and_the_run_goes_on(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)
    model.script(openai_text("not published"), openai_text("Nothing was published."))

    response = await decide(client, body, False, "not today")

    assert response.status_code == 202
    await settled(app, body["run_id"])
    run = await stored_run(app, body["run_id"])
    assert run.status == "done"
    assert router_tools.CALLS == []
    tool_messages = [m for m in model.body(1)["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "denied: confirmation rejected: not today",
        }
    ]
    receipts = await stored_receipts(app, body["run_id"])
    assert [(r.tool, r.status) for r in receipts] == [("publish", "denied")]


async def test_a_decision_is_taken_once(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)
    model.script(openai_text("no"), openai_text("answer"))
    assert (await decide(client, body, False)).status_code == 202
    await settled(app, body["run_id"])

    again = await decide(client, body, True)

    assert again.status_code == 409
    assert again.json()["type"] == "urn:toolloop:problem:confirmation-conflict"


async def test_unknown_runs_and_confirmations_are_404(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)

    unknown_run = await client.post("/router/runs/nope/confirmations/x", json={"approve": True})
    unknown_confirmation = await client.post(
        f"/router/runs/{body['run_id']}/confirmations/nope", json={"approve": True}
    )
    bad_body = await decide(client, body, "yes")  # type: ignore[arg-type]

    assert unknown_run.status_code == 404
    assert unknown_confirmation.status_code == 404
    assert bad_body.status_code == 422


async def test_a_pending_run_survives_a_restart(settings: Settings, model: FakeLLM) -> None:
    async with running(settings) as (_, client):
        body = await start_pending(client, model)

    model.script(openai_text("published"), openai_text("Published after the restart."))
    async with running(settings) as (app, client):
        response = await decide(client, body, True)
        assert response.status_code == 202
        await settled(app, body["run_id"])
        run = await stored_run(app, body["run_id"])
        receipts = await stored_receipts(app, body["run_id"])

    assert run.status == "done"
    assert run.instance_id == app.state.runtime.instance_id
    assert run.outcome is not None
    assert run.outcome["text"] == "Published after the restart."
    assert router_tools.CALLS == [("publish", {"title": SECRET_TITLE})]
    assert [r.status for r in receipts] == ["succeeded"]
    # The resumed conversation was the redacted checkpoint: the model never saw the secret again.
    resumed = model.body(1)["messages"]
    assert any(m.get("tool_call_id") == "c1" for m in resumed)
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in str(resumed)


async def test_an_approval_under_a_changed_contract_is_refused(
    settings: Settings, model: FakeLLM, tmp_path: Path
) -> None:
    async with running(settings) as (_, client):
        body = await start_pending(client, model)

    changed_dir = tmp_path / "changed"
    changed_dir.mkdir()
    changed = write_registry(
        changed_dir, REGISTRY.replace("Publish something;", "Publish something new;")
    )
    new_settings = settings.model_copy(update={"registries": [changed]})
    async with running(new_settings) as (app, client):
        response = await decide(client, body, True)
        run = await stored_run(app, body["run_id"])
        (kept,) = await confirmations(app, body["run_id"])

    assert response.status_code == 409
    assert response.json()["type"] == "urn:toolloop:problem:contract-changed"
    assert (run.status, kept.status, kept.args) == ("incomplete", "refused", None)
    assert run.outcome is not None
    assert (run.outcome["status"], run.outcome["stopped_by"]) == ("incomplete", "confirmation")
    assert run.outcome["pending"] == []
    assert router_tools.CALLS == []


async def test_shutdown_interrupts_a_running_run_and_keeps_its_receipts(
    settings: Settings, model: FakeLLM
) -> None:
    model.script(openai_calls(("c1", "nap", {"seconds": 5})))

    async with running(settings) as (app, client):
        waiting = asyncio.create_task(client.post("/router/runs", json=run_body()))
        await wait_for(lambda: router_tools.CALLS, "the tool call started")
        await app.state.runtime.runs.aclose()
        response = await waiting
        async with app.state.runtime.sessions() as session:
            (run,) = (await RunRepository(session).list_page(limit=5)).items
        receipts = await stored_receipts(app, run.id)

    body = response.json()
    assert (body["run_id"], body["status"], body["stopped_by"]) == (
        run.id,
        "interrupted",
        "interrupted",
    )
    assert run.status == "interrupted"
    assert run.finished_at is not None
    assert [(r.tool, r.status) for r in receipts] == [("nap", "failed")]
    assert receipts[0].error is not None
    assert receipts[0].error["kind"] == "cancelled"
    assert [r["receipt_id"] for r in body["receipts"]] == [receipts[0].id]
