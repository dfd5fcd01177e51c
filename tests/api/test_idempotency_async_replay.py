"""A replayed `Prefer: respond-async` request answers its run's status now.

The 202 is stored when the run starts; a retry after the run ended (or after a
crash left it `interrupted`) says so, with the run's `call_count`, instead of
`running`. The crash is a real `toolloop serve` killed with SIGKILL; the next
start's sweep marks the run `interrupted`, counting its stored receipts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from tests.api import run_tools
from tests.api.run_registry import REGISTRY, echo, sequential
from tests.api.shutdown_tools import STARTED_DIR_ENV, write_registry
from tests.live_server import ServerProcess
from tests.support.app import AppFactory
from tests.support.waiting import wait_for, wait_for_sync

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    run_tools.reset()
    yield
    run_tools.reset()


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


def _async_key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value, "Prefer": "respond-async"}


async def test_a_replay_after_the_run_ended_answers_its_end(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(echo("1", "a"), echo("2", "b"))
    first = await client.post("/plans/sequential", json=plan, headers=_async_key("k"))
    run_id = first.json()["run_id"]

    async def ended() -> bool:
        return (await client.get(f"/runs/{run_id}")).json()["status"] != "running"

    await wait_for(ended)
    again = await client.post("/plans/sequential", json=plan, headers=_async_key("k"))

    assert first.json() == {"run_id": run_id, "status": "running"}
    assert again.status_code == 202
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert again.json() == {"run_id": run_id, "status": "succeeded", "call_count": 2}


def _server(tmp_path: Path, registry: Path, database_url: str, log_name: str) -> ServerProcess:
    env = {
        "TOOLLOOP_REGISTRIES": str(registry),
        "TOOLLOOP_DATABASE_URL": database_url,
        "PYTHONPATH": str(REPO),
        STARTED_DIR_ENV: str(tmp_path),
    }
    server = ServerProcess(tmp_path, [], env, log_name=log_name)
    server.wait_until_answering()
    return server


def _receipts(base: str, run_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{base}/runs/{run_id}/receipts", timeout=30)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def test_a_replay_after_a_crash_answers_interrupted_with_the_stored_receipts(
    tmp_path: Path, database_url: str
) -> None:
    registry = write_registry(tmp_path)
    body = {
        "owner": "sleeper",
        "calls": [
            {"call_key": "1", "tool": "slow", "args": {"label": "a", "seconds": 0}},
            {"call_key": "2", "tool": "slow", "args": {"label": "b", "seconds": 600}},
        ],
    }
    headers = _async_key("after-crash")
    crashed = _server(tmp_path, registry, database_url, "crashed.log")
    restarted: ServerProcess | None = None
    try:
        first = httpx.post(f"{crashed.base}/plans/sequential", json=body, headers=headers)
        assert first.status_code == 202, first.text
        run_id = first.json()["run_id"]
        wait_for_sync(lambda: (tmp_path / "b.started").exists())
        wait_for_sync(lambda: len(_receipts(crashed.base, run_id)) == 1)
        crashed.kill()

        restarted = _server(tmp_path, registry, database_url, "restarted.log")
        again = httpx.post(f"{restarted.base}/plans/sequential", json=body, headers=headers)
        run = httpx.get(f"{restarted.base}/runs/{run_id}").json()
        stored = _receipts(restarted.base, run_id)
    finally:
        crashed.kill()
        if restarted is not None:
            restarted.stop()

    assert again.status_code == 202, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == {"run_id": run_id, "status": "interrupted", "call_count": 1}
    assert (run["status"], run["call_count"]) == ("interrupted", len(stored)) == ("interrupted", 1)
