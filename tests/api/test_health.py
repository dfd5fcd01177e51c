from __future__ import annotations

import logging

import httpx
import pytest
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings
from app.store.database import create_database_engine, create_session_factory, database_target
from tests.api.conftest import EXAMPLE_REGISTRY

ABSENT_DATABASE = "postgresql+psycopg://nobody:hunter2@127.0.0.1:1/absent"


async def test_healthz_answers_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_says_the_database_answers_not_where_it_is(
    client: httpx.AsyncClient, database_url: str
) -> None:
    response = await client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["contract_hash"].startswith("sha256:")
    assert body["database"] == "answers"
    target = database_target(database_url)
    assert target not in response.text
    assert target.partition(":")[0] not in response.text  # the host or the file's directory


async def test_readyz_is_503_problem_when_database_is_gone(
    app: FastAPI, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = app.state.runtime
    original = runtime.database
    runtime.database = create_database_engine(ABSENT_DATABASE)
    try:
        with caplog.at_level(logging.WARNING, logger="toolloop.api.health"):
            response = await client.get("/readyz")
    finally:
        await runtime.database.dispose()
        runtime.database = original
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == 503
    assert body["detail"] == "The database is unavailable; retry later."
    assert "127.0.0.1" not in response.text
    assert response.headers["retry-after"]
    # The operator still learns where and why, from the log.
    assert "127.0.0.1:1/absent" in caplog.text


async def test_while_waiting_for_the_database_a_503_names_neither_it_nor_its_driver() -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=ABSENT_DATABASE, wait_for_database_s=600
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            responses = [await client.get("/readyz"), await client.get("/runs")]
    for response in responses:
        assert response.status_code == 503
        assert response.json()["detail"] == "The service is waiting for its database; retry later."
        assert "127.0.0.1" not in response.text
        assert "absent" not in response.text


async def test_unknown_route_is_problem_json(client: httpx.AsyncClient) -> None:
    response = await client.get("/no-such-route")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert set(response.json()) >= {"type", "title", "status", "detail"}


async def test_wrong_method_is_problem_json(client: httpx.AsyncClient) -> None:
    response = await client.post("/healthz")
    assert response.status_code == 405
    assert response.json()["status"] == 405


async def test_a_database_outage_is_a_503_problem_never_a_500(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    runtime = app.state.runtime
    original = runtime.sessions
    gone = create_database_engine("postgresql+psycopg://nobody@127.0.0.1:1/absent")
    runtime.sessions = create_session_factory(gone)
    try:
        responses = [
            await client.get("/runs"),
            await client.get("/receipts"),
            await client.get("/runs/some-run"),
        ]
    finally:
        runtime.sessions = original
        await gone.dispose()
    for response in responses:
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["retry-after"]
