"""Auth over every route of the OpenAPI document, so a new route cannot slip past it.

Read-only keys get 403 from every mutating route (and nothing happens);
another caller's run ids are 404 on every run route, answered exactly as an
unknown id is; a missing or bad key is 401 everywhere but the probes, and
bad keys from one address turn into 429 with `Retry-After` after the burst.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import FailedAuthThrottle, create_key
from tests.router import router_tools
from tests.router.http_support import router_settings, run_body
from tests.support.app import running, settled
from tests.support.fake_llm import FakeLLM, openai_calls

PROBES = {"/healthz", "/readyz"}
SCOPES = {
    "alice": ["plans:execute", "router:run", "runs:read", "metrics:read"],
    "bob": ["plans:execute", "router:run", "runs:read", "metrics:read"],
    "reader": ["runs:read"],
    "auditor": ["runs:read:all", "metrics:read"],
}
PLAN = {"owner": "agent", "calls": [{"call_key": "1", "tool": "lookup", "args": {"term": "x"}}]}
UNKNOWN = "no-such-run"
# A valid body where a route reads one, so that only auth and visibility decide.
BODIES: dict[str, Any] = {
    "/runs/{run_id}/resume": PLAN,
    "/router/runs/{run_id}/confirmations/{confirmation_id}": {"approve": False},
}


pytestmark = pytest.mark.usefixtures("fresh_router_tools")


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    return {name: create_key(tmp_path / "keys.yml", name, s) for name, s in SCOPES.items()}


@pytest.fixture
async def served(
    database_url: str, tmp_path: Path, model: FakeLLM, model_url: str, keys: dict[str, str]
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    settings = router_settings(database_url, tmp_path, model_url, api_keys=tmp_path / "keys.yml")
    async with running(settings) as (app, client):
        yield app, client


def as_(keys: dict[str, str], name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {keys[name]}"}


def operations(app: FastAPI) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, item in app.openapi()["paths"].items()
        for method in item
        if path not in PROBES
    ]


def fill(path: str, **values: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: values[match.group(1)], path)


async def call(
    client: httpx.AsyncClient, method: str, route: str, headers: dict[str, str], **ids: str
) -> httpx.Response:
    url = fill(route, **ids)
    if method == "GET":
        return await client.get(url, headers=headers)
    return await client.request(method, url, json=BODIES.get(route, {}), headers=headers)


async def _alice_runs(
    app: FastAPI, client: httpx.AsyncClient, keys: dict[str, str], model: FakeLLM
) -> tuple[str, str, str]:
    """A finished plan run and a router run waiting for a confirmation, both alice's."""
    plan = await client.post("/plans/sequential", json=PLAN, headers=as_(keys, "alice"))
    assert plan.status_code == 200, plan.text
    model.script(openai_calls(("c1", "publish", {"title": "t"})))
    routed = await client.post("/router/runs", json=run_body(), headers=as_(keys, "alice"))
    assert routed.status_code == 200, routed.text
    body = routed.json()
    await settled(app, body["run_id"])
    return plan.json()["plan_id"], body["run_id"], body["pending"][0]["confirmation_id"]


async def _run_count(client: httpx.AsyncClient, keys: dict[str, str]) -> int:
    response = await client.get("/runs", params={"limit": 500}, headers=as_(keys, "auditor"))
    return len(response.json()["items"])


async def test_read_only_keys_are_refused_by_every_mutating_route(
    served: tuple[FastAPI, httpx.AsyncClient], keys: dict[str, str], model: FakeLLM
) -> None:
    app, client = served
    plan_run, router_run, confirmation = await _alice_runs(app, client, keys, model)
    runs_before = await _run_count(client, keys)
    calls_before = list(router_tools.CALLS)
    mutating = [(m, p) for m, p in operations(app) if m not in {"GET", "HEAD", "OPTIONS"}]
    assert len(mutating) >= 6

    for method, route in mutating:
        for run_id in (plan_run, router_run, UNKNOWN):
            for reader in ("reader", "auditor"):
                response = await call(
                    client,
                    method,
                    route,
                    as_(keys, reader),
                    run_id=run_id,
                    confirmation_id=confirmation,
                )
                assert response.status_code == 403, (method, route, reader, response.text)
                assert response.headers["content-type"] == "application/problem+json"

    assert await _run_count(client, keys) == runs_before
    assert list(router_tools.CALLS) == calls_before


async def test_another_caller_s_runs_are_404_on_every_run_route(
    served: tuple[FastAPI, httpx.AsyncClient], keys: dict[str, str], model: FakeLLM
) -> None:
    app, client = served
    plan_run, router_run, confirmation = await _alice_runs(app, client, keys, model)
    calls_before = list(router_tools.CALLS)
    run_routes = [(m, p) for m, p in operations(app) if "{run_id}" in p]
    assert len(run_routes) >= 7
    bob = as_(keys, "bob")

    for method, route in run_routes:
        unknown = await call(
            client, method, route, bob, run_id=UNKNOWN, confirmation_id=confirmation
        )
        if route.endswith("/confirmations/{confirmation_id}"):
            # Deciding needs `confirmations:decide`, which bob lacks: 403 for any run.
            for run_id in (plan_run, router_run):
                theirs = await call(
                    client, method, route, bob, run_id=run_id, confirmation_id=confirmation
                )
                assert theirs.status_code == unknown.status_code == 403, (method, route)
            continue
        assert unknown.status_code == 404, (method, route, unknown.text)
        for run_id in (plan_run, router_run):
            theirs = await call(
                client, method, route, bob, run_id=run_id, confirmation_id=confirmation
            )
            assert theirs.status_code == 404, (method, route, run_id, theirs.text)
            # Nothing tells an existing run of someone else from no run at all.
            assert theirs.json() == _with_id(unknown.json(), UNKNOWN, run_id)

    own = await client.get(f"/runs/{router_run}", headers=as_(keys, "alice"))
    assert (own.status_code, own.json()["status"]) == (200, "pending")
    assert list(router_tools.CALLS) == calls_before


def _with_id(problem: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {
        key: value.replace(old, new) if isinstance(value, str) else value
        for key, value in problem.items()
    }


async def test_missing_or_bad_keys_are_401_everywhere_then_429_after_the_burst(
    served: tuple[FastAPI, httpx.AsyncClient], keys: dict[str, str]
) -> None:
    app, client = served
    routes = operations(app)
    app.state.auth_throttle = FailedAuthThrottle(burst=2 * len(routes), per_minute=0.001)
    bad = {"Authorization": "Bearer not-a-key"}
    for method, route in routes:
        for headers in ({}, bad):
            response = await call(
                client, method, route, headers, run_id=UNKNOWN, confirmation_id="c"
            )
            assert response.status_code == 401, (method, route, headers, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert "not-a-key" not in response.text

    burst = 3
    app.state.auth_throttle = FailedAuthThrottle(burst=burst, per_minute=0.001)
    statuses = []
    for method, route in routes:
        response = await call(client, method, route, bad, run_id=UNKNOWN, confirmation_id="c")
        statuses.append(response.status_code)
        if response.status_code == 429:
            assert int(response.headers["retry-after"]) > 0
    assert statuses == [401] * burst + [429] * (len(routes) - burst)
    # The address is blocked, even without a key; a good key still gets through.
    assert (await client.get("/runs")).status_code == 429
    assert (await client.get("/runs", headers=as_(keys, "alice"))).status_code == 200
    for probe in PROBES:
        assert (await client.get(probe)).status_code == 200
