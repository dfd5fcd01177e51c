from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.api.app import create_app
from app.api.auth import create_key
from app.settings import Settings
from app.store.database import create_database_engine, create_session_factory
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.api import run_tools
from tests.api.run_registry import REGISTRY, echo, gate, parallel, sequential
from tests.api.run_support import run_ended
from tests.support.app import AppFactory, stored_receipts, stored_run
from tests.support.waiting import wait_for

ASYNC = {"Prefer": "respond-async"}


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    run_tools.reset()
    yield
    run_tools.reset()


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


async def test_respond_async_answers_202_and_the_run_goes_on(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(gate("1", "slow"), echo("2", "after"))
    response = await client.post("/plans/sequential", json=plan, headers=ASYNC)

    assert response.status_code == 202
    run_id = response.json()["run_id"]
    assert response.json() == {"run_id": run_id, "status": "running"}
    assert response.headers["location"] == f"/runs/{run_id}"
    assert response.headers["preference-applied"] == "respond-async"
    assert (await stored_run(app, run_id)).status == "running"

    await wait_for(lambda: run_tools.entered["slow"] == 1)
    run_tools.release("slow")
    await wait_for(lambda: run_ended(app, run_id))

    run = await stored_run(app, run_id)
    assert (run.status, run.call_count) == ("succeeded", 2)
    receipts = await stored_receipts(app, run_id)
    assert [(r.call_key, r.status) for r in receipts] == [("1", "succeeded"), ("2", "succeeded")]
    assert run_tools.echoed == ["after"]


async def test_respond_async_among_other_preferences(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/plans/parallel",
        json=parallel({"a": [echo("1")]}),
        headers={"Prefer": "return=minimal, RESPOND-ASYNC; wait=5"},
    )
    assert response.status_code == 202


async def test_a_preflight_failure_is_422_even_when_async_is_preferred(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/plans/sequential",
        json=sequential({"call_key": "1", "tool": "ghost", "args": {}}),
        headers=ASYNC,
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "/calls/0/tool"


async def test_cancelling_a_running_async_plan(app: FastAPI, client: httpx.AsyncClient) -> None:
    plan = parallel(
        {"a": [gate("1", "held"), echo("2", "never")], "b": [echo("1", "never")]},
        max_concurrency=1,
    )
    started = await client.post("/plans/parallel", json=plan, headers=ASYNC)
    run_id = started.json()["run_id"]
    await wait_for(lambda: run_tools.entered["held"] == 1)

    cancelled = await client.post(f"/runs/{run_id}/cancel")

    assert cancelled.status_code == 200
    assert cancelled.json() == {"run_id": run_id, "status": "cancelled"}
    run = await stored_run(app, run_id)
    assert run.status == "cancelled"
    assert run.finished_at is not None
    assert run.call_count == 3
    receipts = await stored_receipts(app, run_id)
    assert [(r.item_key, r.call_key, r.status) for r in receipts] == [
        ("a", "1", "failed"),
        ("a", "2", "skipped"),
        ("b", "1", "skipped"),
    ]
    assert {r.error["kind"] for r in receipts if r.error} == {"cancelled"}
    assert run_tools.cancelled == ["1"]
    assert run_tools.echoed == []

    again = await client.post(f"/runs/{run_id}/cancel")
    assert again.status_code == 409
    assert again.json()["type"] == "urn:toolloop:problem:run-not-cancellable"


async def test_a_waiting_request_gets_its_cancelled_run(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(echo("1", "before"), gate("2", "held"), echo("3", "never"))
    waiting = asyncio.create_task(
        client.post("/plans/sequential", json=plan, headers={"Idempotency-Key": "k"})
    )
    await wait_for(lambda: run_tools.entered["held"] == 1)
    async with app.state.runtime.sessions() as session:
        (running,) = (await RunRepository(session).list_page(limit=5, status="running")).items
    run_id = running.id

    assert (await client.post(f"/runs/{run_id}/cancel")).status_code == 200
    response = await waiting

    assert response.status_code == 200
    body = response.json()
    assert (body["plan_id"], body["kind"], body["status"]) == (run_id, "sequential", "cancelled")
    assert [(r["call_key"], r["status"]) for r in body["receipts"]] == [
        ("1", "succeeded"),
        ("2", "failed"),
        ("3", "skipped"),
    ]
    assert body["receipts"][1]["error"]["kind"] == "cancelled"
    assert body["dispatched"] == []
    replayed = await client.post("/plans/sequential", json=plan, headers={"Idempotency-Key": "k"})
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json() == body


async def test_a_waiting_plan_of_reads_without_a_key_gets_its_cancelled_run(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    # Its start was queued, not waited for (app.service.plans.service): the stop still
    # finds the run and its receipts stored, and records the end.
    plan = sequential(gate("1", "held"), gate("2", "never"))
    waiting = asyncio.create_task(client.post("/plans/sequential", json=plan))
    await wait_for(lambda: run_tools.entered["held"] == 1)
    await wait_for(lambda: _one_running(app))  # the start commits while the call waits
    async with app.state.runtime.sessions() as session:
        (running,) = (await RunRepository(session).list_page(limit=5, status="running")).items

    assert (await client.post(f"/runs/{running.id}/cancel")).status_code == 200
    response = await waiting

    assert response.status_code == 200
    body = response.json()
    assert (body["plan_id"], body["status"]) == (running.id, "cancelled")
    assert [(r["call_key"], r["status"]) for r in body["receipts"]] == [
        ("1", "failed"),
        ("2", "skipped"),
    ]
    assert (await stored_run(app, running.id)).status == "cancelled"
    assert [r.call_key for r in await stored_receipts(app, running.id)] == ["1", "2"]


async def _one_running(app: FastAPI) -> bool:
    async with app.state.runtime.sessions() as session:
        page = await RunRepository(session).list_page(limit=5, status="running")
    return len(page.items) == 1


async def test_cancelling_a_finished_run_is_409(client: httpx.AsyncClient) -> None:
    done = await client.post("/plans/sequential", json=sequential(echo("1")))
    response = await client.post(f"/runs/{done.json()['plan_id']}/cancel")
    assert response.status_code == 409
    assert "succeeded" in response.json()["detail"]


async def test_cancelling_an_unknown_run_is_404(client: httpx.AsyncClient) -> None:
    response = await client.post("/runs/no-such-run/cancel")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_shutdown_leaves_no_run_running(settings: Settings) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            started = await client.post(
                "/plans/parallel",
                json=parallel({"a": [gate("1", "held")], "b": [gate("1", "held")]}),
                headers=ASYNC,
            )
            await wait_for(lambda: run_tools.entered["held"] == 2)
    run_id = started.json()["run_id"]

    database = create_database_engine(settings.database_url)
    try:
        async with create_session_factory(database)() as session:
            run = await RunRepository(session).get(run_id)
            receipts = await ReceiptRepository(session).list_for_run(run_id)
    finally:
        await database.dispose()
    assert run is not None
    assert (run.status, run.call_count) == ("interrupted", 2)
    assert [(r.item_key, r.status, r.error["kind"]) for r in receipts] == [
        ("a", "failed", "cancelled"),
        ("b", "failed", "cancelled"),
    ]


class TestCancelAcrossCallers:
    @pytest.fixture
    def keys_file(self, tmp_path: Path) -> Path:
        return tmp_path / "keys.yml"

    @pytest.fixture
    def keys(self, keys_file: Path) -> dict[str, str]:
        return {
            "alice": create_key(keys_file, "alice", ["plans:execute"]),
            "bob": create_key(keys_file, "bob", ["plans:execute"]),
            "operator": create_key(keys_file, "operator", ["runs:read:all"]),
            "admin": create_key(keys_file, "admin", ["admin"]),
        }

    @pytest.fixture
    def settings(self, make_app: AppFactory, keys_file: Path, keys: dict[str, str]) -> Settings:
        return make_app.settings(REGISTRY, api_keys=keys_file)

    async def test_only_the_creator_or_an_admin_cancels(
        self, app: FastAPI, client: httpx.AsyncClient, keys: dict[str, str]
    ) -> None:
        def auth(name: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {keys[name]}"}

        started = await client.post(
            "/plans/sequential",
            json=sequential(gate("1", "held")),
            headers={**auth("alice"), **ASYNC},
        )
        run_id = started.json()["run_id"]
        await wait_for(lambda: run_tools.entered["held"] == 1)

        assert (await client.post(f"/runs/{run_id}/cancel", headers=auth("bob"))).status_code == 404
        by_operator = await client.post(f"/runs/{run_id}/cancel", headers=auth("operator"))
        assert by_operator.status_code == 403
        assert (await stored_run(app, run_id)).status == "running"

        by_alice = await client.post(f"/runs/{run_id}/cancel", headers=auth("alice"))
        assert by_alice.json() == {"run_id": run_id, "status": "cancelled"}

    async def test_an_admin_cancels_any_run(
        self, client: httpx.AsyncClient, keys: dict[str, str]
    ) -> None:
        started = await client.post(
            "/plans/sequential",
            json=sequential(gate("1", "held")),
            headers={"Authorization": f"Bearer {keys['alice']}", **ASYNC},
        )
        await wait_for(lambda: run_tools.entered["held"] == 1)
        response = await client.post(
            f"/runs/{started.json()['run_id']}/cancel",
            headers={"Authorization": f"Bearer {keys['admin']}"},
        )
        assert response.json()["status"] == "cancelled"
