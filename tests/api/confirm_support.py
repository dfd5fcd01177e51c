"""Helpers for the confirmation tests over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from app.store.models import Confirmation
from app.store.repositories.router_runs import RouterRunRepository
from tests.api import confirm_tools
from tests.api.confirm_registry import write_registry


@pytest.fixture(autouse=True)
def _counted() -> Iterator[None]:
    confirm_tools.reset()
    yield
    confirm_tools.reset()


def confirm_settings(tmp_path: Path, database_url: str, **overrides: Any) -> Settings:
    return Settings(registries=[write_registry(tmp_path)], database_url=database_url, **overrides)


def step(label: str, **extra: Any) -> dict[str, Any]:
    return {"call_key": label, "tool": "step", "args": {"label": label, **extra}}


def launch(label: str, **extra: Any) -> dict[str, Any]:
    return {"call_key": label, "tool": "launch", "args": {"label": label, **extra}}


def sequential(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "tester", "calls": list(calls), "context": {"trace_id": "t-1"}}


def parallel(*lanes: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "owner": "tester",
        "max_concurrency": 4,
        "lanes": [{"item_key": key, "calls": calls} for key, calls in lanes],
    }


async def decide(
    client: httpx.AsyncClient,
    run_id: str,
    confirmation_id: str,
    approve: bool,
    reason: str = "",
    **kwargs: Any,
) -> httpx.Response:
    return await client.post(
        f"/runs/{run_id}/confirmations/{confirmation_id}",
        json={"approve": approve, "reason": reason},
        **kwargs,
    )


async def stored_confirmations(app: FastAPI, run_id: str) -> list[Confirmation]:
    async with app.state.runtime.sessions() as session:
        return await RouterRunRepository(session).confirmations(run_id)


async def finished(app: FastAPI, run_id: str) -> None:
    """Wait until the run's task under the supervisor, if it has one, ended."""
    handle = app.state.runtime.runs.get(run_id)
    if handle is not None:
        await handle.wait()
