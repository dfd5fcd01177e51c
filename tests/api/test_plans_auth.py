from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import create_key
from app.settings import Settings
from app.store.repositories.runs import RunRepository
from tests.api.conftest import EXAMPLE_REGISTRY

PLAN = {
    "owner": "text-worker",
    "calls": [{"call_key": "1", "tool": "word_count", "args": {"text": "a b"}}],
}


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    return tmp_path / "keys.yml"


@pytest.fixture
def executor_key(keys_file: Path) -> str:
    return create_key(keys_file, "orchestrator", ["plans:execute"])


@pytest.fixture
def reader_key(keys_file: Path) -> str:
    return create_key(keys_file, "dashboard", ["runs:read", "metrics:read"])


@pytest.fixture
def settings(sqlite_url: str, keys_file: Path, executor_key: str, reader_key: str) -> Settings:
    return Settings(registries=[EXAMPLE_REGISTRY], database_url=sqlite_url, api_keys=keys_file)


async def test_a_plan_without_a_key_is_401_with_a_challenge(client: httpx.AsyncClient) -> None:
    response = await client.post("/plans/sequential", json=PLAN)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.headers["content-type"] == "application/problem+json"


async def test_a_bad_key_is_401(client: httpx.AsyncClient, executor_key: str) -> None:
    response = await client.post(
        "/plans/sequential", json=PLAN, headers={"Authorization": f"Bearer {executor_key}x"}
    )
    assert response.status_code == 401
    assert executor_key not in response.text


async def test_a_key_without_the_scope_is_403(client: httpx.AsyncClient, reader_key: str) -> None:
    response = await client.post(
        "/plans/sequential", json=PLAN, headers={"Authorization": f"Bearer {reader_key}"}
    )
    assert response.status_code == 403


async def test_the_run_records_the_key_name_never_the_key(
    app: FastAPI, client: httpx.AsyncClient, executor_key: str
) -> None:
    response = await client.post(
        "/plans/sequential", json=PLAN, headers={"Authorization": f"Bearer {executor_key}"}
    )
    assert response.status_code == 200
    async with app.state.runtime.sessions() as session:
        run = await RunRepository(session).get(response.json()["plan_id"])
    assert run is not None
    assert run.caller == "orchestrator"


async def test_probes_stay_open(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200
