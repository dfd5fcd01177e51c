"""Router run and confirmation bodies with U+0000 or a repeated key: 422 with a
pointer, and no model is asked."""

from __future__ import annotations

import httpx
import orjson
from fastapi import FastAPI

from app.store.repositories.audit import AuditRepository
from tests.router.http_support import run_body
from tests.support.fake_llm import FakeLLM


async def _post(client: httpx.AsyncClient, path: str, body: bytes) -> list[tuple[str, str]]:
    response = await client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    return [(e["pointer"], e["message"]) for e in response.json()["errors"]]


async def test_a_router_run_with_a_nul_is_refused_before_the_model_is_asked(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = orjson.dumps(run_body(goal="find\x00out", context={"trace_id": "t\x00"}))

    assert await _post(client, "/router/runs", body) == [
        ("/goal", "a string may not contain U+0000"),
        ("/context/trace_id", "a string may not contain U+0000"),
    ]
    assert model.requests == []


async def test_a_router_run_that_repeats_a_key_is_refused(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = orjson.dumps(run_body())[:-1] + b', "goal": "something else"}'

    assert await _post(client, "/router/runs", body) == [
        ("/goal", "an object may not repeat a key")
    ]
    assert model.requests == []


async def test_a_decision_with_a_nul_or_a_repeated_key_is_refused(
    client: httpx.AsyncClient,
) -> None:
    path = "/router/runs/some-run/confirmations/some-confirmation"

    assert await _post(client, path, b'{"approve": true, "reason": "ok\\u0000"}') == [
        ("/reason", "a string may not contain U+0000")
    ]
    assert await _post(client, path, b'{"approve": false, "approve": true}') == [
        ("/approve", "an object may not repeat a key")
    ]


async def test_a_rejected_router_run_is_audited_without_its_strings(
    app: FastAPI, client: httpx.AsyncClient, model: FakeLLM
) -> None:
    owner = "\x1b[2J" + "o" * 300
    response = await client.post("/router/runs", json=run_body(owner=owner))
    assert response.status_code == 422

    runtime = app.state.runtime
    await runtime.writer.flush()
    async with runtime.sessions() as session:
        events = await AuditRepository(session).list_for_run(None)
    (row,) = [event for event in events if event.kind == "router.rejected"]

    assert row.detail["owner_chars"] == len(owner)
    assert row.detail["problem_count"] == len(response.json()["errors"])
    assert owner not in orjson.dumps(row.detail).decode()
    assert "\x1b" not in orjson.dumps(row.detail).decode()
    assert model.requests == []
