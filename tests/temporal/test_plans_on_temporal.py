"""Plans on the Temporal executor, end to end over HTTP: `toolloop serve` runs no tool,
one `toolloop worker` runs every call; the receipts are the local executor's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.support.app import AppFactory
from tests.temporal.conftest import Stack, open_stack
from tests.temporal.registry import REGISTRY

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    stack = open_stack(workdir, env, workers=1)
    yield stack
    stack.close()


SEQUENTIAL = {
    "owner": "tester",
    "calls": [
        {"call_key": "first", "tool": "echo", "args": {"text": "a", "secret": "hunter2"}},
        {"call_key": "second", "tool": "echo", "args": {"text": "b"}},
    ],
    "context": {"trace_id": "t-temporal"},
}


def test_a_sequential_plan_runs_on_the_worker(stack: Stack) -> None:
    response = stack.post("/plans/sequential", SEQUENTIAL)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "succeeded"
    assert [r["call_key"] for r in body["receipts"]] == ["first", "second"]
    assert [r["status"] for r in body["receipts"]] == ["succeeded", "succeeded"]
    assert body["receipts"][1]["output"]["text"] == "b"
    # The answer is the stored copy: the redacted argument's value is not in it.
    assert "hunter2" not in response.text
    assert "hunter2" not in stack.get(f"/runs/{body['plan_id']}/receipts").text
    run = stack.get(f"/runs/{body['plan_id']}").json()
    assert run["status"] == "succeeded"
    assert run["receipt_count"] == 2


def test_the_receipts_have_the_local_executors_shape(stack: Stack, tmp_path: Path) -> None:
    remote = stack.post("/plans/sequential", SEQUENTIAL).json()

    local = asyncio.run(_run_locally(tmp_path, SEQUENTIAL))

    for there, here in zip(remote["receipts"], local["receipts"], strict=True):
        assert there.keys() == here.keys()
        for same in ("call_key", "tool", "status", "fingerprint", "attempts", "cache_hit"):
            assert there[same] == here[same]
    assert remote.keys() == local.keys()


async def _run_locally(tmp_path: Path, plan: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from app.api.app import create_app

    settings: Settings = AppFactory(
        f"sqlite+aiosqlite:///{tmp_path / 'local.db'}", tmp_path
    ).settings(REGISTRY)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/plans/sequential", json=plan)
            assert response.status_code == 200, response.text
            answer: dict[str, Any] = response.json()
            return answer
