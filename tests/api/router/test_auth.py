"""The router's scope (`router:run`) and who may decide a confirmation
(`confirmations:decide`, whoever created the run)."""

from __future__ import annotations

from pathlib import Path

from app.api.auth import create_key
from tests.router import router_tools
from tests.router.http_support import router_settings, run_body
from tests.support.app import running, settled, stored_run
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text


async def test_router_runs_need_the_router_scope_and_decisions_need_the_decide_scope(
    sqlite_url: str, tmp_path: Path, model: FakeLLM, model_url: str
) -> None:
    keys = tmp_path / "keys.yml"
    planner = create_key(keys, "planner", ["plans:execute"])
    alice = create_key(keys, "alice", ["router:run"])
    bob = create_key(keys, "bob", ["router:run"])
    operator = create_key(keys, "operator", ["confirmations:decide"])
    settings = router_settings(sqlite_url, tmp_path, model_url, api_keys=keys)
    model.script(openai_calls(("c1", "publish", {"title": "t"})))

    async with running(settings) as (app, client):
        anonymous = await client.post("/router/runs", json=run_body())
        wrong_scope = await client.post(
            "/router/runs", json=run_body(), headers={"authorization": f"Bearer {planner}"}
        )
        started = await client.post(
            "/router/runs", json=run_body(), headers={"authorization": f"Bearer {alice}"}
        )
        body = started.json()
        path = (
            f"/router/runs/{body['run_id']}/confirmations/{body['pending'][0]['confirmation_id']}"
        )
        by_bob = await client.post(
            path, json={"approve": True}, headers={"authorization": f"Bearer {bob}"}
        )
        by_alice = await client.post(
            path, json={"approve": True}, headers={"authorization": f"Bearer {alice}"}
        )
        model.script(openai_text("ok"), openai_text("answer"))
        by_operator = await client.post(
            path, json={"approve": True}, headers={"authorization": f"Bearer {operator}"}
        )
        await settled(app, body["run_id"])
        run = await stored_run(app, body["run_id"])

    assert anonymous.status_code == 401
    assert wrong_scope.status_code == 403
    assert started.status_code == 200
    assert run.caller == "alice"
    assert by_bob.status_code == 403
    assert by_alice.status_code == 403  # her own run: deciding is another scope
    assert by_operator.status_code == 202
    assert run.status == "done"
    assert router_tools.CALLS == [("publish", {"title": "t"})]
