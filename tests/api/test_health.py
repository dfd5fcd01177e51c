from __future__ import annotations

import httpx
from fastapi import FastAPI

from app.store.database import create_database_engine, create_session_factory


async def test_healthz_answers_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_reports_contract_and_database(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["contract_hash"].startswith("sha256:")
    assert "password" not in body["database"]


async def test_readyz_is_503_problem_when_database_is_gone(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    runtime = app.state.runtime
    original = runtime.database
    runtime.database = create_database_engine("postgresql+psycopg://nobody@127.0.0.1:1/absent")
    try:
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
