"""Router runs under the run supervisor: respond-async, idempotent retries, cancel,
the events stream and shutdown, over HTTP with the fake model served on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.api.auth import create_key
from app.settings import Settings
from app.store.database import create_database_engine, create_session_factory
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.router_runs import RouterRunRepository
from app.store.repositories.runs import RunRepository
from tests.api.run_support import parse_events, run_count
from tests.router import router_tools
from tests.router.http_support import OUTCOME_KEYS, router_settings, run_body
from tests.support.app import running, settled, stored_audit, stored_receipts, stored_run
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text
from tests.support.waiting import wait_for

ASYNC = {"Prefer": "respond-async"}
SECRET = "sk-abcdefghijklmnopqrstuvwxyz"


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def waiter(**overrides: Any) -> dict[str, Any]:
    """A run of the `waiter` owner, whose `hold` tool waits for `router_tools.release`."""
    return run_body(owner="waiter", **overrides)


def held() -> bool:
    return any(tool == "hold" for tool, _ in router_tools.CALLS)


async def ended(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """GET /runs/{run_id} once the run is not running."""

    async def read() -> dict[str, Any] | None:
        response = await client.get(f"/runs/{run_id}")
        assert response.status_code == 200
        return None if response.json()["status"] == "running" else dict(response.json())

    return await wait_for(read, f"run {run_id} ended")


async def running_run_id(app: FastAPI) -> str:
    async with app.state.runtime.sessions() as session:
        (run,) = (await RunRepository(session).list_page(limit=5, status="running")).items
    return run.id


class TestRespondAsync:
    async def test_202_then_the_run_finishes_in_the_background(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(
            openai_calls(("c1", "lookup", {"term": "toolloop"})),
            openai_text("enough"),
            openai_text("ToolLoop runs tools."),
        )

        response = await client.post("/router/runs", json=run_body(), headers=ASYNC)

        assert response.status_code == 202
        run_id = response.json()["run_id"]
        assert response.json() == {"run_id": run_id, "status": "running"}
        assert response.headers["location"] == f"/runs/{run_id}"
        assert response.headers["preference-applied"] == "respond-async"
        run = await ended(client, run_id)
        assert (run["kind"], run["status"], run["receipt_count"]) == ("router", "done", 1)
        assert run["outcome"]["text"] == "ToolLoop runs tools."
        assert [r["tool"] for r in run["outcome"]["receipts"]] == ["lookup"]
        assert router_tools.CALLS == [("lookup", {"term": "toolloop"})]

    async def test_a_rejected_request_is_422_at_once_and_nothing_runs(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        response = await client.post(
            "/router/runs", json=run_body(final_profile="gpt-x"), headers=ASYNC
        )

        assert response.status_code == 422
        assert [e["pointer"] for e in response.json()["errors"]] == ["/final_profile"]
        assert await run_count(app) == 0
        assert model.requests == []

    async def test_a_run_that_pauses_ends_its_task_pending(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(openai_calls(("c1", "publish", {"title": "t"})))

        response = await client.post("/router/runs", json=run_body(), headers=ASYNC)

        run = await ended(client, response.json()["run_id"])
        assert (run["status"], run["outcome"]["stopped_by"]) == ("pending", "confirmation")
        assert [p["tool"] for p in run["outcome"]["pending"]] == ["publish"]


class TestIdempotency:
    async def test_a_retry_replays_the_stored_redacted_copy_without_running_anything(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(
            openai_calls(("c1", "echo", {"text": f"key {SECRET}"})),
            openai_text("enough"),
            openai_text(f"The key is {SECRET}."),
        )

        first = await client.post("/router/runs", json=run_body(), headers=key("k"))
        again = await client.post("/router/runs", json=run_body(), headers=key("k"))

        assert first.status_code == again.status_code == 200
        assert "idempotent-replayed" not in first.headers
        assert again.headers["idempotent-replayed"] == "true"
        assert SECRET in first.text
        assert SECRET not in again.text
        body, replayed = first.json(), again.json()
        assert set(replayed) == set(body) == OUTCOME_KEYS
        assert (replayed["run_id"], replayed["status"]) == (body["run_id"], "done")
        assert [r["receipt_id"] for r in replayed["receipts"]] == [
            r["receipt_id"] for r in body["receipts"]
        ]
        assert set(replayed["receipts"][0]) == set(body["receipts"][0])
        assert replayed["text"] == "The key is [REDACTED]."
        assert len(model.requests) == 3
        (call,) = router_tools.CALLS
        assert call == ("echo", {"text": f"key {SECRET}"})
        assert await run_count(app) == 1

    async def test_the_same_key_for_another_body_is_422(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(openai_text("enough"), openai_text("answer"))
        first = await client.post("/router/runs", json=run_body(), headers=key("k"))
        assert first.status_code == 200

        reused = await client.post(
            "/router/runs", json=run_body(goal="Something else."), headers=key("k")
        )

        assert reused.status_code == 422
        assert reused.json()["type"] == "urn:toolloop:problem:idempotency-key-reused"
        assert len(model.requests) == 2
        assert await run_count(app) == 1

    async def test_a_retry_while_the_first_runs_is_409_and_a_rejection_is_replayed(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(
            openai_calls(("c1", "hold", {"gate": "g"})), openai_text("ok"), openai_text("a")
        )
        first = asyncio.create_task(client.post("/router/runs", json=waiter(), headers=key("k")))
        await wait_for(held)

        busy = await client.post("/router/runs", json=waiter(), headers=key("k"))
        assert busy.status_code == 409
        assert busy.json()["type"] == "urn:toolloop:problem:idempotency-key-in-use"

        router_tools.release("g")
        done = await first
        assert done.json()["status"] == "done"
        later = await client.post("/router/runs", json=waiter(), headers=key("k"))
        assert later.headers["idempotent-replayed"] == "true"
        assert later.json()["run_id"] == done.json()["run_id"]

        bad = run_body(final_profile="gpt-x")
        rejected = await client.post("/router/runs", json=bad, headers=key("bad"))
        again = await client.post("/router/runs", json=bad, headers=key("bad"))
        assert rejected.status_code == again.status_code == 422
        assert again.headers["idempotent-replayed"] == "true"
        assert await run_count(app) == 1

    async def test_concurrent_duplicates_create_exactly_one_run(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(
            openai_calls(("c1", "hold", {"gate": "g"})), openai_text("ok"), openai_text("a")
        )
        posts = [
            asyncio.create_task(client.post("/router/runs", json=waiter(), headers=key("k")))
            for _ in range(6)
        ]
        await wait_for(lambda: held() and sum(p.done() for p in posts) == 5)
        router_tools.release("g")
        responses = await asyncio.gather(*posts)

        assert sorted(r.status_code for r in responses) == [200, 409, 409, 409, 409, 409]
        assert router_tools.CALLS == [("hold", {"gate": "g"})]
        assert await run_count(app) == 1

    async def test_concurrent_async_duplicates_all_get_the_one_run(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(openai_text("enough"), openai_text("answer"))
        headers = {**key("k"), **ASYNC}
        responses = await asyncio.gather(
            *(client.post("/router/runs", json=run_body(), headers=headers) for _ in range(6))
        )

        fresh = [r for r in responses if "idempotent-replayed" not in r.headers]
        assert [r.status_code for r in fresh] == [202]
        assert {r.status_code for r in responses} == {202}
        assert len({r.json()["run_id"] for r in responses}) == 1
        await ended(client, fresh[0].json()["run_id"])
        assert await run_count(app) == 1


class TestCancel:
    async def test_cancelling_a_running_run_answers_the_waiting_request(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(openai_calls(("c1", "hold", {"gate": "g"})))
        waiting = asyncio.create_task(client.post("/router/runs", json=waiter(), headers=key("k")))
        await wait_for(held)
        run_id = await running_run_id(app)

        cancelled = await client.post(f"/runs/{run_id}/cancel")

        assert cancelled.status_code == 200
        assert cancelled.json() == {"run_id": run_id, "status": "cancelled"}
        response = await waiting
        assert response.status_code == 200
        body = response.json()
        assert set(body) == OUTCOME_KEYS
        assert (body["run_id"], body["status"], body["stopped_by"]) == (
            run_id,
            "cancelled",
            "cancelled",
        )
        assert (body["text"], body["final"], body["pending"]) == ("", None, [])
        assert body["state"]["status"] == "abort"
        assert [(r["tool"], r["status"], r["error"]["kind"]) for r in body["receipts"]] == [
            ("hold", "failed", "cancelled")
        ]
        assert router_tools.CANCELLED == ["g"]
        run = await stored_run(app, run_id)
        assert (run.status, run.call_count) == ("cancelled", 1)
        assert run.finished_at is not None
        assert run.outcome == body
        receipts = await stored_receipts(app, run_id)
        assert [(r.id, r.status) for r in receipts] == [
            (body["receipts"][0]["receipt_id"], "failed")
        ]
        kinds = [e.kind for e in await stored_audit(app, run_id)]
        assert kinds[-1] == "router.run_stopped"
        assert "router.run_finished" not in kinds
        assert len(model.requests) == 1

        replayed = await client.post("/router/runs", json=waiter(), headers=key("k"))
        assert replayed.headers["idempotent-replayed"] == "true"
        assert replayed.json() == body
        again = await client.post(f"/runs/{run_id}/cancel")
        assert again.status_code == 409
        assert again.json()["type"] == "urn:toolloop:problem:run-not-cancellable"

    async def test_cancelling_a_pending_run_refuses_its_confirmations(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(openai_calls(("c1", "publish", {"title": SECRET})))
        started = await client.post("/router/runs", json=run_body())
        body = started.json()
        assert body["status"] == "pending"
        run_id = body["run_id"]

        cancelled = await client.post(f"/runs/{run_id}/cancel")

        assert cancelled.status_code == 200
        assert cancelled.json() == {"run_id": run_id, "status": "cancelled"}
        run = await stored_run(app, run_id)
        assert run.status == "cancelled"
        assert run.finished_at is not None
        assert run.outcome is not None
        assert (run.outcome["status"], run.outcome["stopped_by"]) == ("cancelled", "cancelled")
        assert run.outcome["pending"] == []
        async with app.state.runtime.sessions() as session:
            repo = RouterRunRepository(session)
            (kept,) = await repo.confirmations(run_id)
            checkpoint = await repo.checkpoint(run_id)
        assert (kept.status, kept.args, checkpoint) == ("refused", None, None)
        kinds = [e.kind for e in await stored_audit(app, run_id)]
        assert kinds[-2:] == ["router.confirmation_decided", "router.run_stopped"]

        confirmation = body["pending"][0]["confirmation_id"]
        decided = await client.post(
            f"/router/runs/{run_id}/confirmations/{confirmation}", json={"approve": True}
        )
        assert decided.status_code == 409
        again = await client.post(f"/runs/{run_id}/cancel")
        assert again.status_code == 409
        assert "cancelled" in again.json()["detail"]
        assert router_tools.CALLS == []
        assert len(model.requests) == 1

    async def test_a_resumed_run_is_supervised_and_can_be_cancelled(
        self, app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
    ) -> None:
        model.script(openai_calls(("c1", "announce", {"title": "t"})))
        body = (await client.post("/router/runs", json=waiter())).json()
        run_id = body["run_id"]
        model.script(openai_calls(("c2", "hold", {"gate": "r"})))

        confirmation = body["pending"][0]["confirmation_id"]
        decided = await client.post(
            f"/router/runs/{run_id}/confirmations/{confirmation}", json={"approve": True}
        )

        assert decided.json()["run_status"] == "running"
        assert app.state.runtime.runs.get(run_id) is not None
        await wait_for(held)
        cancelled = await client.post(f"/runs/{run_id}/cancel")
        assert cancelled.json() == {"run_id": run_id, "status": "cancelled"}
        run = await stored_run(app, run_id)
        assert run.status == "cancelled"
        assert run.outcome is not None
        assert [(r["tool"], r["status"]) for r in run.outcome["receipts"]] == [
            ("announce", "succeeded"),
            ("hold", "failed"),
        ]
        assert [(r.tool, r.status) for r in await stored_receipts(app, run_id)] == [
            ("announce", "succeeded"),
            ("hold", "failed"),
        ]
        assert router_tools.CANCELLED == ["r"]


class TestCancelAcrossCallers:
    async def test_only_the_creator_with_the_router_scope_or_an_admin_cancels(
        self, sqlite_url: str, tmp_path: Path, model: FakeLLM, model_url: str
    ) -> None:
        keys = tmp_path / "keys.yml"
        tokens = {
            name: create_key(keys, name, scopes)
            for name, scopes in {
                "alice": ["router:run"],
                "bob": ["router:run"],
                "operator": ["runs:read:all"],
                "admin": ["admin"],
            }.items()
        }

        def auth(name: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {tokens[name]}"}

        settings = router_settings(sqlite_url, tmp_path, model_url, api_keys=keys)
        model.script(
            openai_calls(("c1", "hold", {"gate": "g"})),
            openai_calls(("c1", "publish", {"title": "t"})),
        )
        async with running(settings) as (app, client):
            started = await client.post(
                "/router/runs", json=waiter(), headers={**auth("alice"), **ASYNC}
            )
            run_id = started.json()["run_id"]
            await wait_for(held)
            by_bob = await client.post(f"/runs/{run_id}/cancel", headers=auth("bob"))
            by_operator = await client.post(f"/runs/{run_id}/cancel", headers=auth("operator"))
            by_alice = await client.post(f"/runs/{run_id}/cancel", headers=auth("alice"))

            paused = await client.post("/router/runs", json=run_body(), headers=auth("alice"))
            paused_id = paused.json()["run_id"]
            bob_pending = await client.post(f"/runs/{paused_id}/cancel", headers=auth("bob"))
            by_admin = await client.post(f"/runs/{paused_id}/cancel", headers=auth("admin"))
            await settled(app, run_id)

        assert (by_bob.status_code, by_operator.status_code) == (404, 403)
        assert by_alice.json() == {"run_id": run_id, "status": "cancelled"}
        assert paused.json()["status"] == "pending"
        assert bob_pending.status_code == 404
        assert by_admin.json() == {"run_id": paused_id, "status": "cancelled"}


async def test_the_events_stream_sends_each_receipt_then_the_end(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.script(
        openai_calls(("c1", "hold", {"gate": "g"})), openai_text("ok"), openai_text("answer")
    )
    started = await client.post("/router/runs", json=waiter(), headers=ASYNC)
    run_id = started.json()["run_id"]
    await wait_for(held)
    hub = app.state.runtime.events
    stream = asyncio.create_task(client.get(f"/runs/{run_id}/events"))
    await wait_for(lambda: hub.subscriber_count(run_id) > 0)

    router_tools.release("g")
    response = await stream

    assert response.status_code == 200
    events = parse_events(response.text)
    assert [kind for kind, _ in events] == ["receipt", "end"]
    receipt = events[0][1]
    assert (receipt["run_id"], receipt["tool"], receipt["status"]) == (run_id, "hold", "succeeded")
    assert events[1] == ("end", {"run_id": run_id, "status": "done"})
    late = parse_events((await client.get(f"/runs/{run_id}/events")).text)
    assert late == events


async def test_shutdown_ends_background_router_runs_interrupted(
    settings: Settings, model: FakeLLM
) -> None:
    model.script(openai_calls(("c1", "hold", {"gate": "g"})))
    async with running(settings) as (_, client):
        started = await client.post("/router/runs", json=waiter(), headers=ASYNC)
        await wait_for(held)
    run_id = started.json()["run_id"]

    database = create_database_engine(settings.database_url)
    try:
        async with create_session_factory(database)() as session:
            run = await RunRepository(session).get(run_id)
            still_running = await RunRepository(session).list_page(limit=5, status="running")
            receipts = await ReceiptRepository(session).list_for_run(run_id)
    finally:
        await database.dispose()
    assert run is not None
    assert (run.status, run.call_count) == ("interrupted", 1)
    assert run.outcome is not None
    assert (run.outcome["status"], run.outcome["stopped_by"]) == ("interrupted", "interrupted")
    assert still_running.items == []
    assert [(r.tool, r.status) for r in receipts] == [("hold", "failed")]
    assert receipts[0].error is not None
    assert receipts[0].error["kind"] == "cancelled"
    assert router_tools.CANCELLED == ["g"]
