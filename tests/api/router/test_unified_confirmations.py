"""Router runs' confirmations through the routes every run shares: the listing,
`POST /runs/{id}/confirmations/{cid}`, rejection receipts and expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI

from tests.api.router.test_confirmations import SECRET_TITLE, start_pending
from tests.router import router_tools
from tests.support.app import settled, stored_audit, stored_receipts, stored_run
from tests.support.fake_llm import FakeLLM, openai_text


async def test_a_router_confirmation_is_listed_and_decided_on_the_shared_route(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)
    (pending,) = body["pending"]

    listed = (await client.get("/confirmations", params={"status": "pending"})).json()
    model.script(openai_text("published"), openai_text("It is published."))
    response = await client.post(
        f"/runs/{body['run_id']}/confirmations/{pending['confirmation_id']}",
        json={"approve": True, "reason": "ok"},
    )
    await settled(app, body["run_id"])

    (item,) = listed["items"]
    assert (item["run_id"], item["kind"], item["call_key"], item["item_key"], item["tool"]) == (
        body["run_id"],
        "router",
        pending["call_key"],
        None,
        "publish",
    )
    assert item["args_digest"] == pending["args_digest"]
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in str(item["args"])
    assert response.status_code == 202
    assert (await stored_run(app, body["run_id"])).status == "done"
    assert router_tools.CALLS == [("publish", {"title": SECRET_TITLE})]


async def test_a_rejected_router_call_is_denied_with_kind_confirmation(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)
    model.script(openai_text("not published"), openai_text("Nothing was published."))

    response = await client.post(
        f"/runs/{body['run_id']}/confirmations/{body['pending'][0]['confirmation_id']}",
        json={"approve": False, "reason": "no"},
    )
    await settled(app, body["run_id"])

    assert response.status_code == 202
    (receipt,) = await stored_receipts(app, body["run_id"])
    assert receipt.status == "denied"
    assert receipt.error is not None
    assert receipt.error["kind"] == "confirmation"


async def test_an_expired_router_confirmation_is_a_rejection(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await start_pending(client, model)
    model.script(openai_text("not published"), openai_text("Nothing was published."))

    expired = await app.state.runtime.confirmations.expire(
        datetime.now(UTC) + timedelta(seconds=app.state.runtime.settings.confirmation_ttl_s + 1)
    )
    await settled(app, body["run_id"])

    assert expired == 1
    assert (await stored_run(app, body["run_id"])).status == "done"
    assert router_tools.CALLS == []
    (receipt,) = await stored_receipts(app, body["run_id"])
    assert receipt.status == "denied"
    kinds = [e.kind for e in await stored_audit(app, body["run_id"])]
    assert "confirmation.expired" in kinds
